package dev.dkg.kafka.it;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.source.SourceConnector;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;

/**
 * A test source connector: one task emitting {@code records} records with Zipf(1.1)-distributed string keys over
 * {@code keys} keys ({@link Zipf#key}) and the record's sequence number as its value, then nothing. The records
 * name no partition, so the worker's producer (and its {@code partitioner.class}) places them.
 */
public class SkewedSourceConnector extends SourceConnector {
    /** Target topic. */
    public static final String TOPIC = "topic";
    /** Number of records to emit. */
    public static final String RECORDS = "records";
    /** Number of distinct keys. */
    public static final String KEYS = "keys";

    private Map<String, String> props;

    @Override
    public String version() {
        return "test";
    }

    @Override
    public void start(Map<String, String> props) {
        this.props = Map.copyOf(props);
    }

    @Override
    public Class<? extends Task> taskClass() {
        return SkewedTask.class;
    }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        return List.of(props);
    }

    @Override
    public void stop() {}

    @Override
    public ConfigDef config() {
        return new ConfigDef()
                .define(TOPIC, ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "target topic")
                .define(RECORDS, ConfigDef.Type.INT, ConfigDef.Importance.HIGH, "records to emit")
                .define(KEYS, ConfigDef.Type.INT, ConfigDef.Importance.HIGH, "distinct keys");
    }

    /** Emits the records in polls of up to 500, then idles. */
    public static class SkewedTask extends SourceTask {
        private String topic;
        private int records;
        private Zipf zipf;
        private int next;

        @Override
        public String version() {
            return "test";
        }

        @Override
        public void start(Map<String, String> props) {
            topic = props.get(TOPIC);
            records = Integer.parseInt(props.get(RECORDS));
            zipf = new Zipf(Integer.parseInt(props.get(KEYS)), 1.1, 5);
        }

        @Override
        public List<SourceRecord> poll() throws InterruptedException {
            if (next >= records) {
                Thread.sleep(100);
                return null;
            }
            List<SourceRecord> out = new ArrayList<>();
            for (int i = 0; i < 500 && next < records; i++, next++) {
                String key = new String(zipf.keyOf(zipf.nextRank()), StandardCharsets.UTF_8);
                out.add(new SourceRecord(Map.of("source", "skewed"), Map.of("seq", next), topic, null,
                        Schema.STRING_SCHEMA, key, Schema.STRING_SCHEMA, Integer.toString(next)));
            }
            return out;
        }

        @Override
        public void stop() {}
    }
}

package dev.dkg.kafka.it;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.List;
import java.util.Random;
import java.util.StringJoiner;
import java.util.function.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.utils.Utils;

/**
 * An assignment document (format {@code dkg.assignment}, version 1, as {@code partitioner/src/assignment.rs}
 * writes it) built by the tests from a bucket table and heavy keys, and the placement it names computed
 * independently of the plug-in.
 *
 * <p>The bucket hash is murmur2 with a seed the document names. These documents name Kafka's own seed
 * ({@code 0x9747b28c}), so the bucket of a key is {@code toPositive(Utils.murmur2(key)) % buckets} with Kafka's
 * {@link Utils#murmur2}: an expectation that shares no code with the plug-in. Their tables are shuffled, so the
 * placement differs from Kafka's {@code % partitions}.
 */
public final class Doc {
    /** Kafka's murmur2 seed (Java {@code Utils.murmur2}), as the unsigned number the document carries. */
    public static final long KAFKA_SEED = 0x9747b28cL;

    /** One heavy key and its partition. */
    public record Heavy(byte[] key, int partition) {}

    private final String topic;
    private final int partitions;
    private final long epoch;
    private final int[] table;
    private final List<Heavy> heavy;
    private final long createdAtMs;

    /** A document for {@code topic} with Kafka's murmur2 seed as the bucket seed, created now. */
    public Doc(String topic, int partitions, long epoch, int[] table, List<Heavy> heavy) {
        this(topic, partitions, epoch, table, heavy, System.currentTimeMillis());
    }

    private Doc(String topic, int partitions, long epoch, int[] table, List<Heavy> heavy, long createdAtMs) {
        this.topic = topic;
        this.partitions = partitions;
        this.epoch = epoch;
        this.table = table.clone();
        this.heavy = List.copyOf(heavy);
        this.createdAtMs = createdAtMs;
    }

    /**
     * A document with {@code bucketsPerPartition * partitions} buckets shuffled by {@code shuffleSeed} (each
     * partition owns {@code bucketsPerPartition} of them) and the given heavy keys.
     */
    public static Doc shuffled(String topic, int partitions, long epoch, int bucketsPerPartition, long shuffleSeed,
            List<Heavy> heavy) {
        int[] table = new int[partitions * bucketsPerPartition];
        for (int b = 0; b < table.length; b++) {
            table[b] = b % partitions;
        }
        Random rng = new Random(shuffleSeed);
        for (int i = table.length - 1; i > 0; i--) {
            int j = rng.nextInt(i + 1);
            int t = table[i];
            table[i] = table[j];
            table[j] = t;
        }
        return new Doc(topic, partitions, epoch, table, heavy);
    }

    /** A document sending every non-heavy key to {@code partition}. */
    public static Doc constant(String topic, int partitions, long epoch, int partition, List<Heavy> heavy) {
        int[] table = new int[8];
        Arrays.fill(table, partition);
        return new Doc(topic, partitions, epoch, table, heavy);
    }

    /** The document's epoch. */
    public long epoch() {
        return epoch;
    }

    /** The data topic (the document's {@code topic}, and its control-record key). */
    public String topic() {
        return topic;
    }

    /** The same document under another epoch. */
    public Doc withEpoch(long newEpoch) {
        return new Doc(topic, partitions, newEpoch, table, heavy, createdAtMs);
    }

    /**
     * The next epoch's document as a sampler publishes it: this one with {@code buckets} of its buckets (chosen by
     * {@code seed}) moved to another partition, everything else in place.
     */
    public Doc movingBuckets(long newEpoch, int buckets, long seed) {
        int[] next = table.clone();
        Random rng = new Random(seed);
        for (int i = 0; i < buckets; i++) {
            int b = rng.nextInt(next.length);
            next[b] = (next[b] + 1 + rng.nextInt(partitions - 1)) % partitions;
        }
        return new Doc(topic, partitions, newEpoch, next, heavy);
    }

    /** The same document for another topic name (the {@code topic} field). */
    public Doc withTopic(String newTopic) {
        return new Doc(newTopic, partitions, epoch, table, heavy, createdAtMs);
    }

    /**
     * A consumer-side check of records placed by this document: {@link Placement#accept} each record read back,
     * then {@link Placement#assertPlaced}.
     */
    public Placement placement() {
        return new Placement(this);
    }

    /** Records checked against a document's placement. */
    public static final class Placement implements Consumer<ConsumerRecord<byte[], byte[]>> {
        private final Doc doc;
        private final List<String> misplaced = new ArrayList<>();
        private long records;
        private long moved;

        private Placement(Doc doc) {
            this.doc = doc;
        }

        @Override
        public void accept(ConsumerRecord<byte[], byte[]> r) {
            int want = doc.expectedPartition(r.key());
            records++;
            if (want != Broker.kafkaPartition(r.key(), doc.partitions)) {
                moved++;
            }
            if (r.partition() != want && misplaced.size() < 20) {
                misplaced.add(new String(r.key(), StandardCharsets.UTF_8) + " on " + r.partition() + ", expected "
                        + want);
            }
        }

        /**
         * Every record was on its expected partition, and most of them (over half) on one Kafka's own placement
         * would not have chosen, so the check tells the document's placement from the client's.
         */
        public void assertPlaced() {
            assertTrue(misplaced.isEmpty(), "misplaced: " + misplaced);
            assertTrue(records > 0, "no records checked");
            assertTrue(moved * 2 > records, moved + " of " + records + " records placed apart from Kafka's hashing");
        }
    }

    /** The document's compact JSON text (the control-topic value). */
    public String json() {
        StringJoiner tableJson = new StringJoiner(",", "[", "]");
        for (int p : table) {
            tableJson.add(Integer.toString(p));
        }
        StringJoiner heavyJson = new StringJoiner(",", "[", "]");
        for (Heavy h : heavy) {
            heavyJson.add("{\"key_b64\":\"" + Base64.getEncoder().encodeToString(h.key()) + "\",\"partition\":"
                    + h.partition() + ",\"weight\":1000}");
        }
        StringJoiner load = new StringJoiner(",", "[", "]");
        for (int i = 0; i < partitions; i++) {
            load.add(Double.toString(1.0 / partitions));
        }
        return "{\"format\":\"dkg.assignment\",\"version\":1,\"topic\":\"" + topic + "\",\"partitions\":"
                + partitions + ",\"epoch\":" + epoch + ",\"bucket_hash\":{\"function\":\"murmur2\",\"seed\":"
                + KAFKA_SEED + "},\"buckets\":" + table.length + ",\"table\":" + tableJson + ",\"heavy\":" + heavyJson
                + ",\"params\":{\"theta\":0.01,\"epsilon\":0.005,\"mu\":4.0,\"window_records\":100000}"
                + ",\"created_at_ms\":" + createdAtMs + ",\"predicted_load\":" + load + "}";
    }

    /** A split heavy key (format version 2): its parts' partitions and weights, in document order. */
    public record Split(byte[] key, int[] partitions, int[] weights) {}

    /**
     * The document as version 2 (spec section 11): the same members and heavy keys, plus {@code splits} as split
     * heavy entries, the table as {@code table_b64} (1-byte entries: at most 256 partitions) and a
     * {@code generation}.
     */
    public String jsonV2(List<Split> splits, String generation) {
        assertTrue(partitions <= 256, "1-byte table entries");
        byte[] packed = new byte[table.length];
        for (int b = 0; b < table.length; b++) {
            packed[b] = (byte) table[b];
        }
        StringJoiner entries = new StringJoiner(",");
        for (Split s : splits) {
            StringJoiner parts = new StringJoiner(",", "[", "]");
            for (int i = 0; i < s.partitions().length; i++) {
                parts.add("{\"partition\":" + s.partitions()[i] + ",\"weight\":" + s.weights()[i] + "}");
            }
            entries.add("{\"key_b64\":\"" + Base64.getEncoder().encodeToString(s.key()) + "\",\"split\":" + parts
                    + ",\"weight\":5000}");
        }
        String v1 = json();
        String heavyStart = "\"heavy\":[";
        String withSplits = splits.isEmpty() ? v1 : v1.replace(heavyStart, heavyStart + entries
                + (heavy.isEmpty() ? "" : ","));
        String tableText = withSplits.substring(withSplits.indexOf("\"table\":["));
        tableText = tableText.substring(0, tableText.indexOf(']') + 1);
        return withSplits.replace("\"version\":1", "\"version\":2,\"generation\":\"" + generation + "\"")
                .replace(tableText, "\"table_b64\":\"" + Base64.getEncoder().encodeToString(packed)
                        + "\",\"table_width\":1");
    }

    /** The document's bytes (UTF-8 JSON). */
    public byte[] bytes() {
        return json().getBytes(StandardCharsets.UTF_8);
    }

    /**
     * Where the document places {@code key}, computed with Kafka's {@link Utils#murmur2}: its heavy partition if the
     * key is heavy, else its bucket's partition.
     */
    public int expectedPartition(byte[] key) {
        for (Heavy h : heavy) {
            if (Arrays.equals(h.key(), key)) {
                return h.partition();
            }
        }
        return table[Utils.toPositive(Utils.murmur2(key)) % table.length];
    }
}

package dev.dkg.kafka.it;

import dev.dkg.kafka.Assignment;
import dev.dkg.kafka.AssignmentException;
import dev.dkg.kafka.DkgMetrics;
import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import javax.management.JMException;
import javax.management.MBeanAttributeInfo;
import javax.management.MBeanServer;
import javax.management.ObjectName;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.utils.AppInfoParser;

/**
 * What the integration tests read from the plug-in: its metrics as a user sees them ({@link #metrics}: the
 * producer's {@code metrics()} for the KIP-877 partitioner, JMX for {@code dev.dkg.kafka.DkgPartitioner}'s own
 * registry; names from {@link DkgMetrics}), and its {@code Assignment} lookup as the second, in-process expectation. One
 * place, so the metric names live here only.
 */
public final class Plugin {
    private Plugin() {}

    /** Whether the runtime kafka-clients has KIP-877's Monitorable (4.1+). */
    public static boolean hasMonitorable() {
        String[] v = AppInfoParser.getVersion().split("[.-]");
        int major = Integer.parseInt(v[0]);
        return major > 4 || major == 4 && Integer.parseInt(v[1]) >= 1;
    }

    /**
     * The producer's metrics and, for a {@code dev.dkg.kafka.DkgPartitioner} (its own registry), the plug-in's
     * MBeans of this producer's client id ({@code kafka.producer:type=plugins,client-id=...}) read back from JMX as
     * metrics (group = {@code type}, tags = the other key properties).
     */
    public static Map<MetricName, Metric> metrics(Producer<?, ?> producer) {
        Map<MetricName, Metric> all = new HashMap<>(producer.metrics());
        String clientId = null;
        for (MetricName n : all.keySet()) {
            if (n.tags().containsKey("client-id")) {
                clientId = n.tags().get("client-id");
                break;
            }
        }
        MBeanServer server = ManagementFactory.getPlatformMBeanServer();
        try {
            for (ObjectName o : server.queryNames(new ObjectName("kafka.producer:type=plugins,*"), null)) {
                if (clientId == null || !clientId.equals(o.getKeyProperty("client-id"))) {
                    continue;
                }
                Map<String, String> tags = new LinkedHashMap<>(o.getKeyPropertyList());
                tags.remove("type");
                for (MBeanAttributeInfo a : server.getMBeanInfo(o).getAttributes()) {
                    MetricName name = new MetricName(a.getName(), o.getKeyProperty("type"), "", tags);
                    all.putIfAbsent(name, new JmxMetric(server, o, name));
                }
            }
        } catch (JMException e) {
            throw new AssertionError("reading the plug-in's MBeans", e);
        }
        return all;
    }

    /** A metric read from an MBean attribute at every {@code metricValue()}. */
    private static final class JmxMetric implements Metric {
        private final MBeanServer server;
        private final ObjectName object;
        private final MetricName name;

        JmxMetric(MBeanServer server, ObjectName object, MetricName name) {
            this.server = server;
            this.object = object;
            this.name = name;
        }

        @Override
        public MetricName metricName() {
            return name;
        }

        @Override
        public Object metricValue() {
            try {
                return server.getAttribute(object, name.name());
            } catch (JMException e) {
                throw new AssertionError("reading " + object + " " + name.name(), e);
            }
        }
    }

    /** The epoch in force for {@code topic} (0 = none), from the plug-in's {@code epoch} metric. */
    public static long epoch(Producer<?, ?> producer, String topic) {
        Double v = Broker.metric(metrics(producer), DkgMetrics.EPOCH, "topic", topic);
        return v == null ? 0 : v.longValue();
    }

    /** Waits until the plug-in in {@code producer} has {@code epoch} in force for {@code topic}. */
    public static Duration awaitEpoch(Producer<?, ?> producer, String topic, long epoch, Duration timeout) {
        return Broker.waitUntil("epoch " + epoch + " of " + topic + " in force", timeout,
                () -> epoch(producer, topic) == epoch);
    }

    /** Control-topic records rejected for {@code reason} (a reject label such as {@code stale_epoch}), every topic. */
    public static long rejected(Map<MetricName, ? extends Metric> metrics, String reason) {
        long n = 0;
        for (Map.Entry<MetricName, ? extends Metric> e : metrics.entrySet()) {
            if (e.getKey().name().equals(DkgMetrics.ASSIGNMENTS_REJECTED_TOTAL)
                    && reason.equals(e.getKey().tags().get("reason"))) {
                n += ((Number) e.getValue().metricValue()).longValue();
            }
        }
        return n;
    }

    /**
     * Control-topic records rejected for {@code reason} under the {@code topic} tag (Kafka's plug-in metrics quote
     * a value JMX cannot hold bare, such as {@link DkgMetrics#OTHER_TOPIC}: either form matches).
     */
    public static long rejected(Map<MetricName, ? extends Metric> metrics, String topic, String reason) {
        Double v = Broker.metric(metrics, DkgMetrics.ASSIGNMENTS_REJECTED_TOTAL, "topic", topic, "reason", reason);
        if (v == null) {
            v = Broker.metric(metrics, DkgMetrics.ASSIGNMENTS_REJECTED_TOTAL, "topic", "\"" + topic + "\"", "reason",
                    reason);
        }
        return v == null ? 0 : v.longValue();
    }

    /** Records the plug-in placed for {@code topic} by {@code route} ({@code heavy}, {@code bucket}, ...). */
    public static long records(Map<MetricName, ? extends Metric> metrics, String topic, String route) {
        Double v = Broker.metric(metrics, DkgMetrics.RECORDS_TOTAL, "topic", topic, "route", route);
        return v == null ? 0 : v.longValue();
    }

    /** Where the plug-in's own {@code Assignment} decoder and lookup place {@code key} under {@code doc}. */
    public static int lookup(Doc doc, byte[] key) {
        try {
            return Assignment.fromJson(doc.bytes()).partitionFor(key);
        } catch (AssignmentException e) {
            throw new AssertionError("the plug-in rejects a test document: " + doc.json(), e);
        }
    }
}

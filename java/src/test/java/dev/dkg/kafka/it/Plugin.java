package dev.dkg.kafka.it;

import dev.dkg.kafka.Assignment;
import dev.dkg.kafka.AssignmentException;
import dev.dkg.kafka.DkgMetrics;
import java.time.Duration;
import java.util.Map;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;

/**
 * What the integration tests read from the plug-in: its metrics as a producer reports them ({@code metrics()},
 * names from {@link DkgMetrics}), and its {@code Assignment} lookup as the second, in-process expectation. One
 * place, so the metric names live here only.
 */
public final class Plugin {
    private Plugin() {}

    /** The epoch in force for {@code topic} (0 = none), from the plug-in's {@code epoch} metric. */
    public static long epoch(Producer<?, ?> producer, String topic) {
        Double v = Broker.metric(producer.metrics(), DkgMetrics.EPOCH, "topic", topic);
        return v == null ? 0 : v.longValue();
    }

    /** Waits until the plug-in in {@code producer} has {@code epoch} in force for {@code topic}. */
    public static Duration awaitEpoch(Producer<?, ?> producer, String topic, long epoch, Duration timeout) {
        return Broker.waitUntil("epoch " + epoch + " of " + topic + " in force", timeout,
                () -> epoch(producer, topic) == epoch);
    }

    /** Control-topic records rejected for {@code reason} (a reject label such as {@code stale_epoch}). */
    public static long rejected(Map<MetricName, ? extends Metric> metrics, String reason) {
        Double v = Broker.metric(metrics, DkgMetrics.ASSIGNMENTS_REJECTED_TOTAL, "reason", reason);
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

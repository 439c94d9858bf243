package dev.dkg.kafka.kip877;

import dev.dkg.kafka.DkgMetrics;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.kafka.common.metrics.Measurable;
import org.apache.kafka.common.metrics.Monitorable;
import org.apache.kafka.common.metrics.PluginMetrics;

/**
 * {@link dev.dkg.kafka.DkgPartitioner} for kafka-clients 4.1 and newer, whose metrics go to the producer's own
 * metrics ({@code Monitorable}, KIP-877): its {@code metrics()}, its {@code metric.reporters} and JMX
 * ({@code kafka.producer:type=plugins,...,config=partitioner.class,class=DkgPartitioner}; the simple class name
 * is the base class's on purpose, so both give the same tags). Placement is the base class's.
 *
 * <p>{@code partitioner.class=dev.dkg.kafka.kip877.DkgPartitioner}. A 3.x or 4.0 client cannot load this class
 * ({@code Monitorable} is missing there): use {@code dev.dkg.kafka.DkgPartitioner}, which loads on every client and
 * reports the same metrics to JMX from a registry of its own. Nothing else in the plug-in refers to this package,
 * so it is never loaded on the path a 3.x user takes.
 */
public final class DkgPartitioner extends dev.dkg.kafka.DkgPartitioner implements Monitorable {
    /** The instance Kafka creates from {@code partitioner.class}. */
    public DkgPartitioner() {
        super(true);
    }

    /** Registers the router's metrics in the producer's metrics (Kafka calls this after {@code configure}). */
    @Override
    public void withPluginMetrics(PluginMetrics metrics) {
        bindRouterMetrics(registrar(metrics));
    }

    /**
     * A registrar over a client's {@code PluginMetrics}, e.g. for {@code DkgRouter.bindMetrics} of a router shared
     * with a Kafka Streams partitioner, inside a plug-in of your own that the client hands its metrics.
     */
    public static DkgMetrics.Registrar registrar(PluginMetrics metrics) {
        return (String name, String description, Map<String, String> tags, Measurable value) ->
                metrics.addMetric(metrics.metricName(name, description, new LinkedHashMap<>(tags)), value);
    }
}

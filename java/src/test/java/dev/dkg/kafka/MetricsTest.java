package dev.dkg.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.metrics.Sensor;
import org.junit.jupiter.api.Test;

class MetricsTest {
    /** The plug-in metric {@code name} with {@code tags} besides the plug-in's own. */
    private static MetricName metricName(String name, Map<String, String> tags) {
        Map<String, String> all = pluginTags();
        all.putAll(tags);
        return new MetricName(name, "plugins", "", all);
    }

    private static double value(Metrics metrics, String name, Map<String, String> tags) {
        KafkaMetric m = metrics.metrics().get(metricName(name, tags));
        assertNotNull(m, () -> "no metric " + name + " " + tags + " among " + metrics.metrics().keySet());
        return ((Number) m.metricValue()).doubleValue();
    }

    private static boolean present(Metrics metrics, String name, Map<String, String> tags) {
        return metrics.metrics().containsKey(metricName(name, tags));
    }

    /** Registers in {@code metrics} as KIP-877's PluginMetrics does: group plugins, the plug-in's tags first. */
    static DkgMetrics.Registrar registrar(Metrics metrics, Map<String, String> pluginTags) {
        return (name, description, tags, value) -> {
            Map<String, String> all = new LinkedHashMap<>(pluginTags);
            all.putAll(tags);
            metrics.addMetric(metrics.metricName(name, DkgMetrics.GROUP, description, all), value);
        };
    }

    private static Map<String, String> pluginTags() {
        Map<String, String> tags = new LinkedHashMap<>();
        tags.put("config", "partitioner.class");
        tags.put("class", "DkgPartitioner");
        return tags;
    }

    /**
     * At recording level DEBUG heavy and bucket records are counted apart (the Rust and Python labels) and there is
     * no {@code assigned} series, so that summing over the routes still counts every record once.
     */
    @Test
    void debugLevelCountsHeavyAndBucketRecordsApart() throws Exception {
        try (Metrics metrics = new Metrics()) {
            DkgRouter router = DkgRouter.detached("_dkg.assignments", Sensor.RecordingLevel.DEBUG);
            assertTrue(router.countsRouteDetail());
            DkgPartitioner partitioner = new DkgPartitioner(router, 16384);
            router.bindMetrics(registrar(metrics, pluginTags()));
            router.apply(Docs.utf8("orders"), Docs.base().heavy("hot", 1).bytes());
            var cluster = Clusters.of("orders", 3);
            for (String key : new String[] {"hot", "cold", "cold2", "hot"}) {
                partitioner.partition("orders", null, Docs.utf8(key), null, null, cluster);
            }
            assertEquals(2, value(metrics, DkgMetrics.RECORDS_TOTAL, Map.of("topic", "orders", "route", "heavy")));
            assertEquals(2, value(metrics, DkgMetrics.RECORDS_TOTAL, Map.of("topic", "orders", "route", "bucket")));
            assertFalse(present(metrics, DkgMetrics.RECORDS_TOTAL, Map.of("topic", "orders", "route", "assigned")));
            assertEquals(4, router.records("orders", Route.ASSIGNED), "assigned is heavy + bucket at every level");
        }
    }

    /** The level comes from dkg.metrics.recording.level, else the client's metrics.recording.level, else INFO. */
    @Test
    void recordingLevelIsReadFromThePluginsSettingThenTheClients() {
        assertEquals(Sensor.RecordingLevel.INFO, DkgRouter.recordingLevel(Map.of()));
        assertEquals(Sensor.RecordingLevel.DEBUG, DkgRouter.recordingLevel(Map.of("metrics.recording.level", "DEBUG")));
        assertEquals(Sensor.RecordingLevel.TRACE, DkgRouter.recordingLevel(Map.of("metrics.recording.level", "TRACE")));
        assertEquals(Sensor.RecordingLevel.INFO, DkgRouter.recordingLevel(
                Map.of("metrics.recording.level", "DEBUG", "dkg.metrics.recording.level", "info")));
        assertEquals(Sensor.RecordingLevel.DEBUG, DkgRouter.recordingLevel(Map.of("dkg.metrics.recording.level", "debug")));
        ConfigException e = assertThrows(ConfigException.class,
                () -> DkgRouter.recordingLevel(Map.of("dkg.metrics.recording.level", "LOUD")));
        assertTrue(e.getMessage().contains("dkg.metrics.recording.level"), e.getMessage());
    }

    @Test
    void routerMetricsAppearInTheClientsMetricsWithTheRustNames() throws Exception {
        try (Metrics metrics = new Metrics()) {
            Map<String, String> pluginTags = pluginTags();
            DkgRouter router = DkgRouter.detached("_dkg.assignments");
            // A topic routed before the metrics were bound gets its metrics at binding time.
            router.partition("early", Docs.utf8("k"), 3);
            DkgPartitioner partitioner = new DkgPartitioner(router, 16384);
            router.bindMetrics(registrar(metrics, pluginTags));
            assertThrows(IllegalStateException.class, () -> router.bindMetrics(registrar(metrics, pluginTags)));

            long created = System.currentTimeMillis() - 60_000;
            router.apply(Docs.utf8("orders"), Docs.base().epoch(9).createdAtMs(created).heavy("hot", 1)
                    .split("warm", new int[] {2, 0}, new int[] {1, 1}).bytes());
            router.apply(Docs.utf8("orders"), Docs.utf8("nope"));
            var cluster = Clusters.of("orders", 3);
            partitioner.partition("orders", null, Docs.utf8("hot"), null, null, cluster);
            partitioner.partition("orders", null, Docs.utf8("cold"), null, null, cluster);
            partitioner.partition("orders", null, Docs.utf8("cold2"), null, null, cluster);
            // A split key (version 2) alternates over its parts, counted as "split".
            assertEquals(2, partitioner.partition("orders", null, Docs.utf8("warm"), null, null, cluster));
            assertEquals(0, partitioner.partition("orders", null, Docs.utf8("warm"), null, null, cluster));
            partitioner.partition("orders", null, null, null, null, cluster);
            partitioner.partition("orders", null, Docs.utf8("x"), null, null, Clusters.of("orders", 5));

            assertEquals(1, value(metrics, DkgMetrics.RECORDS_TOTAL, Map.of("topic", "early", "route", "fallback")));
            // INFO (the default): heavy and bucket records counted together, no heavy or bucket series.
            assertEquals(3, value(metrics, DkgMetrics.RECORDS_TOTAL, Map.of("topic", "orders", "route", "assigned")));
            for (String detail : new String[] {"heavy", "bucket"}) {
                assertFalse(present(metrics, DkgMetrics.RECORDS_TOTAL, Map.of("topic", "orders", "route", detail)));
            }
            assertEquals(2, value(metrics, DkgMetrics.RECORDS_TOTAL, Map.of("topic", "orders", "route", "split")));
            assertEquals(1, value(metrics, DkgMetrics.RECORDS_TOTAL, Map.of("topic", "orders", "route", "keyless")));
            assertEquals(1, value(metrics, DkgMetrics.RECORDS_TOTAL, Map.of("topic", "orders", "route", "fallback")));
            assertEquals(9, value(metrics, DkgMetrics.EPOCH, Map.of("topic", "orders")));
            assertEquals(0, value(metrics, DkgMetrics.EPOCH, Map.of("topic", "early")));
            // The last record saw 5 partitions, the assignment has 3: not in effect.
            assertEquals(0, value(metrics, DkgMetrics.ASSIGNMENT_IN_EFFECT, Map.of("topic", "orders")));
            partitioner.partition("orders", null, Docs.utf8("x"), null, null, cluster);
            assertEquals(1, value(metrics, DkgMetrics.ASSIGNMENT_IN_EFFECT, Map.of("topic", "orders")));
            double age = value(metrics, DkgMetrics.ASSIGNMENT_AGE_SECONDS, Map.of("topic", "orders"));
            assertTrue(age >= 60 && age < 600, "age " + age);
            assertTrue(Double.isNaN(value(metrics, DkgMetrics.ASSIGNMENT_AGE_SECONDS, Map.of("topic", "early"))));
            assertEquals(1, value(metrics, DkgMetrics.ASSIGNMENTS_REJECTED_TOTAL,
                    Map.of("topic", "orders", "reason", "malformed_json")));
            for (RejectReason r : RejectReason.values()) {
                if (r != RejectReason.MALFORMED_JSON) {
                    assertEquals(0, value(metrics, DkgMetrics.ASSIGNMENTS_REJECTED_TOTAL,
                            Map.of("topic", "orders", "reason", r.label())));
                }
            }
            partitioner.partition("orders", null, Docs.utf8("x"), null, null, null);
            assertEquals(1, value(metrics, DkgMetrics.PARTITIONER_ERRORS_TOTAL, Map.of()));
        }
    }
}

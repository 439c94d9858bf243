package dev.dkg.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.HashMap;
import java.util.Map;
import org.apache.kafka.common.metrics.Measurable;
import org.junit.jupiter.api.Test;

class ConsumerMetricsTest {
    @Test
    void commitsThatLeftOutTheirWindowAreCounted() {
        Map<String, Measurable> registered = new HashMap<>();
        ConsumerMetrics m = new ConsumerMetrics((name, description, tags, value) -> {
            if (tags.size() == 1) {
                registered.put(name, value);
            }
        }, "orders");
        Measurable leftOut = registered.get(DkgMetrics.CONSUMER_COMMIT_WINDOWS_LEFT_OUT_TOTAL);
        assertEquals(0.0, leftOut.measure(null, 0), "registered from the start");
        m.anomalies(new CoreTypes.Anomalies());
        assertEquals(0.0, leftOut.measure(null, 0), "commits that fit count nothing");
        CoreTypes.Anomalies a = new CoreTypes.Anomalies();
        a.windowsLeftOut = 2;
        m.anomalies(a);
        assertEquals(2.0, leftOut.measure(null, 0));
        assertEquals(2, m.windowsLeftOut());
        assertEquals("dkg-consumer-commit-windows-left-out-total", DkgMetrics.CONSUMER_COMMIT_WINDOWS_LEFT_OUT_TOTAL);
    }
}

package dev.dkg.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.Map;
import org.apache.kafka.common.config.ConfigException;
import org.junit.jupiter.api.Test;

class ControlFollowerConfigTest {
    @Test
    void consumerGetsOnlyConnectionSettingsPlusItsOwn() {
        Map<String, Object> producer = new HashMap<>();
        producer.put("bootstrap.servers", "b:1");
        producer.put("security.protocol", "SASL_SSL");
        producer.put("sasl.mechanism", "PLAIN");
        producer.put("sasl.jaas.config", "secret");
        producer.put("ssl.truststore.location", "/ts");
        producer.put("acks", "all");
        producer.put("linger.ms", 20);
        producer.put("partitioner.class", DkgPartitioner.class.getName());
        producer.put("key.serializer", "x");
        producer.put("client.id", "app");
        producer.put("dkg.consumer.request.timeout.ms", 1234);
        producer.put("dkg.consumer.fetch.max.wait.ms", 50);
        Map<String, Object> c = ControlFollower.consumerConfig(producer);
        assertEquals("b:1", c.get("bootstrap.servers"));
        assertEquals("SASL_SSL", c.get("security.protocol"));
        assertEquals("PLAIN", c.get("sasl.mechanism"));
        assertEquals("secret", c.get("sasl.jaas.config"));
        assertEquals("/ts", c.get("ssl.truststore.location"));
        assertEquals("app-dkg-control", c.get("client.id"));
        assertEquals("read_committed", c.get("isolation.level"));
        assertEquals(false, c.get("enable.auto.commit"));
        assertEquals(1234, c.get("request.timeout.ms"));
        assertEquals(50, c.get("fetch.max.wait.ms"), "dkg.consumer.* overrides the defaults");
        for (String dropped : new String[] {"acks", "linger.ms", "partitioner.class", "dkg.consumer.request.timeout.ms"}) {
            assertFalse(c.containsKey(dropped), dropped);
        }
        // Without a client.id, each internal client gets a number of its own (two producers in one JVM).
        Object first = ControlFollower.consumerConfig(Map.of()).get("client.id");
        Object second = ControlFollower.consumerConfig(Map.of()).get("client.id");
        assertTrue(first.toString().matches("dkg-control-[0-9]+"), first.toString());
        assertNotEquals(first, second);
    }

    @Test
    void badDkgSettingsFailConfigure() {
        assertThrows(ConfigException.class, () -> DkgRouter.start(Map.of(DkgConfig.STARTUP_TIMEOUT_MS_CONFIG, "soon")));
        assertThrows(ConfigException.class, () -> DkgRouter.start(Map.of(DkgConfig.STARTUP_TIMEOUT_MS_CONFIG, -1)));
        assertThrows(ConfigException.class, () -> DkgRouter.start(Map.of(DkgConfig.CONTROL_TOPIC_CONFIG, " ")));
        assertThrows(ConfigException.class, () -> new DkgPartitioner().configure(Map.of(DkgConfig.ROUTER_INSTANCE_CONFIG, "x")));
    }

    @Test
    void aGivenRouterIsUsed() {
        DkgRouter router = DkgRouter.detached("_dkg.assignments");
        DkgPartitioner p = new DkgPartitioner();
        p.configure(Map.of(DkgConfig.ROUTER_INSTANCE_CONFIG, router, "batch.size", "100"));
        assertEquals(router, p.router());
        router.apply(Docs.utf8("orders"), Docs.base().heavy("k", 2).bytes());
        assertEquals(2, p.partition("orders", null, Docs.utf8("k"), null, null, Clusters.of("orders", 3)));
        p.close();
    }
}

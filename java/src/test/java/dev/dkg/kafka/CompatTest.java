package dev.dkg.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dkg.kafka.streams.DkgStreamPartitioner;
import java.lang.management.ManagementFactory;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import javax.management.MBeanServer;
import javax.management.ObjectName;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.AppInfoParser;
import org.apache.kafka.streams.processor.StreamPartitioner;
import org.junit.jupiter.api.Test;

/**
 * The library on the kafka-clients the tests run against (the pinned 4.x, or 3.0.2 / 3.9.1 with
 * {@code -Dkafka.clients.version}, see the pom): the jar compiled against 4.x must load, link and implement the
 * client's interfaces there.
 */
class CompatTest {
    /** The runtime's kafka-clients version as "major.minor" numbers. */
    private static int[] runtime() {
        String[] v = AppInfoParser.getVersion().split("[.-]");
        return new int[] {Integer.parseInt(v[0]), Integer.parseInt(v[1])};
    }

    private static boolean hasMonitorable() {
        int[] v = runtime();
        return v[0] > 4 || v[0] == 4 && v[1] >= 1;
    }

    /** The leg really runs on the client it names (the pom passes kafka.clients.version). */
    @Test
    void runsOnTheRequestedClient() {
        String want = System.getProperty("dkg.kafka.clients.version");
        assertTrue(want != null && !want.isEmpty(), "the pom sets dkg.kafka.clients.version");
        assertEquals(want, AppInfoParser.getVersion());
    }

    /**
     * Every class of the library loads, initializes and reflects (its methods' and fields' types resolve) on this
     * client, except the KIP-877 partitioner below 4.1, which must not load there (nothing else refers to it).
     */
    @Test
    void everyClassLoadsOnThisClient() throws Exception {
        Path classes = Paths.get(URI.create(DkgPartitioner.class.getProtectionDomain().getCodeSource().getLocation()
                .toString()));
        List<String> names;
        try (Stream<Path> files = Files.walk(classes)) {
            names = files.map(p -> classes.relativize(p).toString())
                    .filter(p -> p.endsWith(".class") && p.startsWith("dev"))
                    .map(p -> p.substring(0, p.length() - ".class".length()).replace('/', '.'))
                    .sorted().collect(Collectors.toList());
        }
        assertTrue(names.size() > 20, "library classes found in " + classes + ": " + names);
        List<String> failed = new ArrayList<>();
        for (String name : names) {
            boolean kip877 = name.startsWith("dev.dkg.kafka.kip877.");
            try {
                Class<?> c = Class.forName(name, true, CompatTest.class.getClassLoader());
                if (name.equals(DkgKafkaConsumer.class.getName()) && !hasConsumer41Types()) {
                    // Its close(CloseOptions) and subscribe(SubscriptionPattern) implement Consumer 4.1's methods and
                    // name their 4.x classes: it loads, links and runs on older clients, but reflection over its
                    // methods fails there, with exactly those classes missing.
                    try {
                        c.getDeclaredMethods();
                        failed.add(name + ": its methods reflect on a client without CloseOptions");
                    } catch (NoClassDefFoundError e) {
                        if (!e.getMessage().endsWith("/CloseOptions") && !e.getMessage().endsWith("/SubscriptionPattern")) {
                            failed.add(name + ": " + e);
                        }
                    }
                    c.getDeclaredFields();
                    c.getDeclaredConstructors();
                    continue;
                }
                c.getDeclaredMethods();
                c.getDeclaredFields();
                c.getDeclaredConstructors();
                if (kip877 && !hasMonitorable()) {
                    failed.add(name + " loaded on a client without Monitorable");
                }
            } catch (LinkageError e) {
                if (!kip877 || hasMonitorable()) {
                    failed.add(name + ": " + e);
                }
            }
        }
        assertTrue(failed.isEmpty(), "on kafka-clients " + AppInfoParser.getVersion() + ": " + failed);
        assertEquals(hasMonitorable(), names.stream().anyMatch(n -> n.startsWith("dev.dkg.kafka.kip877.")
                && isMonitorable(n)));
    }

    /** Whether this client has Consumer 4.1's parameter classes (CloseOptions, SubscriptionPattern). */
    private static boolean hasConsumer41Types() {
        try {
            Class.forName("org.apache.kafka.clients.consumer.CloseOptions");
            Class.forName("org.apache.kafka.clients.consumer.SubscriptionPattern");
            return true;
        } catch (ClassNotFoundException e) {
            return false;
        }
    }

    private static boolean isMonitorable(String name) {
        try {
            Class<?> c = Class.forName(name);
            return Stream.of(c.getInterfaces()).anyMatch(i -> i.getSimpleName().equals("Monitorable"));
        } catch (ClassNotFoundException | LinkageError e) {
            return false;
        }
    }

    /**
     * The decorator implements every abstract method of this client's {@code Producer} (3.x's
     * {@code sendOffsetsToTransaction(Map, String)} among them, which 4.0 removed), so a caller compiled against
     * this client links.
     */
    @Test
    void producerDecoratorImplementsThisClientsProducer() throws Exception {
        assertImplements(Producer.class, DkgKafkaProducer.class);
        Method legacy = DkgKafkaProducer.class.getMethod("sendOffsetsToTransaction", java.util.Map.class,
                String.class);
        assertFalse(Modifier.isAbstract(legacy.getModifiers()));
    }

    /** The Streams partitioner implements every abstract method of this client's StreamPartitioner (3.0-3.3: partition). */
    @Test
    void streamPartitionerImplementsThisClientsInterface() throws Exception {
        assertImplements(StreamPartitioner.class, DkgStreamPartitioner.class);
        DkgRouter router = DkgRouter.detached("_dkg.assignments");
        router.apply(Docs.utf8("orders"), Docs.base().heavy("hot", 2).bytes());
        DkgStreamPartitioner<String, String> p = new DkgStreamPartitioner<>(router, Serdes.String().serializer());
        // Both entry points answer alike: the assignment's partition, or "leave it to the producer".
        assertEquals(Integer.valueOf(2), p.partition("orders", "hot", "v", 3));
        assertEquals(java.util.Optional.of(java.util.Set.of(2)), p.partitions("orders", "hot", "v", 3));
        assertEquals(null, p.partition("orders", null, "v", 3));
        assertEquals(java.util.Optional.empty(), p.partitions("orders", null, "v", 3));
    }

    private static void assertImplements(Class<?> api, Class<?> impl) throws Exception {
        List<String> missing = new ArrayList<>();
        for (Method m : api.getMethods()) {
            if (!Modifier.isAbstract(m.getModifiers())) {
                continue;
            }
            Method found = impl.getMethod(m.getName(), m.getParameterTypes());
            if (Modifier.isAbstract(found.getModifiers())) {
                missing.add(m.toString());
            }
        }
        assertTrue(missing.isEmpty(), impl.getSimpleName() + " lacks " + missing);
    }

    /**
     * The plug-in's own registry (DkgPartitioner on every client): the router's metrics under their names in JMX, in
     * the producer's domain with the plug-in's tags and the client id.
     */
    @Test
    void ownRegistryReportsTheRouterMetricsToJmx() throws Exception {
        LinkedHashMap<String, String> tags = new LinkedHashMap<>();
        tags.put("config", "partitioner.class");
        tags.put("class", "DkgPartitioner");
        tags.put("client-id", "compat-test");
        DkgRouter router = DkgRouter.detached("_dkg.assignments");
        try (DkgMetrics.OwnRegistry registry = DkgMetrics.ownRegistry("kafka.producer", tags)) {
            router.bindMetrics(registry);
            router.apply(Docs.utf8("orders"), Docs.base().epoch(7).heavy("hot", 1).bytes());
            router.partition("orders", Docs.utf8("hot"), 3);
            router.partition("orders", Docs.utf8("cold"), 3);
            MBeanServer server = ManagementFactory.getPlatformMBeanServer();
            ObjectName topic = new ObjectName("kafka.producer:type=plugins,config=partitioner.class,"
                    + "class=DkgPartitioner,client-id=compat-test,topic=orders");
            assertEquals(7.0, server.getAttribute(topic, DkgMetrics.EPOCH));
            ObjectName assigned = new ObjectName("kafka.producer:type=plugins,config=partitioner.class,"
                    + "class=DkgPartitioner,client-id=compat-test,topic=orders,route=assigned");
            assertEquals(2.0, server.getAttribute(assigned, DkgMetrics.RECORDS_TOTAL));
            ObjectName rejected = new ObjectName("kafka.producer:type=plugins,config=partitioner.class,"
                    + "class=DkgPartitioner,client-id=compat-test,topic=orders,reason=stale_epoch");
            assertEquals(0.0, server.getAttribute(rejected, DkgMetrics.ASSIGNMENTS_REJECTED_TOTAL));
        }
        assertTrue(ManagementFactory.getPlatformMBeanServer().queryNames(
                new ObjectName("kafka.producer:type=plugins,client-id=compat-test,*"), null).isEmpty(),
                "closing the registry removes its MBeans");
    }

    /** A 3.x-loadable path never names the KIP-877 class: the default partitioner is not Monitorable. */
    @Test
    void defaultPartitionerIsNotMonitorable() {
        assertFalse(Stream.of(DkgPartitioner.class.getInterfaces()).anyMatch(i -> i.getSimpleName()
                .equals("Monitorable")));
    }
}

package dev.dkg.kafka;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import org.apache.kafka.common.metrics.Sensor;
import org.apache.kafka.common.utils.Utils;
import org.junit.jupiter.api.Test;

/**
 * The golden vectors shared with the Rust implementation ({@code spec/vectors}, described in
 * {@code docs/spec.md}). The directory comes from the {@code dkg.vectors} system property (set by the pom);
 * a missing directory or file fails the test.
 */
class VectorsTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    private static JsonNode load(String file) throws IOException {
        String dir = System.getProperty("dkg.vectors");
        assertNotNull(dir, "system property dkg.vectors is not set (the pom sets it to ../spec/vectors)");
        Path path = Path.of(dir, file);
        assertTrue(Files.isRegularFile(path), "golden vector file missing: " + path.toAbsolutePath());
        JsonNode cases = JSON.readTree(path.toFile()).get("cases");
        assertTrue(cases != null && cases.isArray() && cases.size() > 0, file + " has no cases");
        return JSON.readTree(path.toFile());
    }

    private static byte[] b64(JsonNode n) {
        return Base64.getDecoder().decode(n.asText());
    }

    private static byte[] utf8OrNull(JsonNode n) {
        return n == null || n.isNull() ? null : n.asText().getBytes(StandardCharsets.UTF_8);
    }

    @Test
    void murmur2() throws IOException {
        int checked = 0;
        for (JsonNode c : load("murmur2.json").get("cases")) {
            byte[] key = b64(c.get("key_b64"));
            int want = c.get("murmur2").intValue();
            assertEquals(want, Murmur2.hash(key), c.toString());
            assertEquals(want, Utils.murmur2(key), "Kafka's own murmur2 agrees: " + c);
            for (Map.Entry<String, JsonNode> e : c.get("partitions").properties()) {
                int n = Integer.parseInt(e.getKey());
                assertEquals(e.getValue().intValue(), Murmur2.kafkaPartition(key, n), c + " n=" + n);
                assertEquals(e.getValue().intValue(), Clusters.kafkaPartition(key, n));
                checked++;
            }
        }
        assertTrue(checked > 0);
    }

    @Test
    void lookup() throws Exception {
        int keys = 0;
        for (JsonNode c : load("lookup.json").get("cases")) {
            keys += checkKeys(c, routerFor(c));
            // At the default level the heavy and bucket records are counted as one route.
            checkKeys(c, routerFor(c, Sensor.RecordingLevel.INFO));
        }
        assertTrue(keys > 0);
    }

    /** A detached router (recording level DEBUG: every route counted apart) that adopted the case's document. */
    private static DkgRouter routerFor(JsonNode c) throws AssignmentException {
        return routerFor(c, Sensor.RecordingLevel.DEBUG);
    }

    private static DkgRouter routerFor(JsonNode c, Sensor.RecordingLevel level) throws AssignmentException {
        byte[] doc = c.get("document_json").asText().getBytes(StandardCharsets.UTF_8);
        Assignment a = Assignment.fromJson(doc);
        DkgRouter router = DkgRouter.detached("_dkg.assignments", level);
        assertEquals(ControlUpdate.Outcome.ACCEPTED,
                router.apply(a.topic().getBytes(StandardCharsets.UTF_8), doc).outcome(), c.get("name").asText());
        return router;
    }

    /**
     * The case's {@code keys}: each placed by the router on a topic of {@code topic_partitions} partitions at its
     * {@code partition} and counted under its {@code route}, and (where the counts match) likewise by the bare
     * lookup. Returns the number of keys.
     */
    private static int checkKeys(JsonNode c, DkgRouter router) throws AssignmentException {
        String name = c.get("name").asText();
        Assignment a = Assignment.fromJson(c.get("document_json").asText().getBytes(StandardCharsets.UTF_8));
        int n = c.get("topic_partitions").intValue();
        int keys = 0;
        for (JsonNode k : c.get("keys")) {
            byte[] key = b64(k.get("key_b64"));
            int want = k.get("partition").intValue();
            String route = k.get("route").asText();
            long[] before = routeCounts(router, a.topic());
            assertEquals(want, router.partition(a.topic(), key, n), name + " " + k);
            long[] after = routeCounts(router, a.topic());
            Route taken = null;
            for (Route r : Route.values()) {
                // At DEBUG, ASSIGNED (their sum) moves with HEAVY or BUCKET.
                boolean derived = r == Route.ASSIGNED && router.countsRouteDetail();
                if (!derived && after[r.ordinal()] != before[r.ordinal()]) {
                    assertNull(taken, name + " " + k + ": counted under two routes");
                    taken = r;
                }
            }
            assertNotNull(taken);
            boolean assigned = route.equals("heavy") || route.equals("bucket");
            // ASSIGNED is heavy + bucket at every level; at INFO it is the only one of the three that moves.
            assertEquals(assigned ? 1 : 0, after[Route.ASSIGNED.ordinal()] - before[Route.ASSIGNED.ordinal()]);
            assertEquals(assigned && !router.countsRouteDetail() ? "assigned" : route, taken.label(), name + " " + k);
            if (n == a.partitions()) {
                assertEquals(want, a.partitionFor(key), name + " " + k);
                assertEquals(route, a.route(key).label(), name + " " + k);
            }
            keys++;
        }
        return keys;
    }

    /**
     * Version 2's split keys ({@code v2/split.json}, spec 4.6): the other keys as in {@code lookup.json}, and each
     * split key's first {@code picks_per_split_key} records of a fresh instance on exactly the listed partitions,
     * through the router (counted as {@code split}) and through a fresh bare {@code Assignment}.
     */
    @Test
    void split() throws Exception {
        JsonNode file = load("v2/split.json");
        int picksPerKey = file.get("picks_per_split_key").intValue();
        int picks = 0;
        for (JsonNode c : file.get("cases")) {
            String name = c.get("name").asText();
            DkgRouter router = routerFor(c);
            assertTrue(checkKeys(c, router) > 0, name);
            Assignment fresh = Assignment.fromJson(c.get("document_json").asText().getBytes(StandardCharsets.UTF_8));
            int n = c.get("topic_partitions").intValue();
            long splitBefore = router.records(fresh.topic(), Route.SPLIT);
            for (JsonNode k : c.get("split_keys")) {
                byte[] key = b64(k.get("key_b64"));
                JsonNode want = k.get("picks");
                assertEquals(picksPerKey, want.size(), name);
                int index = heavyIndex(fresh, key);
                JsonNode parts = k.get("parts");
                int[] partitions = fresh.splitPartitions(index);
                int[] weights = fresh.splitWeights(index);
                assertEquals(parts.size(), partitions.length, name);
                for (int j = 0; j < parts.size(); j++) {
                    assertEquals(parts.get(j).get("partition").intValue(), partitions[j], name);
                    assertEquals(parts.get(j).get("weight").intValue(), weights[j], name);
                }
                assertEquals(Route.SPLIT, fresh.route(key), name);
                for (int i = 0; i < want.size(); i++) {
                    assertEquals(want.get(i).intValue(), fresh.partitionFor(key), name + " split key pick " + i);
                    assertEquals(want.get(i).intValue(), router.partition(fresh.topic(), key, n),
                            name + " split key pick " + i + " (router)");
                    picks++;
                }
            }
            assertEquals(splitBefore + (long) c.get("split_keys").size() * picksPerKey,
                    router.records(fresh.topic(), Route.SPLIT), name);
        }
        assertTrue(picks > 0);
    }

    /**
     * Version 2's compact table ({@code v2/compact.json}, spec 4.6): each document decodes, equals its twin with a
     * JSON table where one is given (rule 8 compares decoded members), and places its keys as listed.
     */
    @Test
    void compact() throws Exception {
        int keys = 0;
        for (JsonNode c : load("v2/compact.json").get("cases")) {
            String name = c.get("name").asText();
            Assignment a = Assignment.fromJson(c.get("document_json").asText().getBytes(StandardCharsets.UTF_8));
            if (c.hasNonNull("twin_document_json")) {
                Assignment twin = Assignment.fromJson(
                        c.get("twin_document_json").asText().getBytes(StandardCharsets.UTF_8));
                assertEquals(twin, a, name);
                assertArrayEquals(twin.table(), a.table(), name);
            }
            keys += checkKeys(c, routerFor(c));
        }
        assertTrue(keys > 0);
    }

    private static int heavyIndex(Assignment a, byte[] key) {
        for (int i = 0; i < a.heavyCount(); i++) {
            if (Arrays.equals(a.heavyKey(i), key)) {
                return i;
            }
        }
        throw new AssertionError("split key not among the heavy keys");
    }

    private static long[] routeCounts(DkgRouter router, String topic) {
        long[] out = new long[Route.values().length];
        for (Route r : Route.values()) {
            out[r.ordinal()] = router.records(topic, r);
        }
        return out;
    }

    @Test
    void reject() throws IOException {
        rejectAll("reject.json");
    }

    /** Version 2's reject cases ({@code v2/reject.json}, spec 4.6), applied like those of {@code reject.json}. */
    @Test
    void rejectV2() throws IOException {
        rejectAll("v2/reject.json");
    }

    private static void rejectAll(String file) throws IOException {
        List<String> failures = new ArrayList<>();
        int checked = 0;
        for (JsonNode c : load(file).get("cases")) {
            String name = c.get("name").asText();
            RejectReason want = RejectReason.ofLabel(c.get("reason").asText());
            byte[] doc;
            if (c.hasNonNull("document_b64")) {
                doc = b64(c.get("document_b64"));
            } else {
                int size = c.get("generate").get("valid_document_padded_to_bytes").intValue();
                byte[] valid = Docs.base().bytes();
                doc = Arrays.copyOf(valid, size);
                Arrays.fill(doc, valid.length, size, (byte) ' ');
            }
            try {
                Assignment.fromJson(doc);
                failures.add(name + ": accepted, want " + want);
            } catch (AssignmentException e) {
                if (e.reason() != want) {
                    failures.add(name + ": " + e.reason() + " (" + e.getMessage() + "), want " + want);
                }
            }
            ControlUpdate u = new AssignmentBook().apply("orders".getBytes(StandardCharsets.UTF_8), doc);
            if (u.reason() != want) {
                failures.add(name + " (book): " + u.outcome() + " " + u.reason() + ", want " + want);
            }
            checked++;
        }
        if (!failures.isEmpty()) {
            fail(failures.size() + " of " + checked + " " + file + " vectors differ:\n" + String.join("\n", failures));
        }
    }

    @Test
    void control() throws IOException {
        assertTrue(controlAll("control.json") > 0);
    }

    /**
     * Version 2's control-topic rules ({@code v2/control.json}, spec 6.4): retraction floors ({@code floor_after})
     * and generations (outcomes {@code reset} and {@code reread}), applied like {@code control.json}.
     */
    @Test
    void controlV2() throws IOException {
        assertTrue(controlAll("v2/control.json") > 0);
    }

    private static int controlAll(String file) throws IOException {
        int checked = 0;
        for (JsonNode c : load(file).get("cases")) {
            String name = c.get("name").asText();
            AssignmentBook book = new AssignmentBook();
            DkgRouter router = DkgRouter.detached("_dkg.assignments");
            JsonNode records = c.get("records");
            JsonNode expect = c.get("expect");
            assertEquals(records.size(), expect.size(), name);
            for (int i = 0; i < records.size(); i++) {
                JsonNode r = records.get(i);
                JsonNode e = expect.get(i);
                byte[] key = r.hasNonNull("key_b64") ? b64(r.get("key_b64")) : utf8OrNull(r.get("key_utf8"));
                byte[] value = utf8OrNull(r.get("value_json"));
                String at = name + " record " + i;
                for (ControlUpdate u : new ControlUpdate[] {book.apply(key, value), router.apply(key, value)}) {
                    assertEquals(e.get("outcome").asText(), u.outcome().label(), at + ": " + u.detail());
                    if (e.hasNonNull("reason")) {
                        assertEquals(e.get("reason").asText(), u.reason().label(), at);
                    } else {
                        assertEquals(null, u.reason(), at);
                    }
                }
                String topic = key == null ? null : new String(key, StandardCharsets.UTF_8);
                Assignment now = u8(key) ? book.get(topic) : null;
                Assignment routed = u8(key) ? router.assignment(topic) : null;
                if (e.hasNonNull("epoch_after")) {
                    assertNotNull(now, at + ": expected epoch " + e.get("epoch_after"));
                    assertEquals(e.get("epoch_after").asText(), Long.toUnsignedString(now.epoch()), at);
                    assertEquals(now, routed, at + ": the router follows the book");
                } else {
                    assertEquals(null, now, at);
                    assertEquals(null, routed, at);
                }
                if (e.has("floor_after")) {
                    OptionalLong floor = u8(key) ? book.retractedAt(topic) : OptionalLong.empty();
                    String want = e.get("floor_after").isNull() ? "none" : e.get("floor_after").asText();
                    assertEquals(want, floor.isPresent() ? Long.toUnsignedString(floor.getAsLong()) : "none", at);
                }
                checked++;
            }
        }
        return checked;
    }

    private static boolean u8(byte[] key) {
        if (key == null || key.length == 0) {
            return false;
        }
        return Arrays.equals(key, new String(key, StandardCharsets.UTF_8).getBytes(StandardCharsets.UTF_8));
    }

    /**
     * 10^6 pseudo-random keys under each random assignment: the FNV-1a digest of their partitions and the first
     * 100 partitions equal the Rust producer's.
     */
    @Test
    void random() throws Exception {
        JsonNode file = load("random.json");
        int keyCount = file.get("key_count").intValue();
        assertEquals(1_000_000, keyCount);
        int cases = 0;
        for (JsonNode c : file.get("cases")) {
            byte[] doc = c.get("document_json").asText().getBytes(StandardCharsets.UTF_8);
            Assignment a = Assignment.fromJson(doc);
            int n = c.get("topic_partitions").intValue();
            DkgRouter router = DkgRouter.detached("_dkg.assignments");
            router.apply(a.topic().getBytes(StandardCharsets.UTF_8), doc);
            JsonNode first = c.get("first_partitions");
            SplitMix64 keys = new SplitMix64(Long.parseUnsignedLong(c.get("seed").asText()));
            long digest = 0xcbf29ce484222325L;
            for (int i = 0; i < keyCount; i++) {
                int p = router.partition(a.topic(), keys.nextKey(), n);
                if (i < first.size()) {
                    assertEquals(first.get(i).intValue(), p, "seed " + c.get("seed") + " key " + i);
                }
                for (int s = 0; s < 32; s += 8) {
                    digest ^= (p >>> s) & 0xff;
                    digest *= 0x100000001b3L;
                }
            }
            assertEquals(c.get("digest").asText(), String.format("%016x", digest), "seed " + c.get("seed"));
            cases++;
        }
        assertEquals(20, cases);
        assertFalse(file.get("key_generator").asText().isEmpty());
    }

    /** The key stream of random.json (splitmix64: Steele, Lea, Flood, OOPSLA 2014). */
    static final class SplitMix64 {
        private long state;

        SplitMix64(long seed) {
            state = seed;
        }

        long next() {
            state += 0x9E3779B97F4A7C15L;
            long z = state;
            z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
            z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
            return z ^ (z >>> 31);
        }

        /** {@code len = next() mod 65}, then ceil(len/8) more values little-endian, truncated to len. */
        byte[] nextKey() {
            int len = (int) Long.remainderUnsigned(next(), 65);
            byte[] key = new byte[len];
            for (int i = 0; i < len; i += 8) {
                long w = next();
                for (int j = 0; j < 8 && i + j < len; j++) {
                    key[i + j] = (byte) (w >>> (8 * j));
                }
            }
            return key;
        }
    }
}

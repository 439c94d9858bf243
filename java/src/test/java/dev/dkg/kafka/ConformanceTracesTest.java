package dev.dkg.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * Replays every conformance trace of the consumer rules ({@code spec/traces}, format in its README) through the
 * Java state machine and glue ({@link ConsumerDriver} over {@link ConsumerCore}), the Kafka client replaced by the
 * trace: every step's outputs must be the trace's. The directory comes from the {@code dkg.traces} system property
 * (the pom sets it to {@code ../spec/traces}); {@code DKG_TRACES_DIR} may name another.
 */
class ConformanceTracesTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;

    static Path dir() {
        String env = System.getenv("DKG_TRACES_DIR");
        String prop = System.getProperty("dkg.traces");
        assertNotNull(prop, "system property dkg.traces is not set (the pom sets it to ../spec/traces)");
        return Path.of(env != null && !env.isEmpty() ? env : prop);
    }

    static List<Path> traces() throws IOException {
        Path d = dir();
        assertTrue(Files.isDirectory(d), "conformance traces missing: " + d.toAbsolutePath());
        try (Stream<Path> s = Files.list(d)) {
            return s.filter(p -> p.getFileName().toString().matches("C\\d\\d-.*\\.json")).sorted()
                    .collect(Collectors.toList());
        }
    }

    @Test
    void everyRuleHasATrace() throws IOException {
        List<Path> all = traces();
        assertFalse(all.isEmpty(), "no traces in " + dir().toAbsolutePath());
        TreeSet<String> rules = new TreeSet<>();
        for (Path p : all) {
            rules.add(p.getFileName().toString().substring(0, 3));
        }
        for (int c = 1; c <= 19; c++) {
            assertTrue(rules.contains(String.format("C%02d", c)), "no trace of rule C" + c + ": " + rules);
        }
    }

    @TestFactory
    Stream<DynamicTest> replay() throws IOException {
        return traces().stream().map(p -> DynamicTest.dynamicTest(p.getFileName().toString(), () -> replay(p)));
    }

    /** One member driven through a trace, recording its outputs. */
    static final class Member implements ConsumerDriver.Sink {
        final ConsumerDriver<long[]> driver;
        final List<byte[]> keys;
        ArrayNode effects = NODES.arrayNode();

        Member(JsonNode cfg, List<byte[]> keys) {
            this.keys = keys;
            CoreTypes.Config c = new CoreTypes.Config(cfg.get("max_held").asInt(),
                    cfg.get("stall_timeout_ms").asLong() * 1_000_000, cfg.get("max_metadata_bytes").asInt(),
                    cfg.get("history").asInt(), cfg.get("unknown_epoch_wait_ms").asLong() * 1_000_000,
                    cfg.get("max_lease_ms").asLong());
            driver = new ConsumerDriver<>(cfg.get("topic").asText(), cfg.get("group").asText(),
                    cfg.get("partitions").asInt(), c, this, 0, cfg.get("now_ms").asLong());
        }

        ObjectNode hook(String kind, JsonNode body) {
            ObjectNode h = NODES.objectNode();
            h.putObject("hook").set(kind, body);
            return h;
        }

        static ArrayNode ints(Iterable<Integer> xs) {
            ArrayNode a = NODES.arrayNode();
            xs.forEach(a::add);
            return a;
        }

        @Override
        public void commitSync(List<ConsumerDriver.Commit> commits) {
            ArrayNode a = NODES.arrayNode();
            for (ConsumerDriver.Commit c : commits) {
                a.addObject().put("partition", c.partition).put("offset", c.offset).put("metadata", c.metadata);
            }
            effects.addObject().set("commit", a);
        }

        @Override
        public void announce(HandoffRecords.Progress p) {
            effects.addObject().putObject("announce").put("key", p.key()).put("value", p.encode());
        }

        @Override
        public void assigned(List<Integer> partitions) {
            effects.add(hook("assigned", ints(partitions)));
        }

        @Override
        public void revoked(List<Integer> partitions) {
            effects.add(hook("revoked", ints(partitions)));
        }

        @Override
        public void epoch(CoreTypes.Drained d, List<Integer> owned, int partitions) {
            EpochChange c = new EpochChange(driver.topic(), d.prev, d.next, d.partition, owned, partitions);
            ObjectNode e = NODES.objectNode().put("partition", d.partition).put("epoch", c.epoch());
            if (d.prev == null) {
                e.putNull("prev");
            } else {
                e.put("prev", d.prev.epoch());
            }
            ArrayNode out = e.putArray("moved_out_b64");
            for (byte[] k : keys) {
                if (c.movedOut(k)) {
                    out.add(Base64.getEncoder().encodeToString(k));
                }
            }
            effects.add(hook("epoch", e));
        }

        @Override
        public void split(CoreTypes.SplitChange c) {
            ObjectNode s = NODES.objectNode().put("key_b64", Base64.getEncoder().encodeToString(c.key.bytes()))
                    .put("epoch", c.epoch);
            ArrayNode parts = s.putArray("parts");
            for (int p : c.parts) {
                parts.add(p);
            }
            if (c.partition < 0) {
                s.putNull("partition");
            } else {
                s.put("partition", c.partition);
            }
            effects.add(hook("split", s));
        }

        @Override
        public void pause(int partition) {
            effects.addObject().put("pause", partition);
        }

        @Override
        public void resume(int partition) {
            effects.addObject().put("resume", partition);
        }
    }

    static byte[] text(JsonNode n) {
        return n == null || n.isNull() ? null : n.asText().getBytes(StandardCharsets.UTF_8);
    }

    static void delivered(ArrayNode out, ConsumerDriver.Labelled<long[]> l) {
        ArrayNode r = out.addArray().add(l.msg[0]).add(l.msg[1]);
        if (l.split > 0) {
            r.add(l.split);
        }
    }

    static void replay(Path file) throws IOException {
        JsonNode trace = JSON.readTree(file.toFile());
        List<byte[]> keys = new ArrayList<>();
        trace.get("keys_b64").forEach(k -> keys.add(Base64.getDecoder().decode(k.asText())));
        Member m = new Member(trace.get("config"), keys);
        ConsumerDriver<long[]> d = m.driver;
        // (partition, offset) -> key, for comparing deliveries per key.
        Map<String, String> keyOf = new HashMap<>();
        int i = 0;
        for (JsonNode step : trace.get("steps")) {
            long now = step.get("t_ms").asLong() * 1_000_000;
            JsonNode in = step.get("in");
            String kind = in.fieldNames().next();
            JsonNode body = in.get(kind);
            m.effects = NODES.arrayNode();
            ArrayNode delivered = NODES.arrayNode();
            ArrayNode skipped = NODES.arrayNode();
            switch (kind) {
                case "control":
                    d.control(text(body.get("key")), text(body.get("value")), now);
                    break;
                case "handoff":
                    d.handoff(text(body.get("key")), text(body.get("value")), now);
                    break;
                case "assign": {
                    List<ConsumerDriver.Assigned> parts = new ArrayList<>();
                    for (JsonNode a : body) {
                        parts.add(new ConsumerDriver.Assigned(a.get("partition").asInt(),
                                a.get("offset").isNull() ? null : a.get("offset").asLong(),
                                a.get("metadata").asText()));
                    }
                    d.assign(parts, now, d.core().nowMs());
                    break;
                }
                case "revoke": {
                    List<Integer> ps = new ArrayList<>();
                    body.forEach(p -> ps.add(p.asInt()));
                    d.revoke(ps, false, now);
                    break;
                }
                case "record": {
                    d.prelude(now, true).forEach(l -> delivered(delivered, l));
                    int p = body.get("partition").asInt();
                    long o = body.get("offset").asLong();
                    JsonNode kb = body.get("key_b64");
                    byte[] key = kb.isNull() ? null : Base64.getDecoder().decode(kb.asText());
                    keyOf.put(p + "/" + o, kb.isNull() ? "" : kb.asText());
                    long epoch = EpochHeader.NONE;
                    for (JsonNode h : body.get("headers")) {
                        byte[] v = h.get(1).isNull() ? null : Base64.getDecoder().decode(h.get(1).asText());
                        epoch = EpochHeader.fold(epoch, h.get(0).asText(), v);
                    }
                    CoreTypes.Outcome[] outcome = new CoreTypes.Outcome[1];
                    ConsumerDriver.Labelled<long[]> l = d.record(p, o, key, epoch, new long[] {p, o}, now, outcome);
                    if (l != null) {
                        delivered(delivered, l);
                    } else if (outcome[0] == CoreTypes.Outcome.SKIPPED) {
                        skipped.addArray().add(p).add(o);
                    }
                    break;
                }
                case "next":
                    d.prelude(now, true).forEach(l -> delivered(delivered, l));
                    break;
                case "commit":
                    d.commit(now);
                    break;
                case "tick":
                    d.tick(now, body.get("now_ms").asLong());
                    break;
                default:
                    throw new AssertionError("unknown input " + kind);
            }
            String where = file.getFileName() + " step " + i + " (" + kind + ")";
            JsonNode want = step.get("out");
            compareDelivered(where, want.path("delivered"), delivered, keyOf);
            assertEquals(orEmptyArray(want.get("skipped")), norm(skipped), where + ": skipped");
            ObjectNode held = NODES.objectNode();
            d.held().forEach((p, n) -> held.put(Integer.toString(p), n));
            assertEquals(want.has("held") ? want.get("held") : NODES.objectNode(), norm(held), where + ": held");
            assertEquals(orEmptyArray(want.get("effects")), norm(m.effects), where + ": effects");
            CoreTypes.Anomalies a = d.core().takeAnomalies();
            ObjectNode counted = NODES.objectNode();
            if (a.unknownEpochRecords > 0) {
                counted.put("unknown_epoch", a.unknownEpochRecords);
            }
            if (a.clampedLeases > 0) {
                counted.put("clamped_leases", a.clampedLeases);
            }
            ObjectNode rejected = NODES.objectNode();
            for (HandoffRecords.MarkerReject r : HandoffRecords.MarkerReject.values()) {
                if (a.rejectedMarkers[r.ordinal()] > 0) {
                    rejected.put(r.label, a.rejectedMarkers[r.ordinal()]);
                }
            }
            if (rejected.size() > 0) {
                counted.set("markers_rejected", rejected);
            }
            if (a.windowsLeftOut > 0) {
                counted.put("windows_left_out", a.windowsLeftOut);
            }
            assertEquals(want.has("anomalies") ? want.get("anomalies") : NODES.objectNode(), norm(counted),
                    where + ": anomalies");
            i++;
        }
    }

    /** Built nodes as parsed ones (an int and a long node of one value are not equal to Jackson). */
    static JsonNode norm(JsonNode n) throws IOException {
        return JSON.readTree(n.toString());
    }

    static JsonNode orEmptyArray(JsonNode n) {
        return n == null ? NODES.arrayNode() : n;
    }

    /** Records of different keys handed out in one step may come in any order: per key exactly, and as a set. */
    static void compareDelivered(String where, JsonNode want, ArrayNode got, Map<String, String> keyOf) {
        List<String> w = new ArrayList<>();
        want.forEach(n -> w.add(n.toString()));
        List<String> g = new ArrayList<>();
        got.forEach(n -> g.add(n.toString()));
        assertEquals(new TreeSet<>(w), new TreeSet<>(g), where + ": delivered " + g + ", want " + w);
        assertEquals(w.size(), g.size(), where + ": delivered " + g + ", want " + w);
        Map<String, List<String>> byKeyWant = new LinkedHashMap<>();
        Map<String, List<String>> byKeyGot = new LinkedHashMap<>();
        want.forEach(n -> byKeyWant.computeIfAbsent(keyOf.get(n.get(0).asLong() + "/" + n.get(1).asLong()),
                k -> new ArrayList<>()).add(n.toString()));
        got.forEach(n -> byKeyGot.computeIfAbsent(keyOf.get(n.get(0).asLong() + "/" + n.get(1).asLong()),
                k -> new ArrayList<>()).add(n.toString()));
        assertEquals(byKeyWant, byKeyGot, where + ": delivered per key");
    }
}

package dev.dkg.kafka;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.StringJoiner;
import java.util.concurrent.atomic.AtomicLongArray;
import org.junit.jupiter.api.Test;

/** Format version 2 ({@code docs/spec.md} section 11): split heavy keys, the compact table, the new kinds. */
class AssignmentV2Test {
    private static final String GEN = "0123456789abcdef0123456789abcdef";

    /** Smooth weighted round robin, table-driven: one period of part indices per weight list. */
    @Test
    void scheduleIsSmoothWeightedRoundRobin() {
        Object[][] cases = {
            {new int[] {1, 1}, new int[] {0, 1}},
            // The spec's example: weights 3 and 1 on partitions 1 and 4 give 1, 1, 4, 1.
            {new int[] {3, 1}, new int[] {0, 0, 1, 0}},
            {new int[] {1, 3}, new int[] {1, 0, 1, 1}},
            {new int[] {2, 1, 1}, new int[] {0, 1, 2, 0}},
            {new int[] {5, 1}, new int[] {0, 0, 0, 1, 0, 0}},
            {new int[] {1, 1, 1}, new int[] {0, 1, 2}},
            {new int[] {2, 3}, new int[] {1, 0, 1, 0, 1}},
        };
        for (Object[] c : cases) {
            int[] weights = (int[]) c[0];
            byte[] got = Assignment.schedule(weights);
            int[] want = (int[]) c[1];
            int[] asInts = new int[got.length];
            for (int i = 0; i < got.length; i++) {
                asInts[i] = got[i];
            }
            assertArrayEquals(want, asInts, Arrays.toString(weights));
        }
    }

    /** Every part gets exactly its weight's picks per period, and no part waits much longer than its share. */
    @Test
    void scheduleGivesEachPartItsWeightEvenlySpread() {
        SplittableRandom random = new SplittableRandom(11);
        for (int round = 0; round < 60; round++) {
            int parts = 2 + random.nextInt(Assignment.MAX_SPLIT_PARTS - 1);
            int[] weights = new int[parts];
            int sum = 0;
            for (int i = 0; i < parts; i++) {
                weights[i] = 1 + random.nextInt(Math.max(1, (Assignment.MAX_SPLIT_WEIGHT_SUM - sum) / (parts - i)));
                sum += weights[i];
            }
            byte[] order = Assignment.schedule(weights);
            assertEquals(sum, order.length);
            int[] seen = new int[parts];
            for (int n = 0; n < order.length; n++) {
                int i = order[n];
                seen[i]++;
                // Smoothness: after every prefix of picks each part is less than one pick from its exact share.
                for (int j = 0; j < parts; j++) {
                    double exact = (n + 1) * (double) weights[j] / sum;
                    assertTrue(Math.abs(seen[j] - exact) < 1.0, () -> Arrays.toString(weights));
                }
            }
            assertArrayEquals(weights, seen, Arrays.toString(weights));
        }
    }

    @Test
    void splitKeyFollowsItsScheduleAndOtherKeysAreUnchanged() throws AssignmentException {
        int[] table = new int[64];
        for (int i = 0; i < table.length; i++) {
            table[i] = i % 6;
        }
        Docs d = Docs.base().partitions(6).table(table).heavy("whole", 5)
                .split("hot", new int[] {1, 4}, new int[] {3, 1})
                .split("warm", new int[] {0, 2, 3}, new int[] {1, 1, 2});
        Docs v1 = Docs.base().partitions(6).table(table).heavy("whole", 5);
        Assignment a = Assignment.fromJson(d.bytes());
        Assignment plain = v1.build();
        assertEquals(3, a.heavyCount());
        assertFalse(a.isSplit(0));
        assertTrue(a.isSplit(1));
        assertArrayEquals(new int[] {1, 4}, a.splitPartitions(1));
        assertArrayEquals(new int[] {3, 1}, a.splitWeights(1));
        assertEquals(1, a.heavyPartition(1), "a split key's partition is its first part's");
        assertArrayEquals(new int[] {1, 1, 4, 1}, a.splitSchedule(1));
        assertArrayEquals(new int[] {3, 0, 2, 3}, a.splitSchedule(2));
        assertArrayEquals(new int[0], a.splitSchedule(0));
        byte[] hot = Docs.utf8("hot");
        byte[] warm = Docs.utf8("warm");
        assertEquals(Route.SPLIT, a.route(hot));
        for (int n = 0; n < 40; n++) {
            assertEquals(new int[] {1, 1, 4, 1}[n % 4], a.partitionFor(hot), "hot record " + n);
            // Interleaved: each key has its own counter.
            assertEquals(new int[] {3, 0, 2, 3}[n % 4], a.partitionFor(warm), "warm record " + n);
        }
        // route() counts nothing: a new instance starts at record 0 of every key.
        Assignment again = Assignment.fromJson(d.bytes());
        again.route(hot);
        assertEquals(1, again.partitionFor(hot));
        assertEquals(1, again.partitionFor(hot));
        assertEquals(4, again.partitionFor(hot));
        SplittableRandom random = new SplittableRandom(5);
        for (int i = 0; i < 5000; i++) {
            byte[] key = new byte[random.nextInt(20)];
            random.nextBytes(key);
            if (Arrays.equals(key, hot) || Arrays.equals(key, warm)) {
                continue;
            }
            assertEquals(plain.partitionFor(key), a.partitionFor(key));
            assertEquals(plain.route(key), a.route(key));
        }
        assertEquals(5, a.partitionFor(Docs.utf8("whole")));
        assertEquals(Route.HEAVY, a.route(Docs.utf8("whole")));
    }

    /**
     * Split keys sharing a bucket with other heavy keys (the lookup's runs) and alone in theirs (its groups):
     * both reach the schedule.
     */
    @Test
    void splitKeysInRunsAndGroups() throws AssignmentException {
        for (int buckets : new int[] {1, 3, 1024}) {
            Docs d = Docs.base().partitions(5).table(new int[buckets]);
            List<String> keys = new ArrayList<>();
            for (int i = 0; i < 12; i++) {
                String k = "key-" + i;
                keys.add(k);
                if (i % 3 == 0) {
                    d.heavy(k, 1 + i % 4);
                } else {
                    d.split(k, new int[] {i % 5, (i + 1) % 5}, new int[] {1, i});
                }
            }
            Assignment a = Assignment.fromJson(d.bytes());
            for (int i = 0; i < keys.size(); i++) {
                byte[] key = Docs.utf8(keys.get(i));
                if (i % 3 == 0) {
                    assertEquals(1 + i % 4, a.partitionFor(key));
                    continue;
                }
                int[] schedule = a.splitSchedule(i);
                assertEquals(1 + i, schedule.length);
                for (int n = 0; n < 3 * schedule.length; n++) {
                    assertEquals(schedule[n % schedule.length], a.partitionFor(key),
                            buckets + " buckets, " + keys.get(i));
                }
            }
        }
    }

    /**
     * Through the router: split records are counted under the route "split", and threads racing on one key still
     * share its schedule exactly (each record number is taken once), so whole periods give exact proportions.
     */
    @Test
    void routerCountsSplitRecordsAndThreadsShareTheSchedule() throws Exception {
        DkgRouter router = DkgRouter.detached("_dkg.assignments");
        byte[] doc = Docs.base().partitions(6).table(0, 1, 2, 3, 4, 5)
                .split("hot", new int[] {5, 2, 0}, new int[] {5, 2, 1}).bytes();
        assertEquals(ControlUpdate.Outcome.ACCEPTED, router.apply(Docs.utf8("orders"), doc).outcome());
        int threads = 4;
        int perThread = 8 * 10_000;
        AtomicLongArray perPartition = new AtomicLongArray(6);
        List<Thread> workers = new ArrayList<>();
        byte[] hot = Docs.utf8("hot");
        for (int t = 0; t < threads; t++) {
            Thread w = new Thread(() -> {
                for (int i = 0; i < perThread; i++) {
                    perPartition.incrementAndGet(router.partition("orders", hot, 6));
                }
            });
            workers.add(w);
            w.start();
        }
        for (Thread w : workers) {
            w.join();
        }
        long total = (long) threads * perThread;
        assertEquals(total, router.records("orders", Route.SPLIT));
        assertEquals(0, router.records("orders", Route.ASSIGNED));
        assertEquals(total * 5 / 8, perPartition.get(5));
        assertEquals(total * 2 / 8, perPartition.get(2));
        assertEquals(total * 1 / 8, perPartition.get(0));
        // A topic whose partition count differs from the document's: the split key falls back like every key.
        assertEquals(Murmur2.kafkaPartition(hot, 7), router.partition("orders", hot, 7));
        assertEquals(1, router.records("orders", Route.FALLBACK));
    }

    @Test
    void compactTableDecodesLikeTheJsonTable() throws AssignmentException {
        SplittableRandom random = new SplittableRandom(3);
        // Widths 1, 2 and 4 (at the boundaries of each).
        for (int partitions : new int[] {1, 256, 257, 65536, 65537}) {
            int[] table = new int[1 + random.nextInt(300)];
            for (int i = 0; i < table.length; i++) {
                table[i] = i == 0 ? partitions - 1 : random.nextInt(partitions);
            }
            Docs json = Docs.base().partitions(partitions).table(table).heavy("h", partitions - 1);
            Docs compact = Docs.base().partitions(partitions).table(table).heavy("h", partitions - 1).compact();
            Assignment a = json.build();
            Assignment b = compact.build();
            assertArrayEquals(a.table(), b.table());
            assertEquals(a, b, "decoded members are equal, whatever the table's encoding");
            for (int i = 0; i < 1000; i++) {
                byte[] key = new byte[1 + random.nextInt(12)];
                random.nextBytes(key);
                assertEquals(a.partitionFor(key), b.partitionFor(key));
            }
        }
    }

    private static String with(Docs d, String from, String to) {
        String s = d.json();
        assertTrue(s.contains(from), from);
        return s.replace(from, to);
    }

    private static Docs splitDoc(String splitJson) {
        return Docs.base().partitions(6).table(0, 1, 2, 3).splitJson("hot", splitJson);
    }

    /** 1000001 partitions; the short predicted_load is checked only after the partition count (step 16). */
    private static Docs overMaxPartitions() {
        Docs d = Docs.base().partitions(Assignment.MAX_PARTITIONS + 1);
        d.predictedLoad = "[0.5]";
        return d;
    }

    private static String parts(int count, int weight) {
        StringJoiner j = new StringJoiner(",", "[", "]");
        for (int i = 0; i < count; i++) {
            j.add("{\"partition\":" + i + ",\"weight\":" + weight + "}");
        }
        return j.toString();
    }

    /** The reasons by short name, for the case table below. */
    private static final RejectReason M = RejectReason.MALFORMED_JSON;
    private static final RejectReason INV = RejectReason.INVALID;
    private static final RejectReason OOR = RejectReason.OUT_OF_RANGE;
    private static final RejectReason BIG = RejectReason.OVERSIZE;

    @Test
    void rejectsBadVersion2Documents() {
        Docs ok = splitDoc("[{\"partition\":1,\"weight\":3},{\"partition\":4,\"weight\":1}]");
        String okJson = ok.json();
        Docs compact = Docs.base().partitions(300).table(0, 299, 7).compact();
        String p300 = compact.json();
        Object[][] cases = {
            {"split with one part", splitDoc("[{\"partition\":1,\"weight\":3}]").json(), INV},
            {"split with no part", splitDoc("[]").json(), INV},
            {"split with 65 parts", Docs.base().partitions(70).table(0).splitJson("hot", parts(65, 1)).json(), INV},
            {"split with 64 parts of weight 65 (sum 4160)",
                Docs.base().partitions(70).table(0).splitJson("hot", parts(64, 65)).json(), INV},
            {"split partition twice", splitDoc("[{\"partition\":1,\"weight\":3},{\"partition\":1,\"weight\":1}]")
                .json(), INV},
            {"split weight 0", splitDoc("[{\"partition\":1,\"weight\":0},{\"partition\":4,\"weight\":1}]").json(),
                INV},
            {"split part out of range", splitDoc("[{\"partition\":1,\"weight\":3},{\"partition\":6,\"weight\":1}]")
                .json(), OOR},
            {"split weight sum 4097",
                splitDoc("[{\"partition\":1,\"weight\":4096},{\"partition\":4,\"weight\":1}]").json(), INV},
            {"split weight over u32", splitDoc("[{\"partition\":1,\"weight\":4294967296},{\"partition\":4,"
                + "\"weight\":1}]").json(), M},
            {"split part unknown member", splitDoc("[{\"partition\":1,\"weight\":3,\"x\":1},{\"partition\":4,"
                + "\"weight\":1}]").json(), M},
            {"split part missing weight", splitDoc("[{\"partition\":1},{\"partition\":4,\"weight\":1}]").json(), M},
            {"split is not an array", splitDoc("{}").json(), M},
            {"partition and split", with(ok, "\"split\":", "\"partition\":1,\"split\":"), M},
            {"partition null next to split", with(ok, "\"split\":", "\"partition\":null,\"split\":"), M},
            {"split null", splitDoc("null").json(), M},
            {"split counted before its parts' range", splitDoc("[{\"partition\":9,\"weight\":3}]").json(), INV},
            {"partitions over the maximum (version 2: invalid)", overMaxPartitions().version(2).json(), INV},
            {"partitions over the maximum (version 1: oversize)", overMaxPartitions().json(), BIG},
            {"heavy key over 65536 bytes (version 2: invalid)", Docs.base().version(2)
                .heavy(new byte[Assignment.MAX_KEY_BYTES + 1], 0).json(), INV},
            {"array header v2", "[\"dkg.assignment\",2]", M},
            {"heavy entry with neither partition nor split", with(ok, "\"split\":[{\"partition\":1,\"weight\":3},"
                + "{\"partition\":4,\"weight\":1}],", ""), M},
            {"split in a version 1 document", with(ok, "\"version\":2", "\"version\":1"), M},
            {"table_b64 in a version 1 document", p300.replace("\"version\":2", "\"version\":1"), M},
            {"table_b64 without table_width", p300.replace(",\"table_width\":2", ""), M},
            {"table_width without table_b64", Docs.base().version(2).json().replace("\"table\":",
                "\"table_width\":1,\"table\":"), M},
            {"table and table_b64", p300.replace("\"buckets\":3,", "\"buckets\":3,\"table\":[0,1,2],"), M},
            {"no table at all", p300.replace(",\"table_width\":2", "").replaceAll("\"table_b64\":\"[^\"]*\",", ""), M},
            {"table_width 1 where 2 is needed", p300.replace("\"table_width\":2", "\"table_width\":1"), INV},
            {"table_width 4 where 2 suffices", p300.replace("\"table_width\":2", "\"table_width\":4"), INV},
            {"table_width 3", p300.replace("\"table_width\":2", "\"table_width\":3"), INV},
            {"table_b64 not canonical", p300.replace("\"table_b64\":\"", "\"table_b64\":\" "), INV},
            {"table_b64 a byte short", p300.replace(b64(Docs.packTable(new int[] {0, 299, 7}, 2)),
                b64(Arrays.copyOf(Docs.packTable(new int[] {0, 299, 7}, 2), 5))), INV},
            {"table_b64 one entry more than buckets", p300.replace(b64(Docs.packTable(new int[] {0, 299, 7}, 2)),
                b64(Docs.packTable(new int[] {0, 299, 7, 1}, 2))), INV},
            {"table_b64 entry out of range", p300.replace(b64(Docs.packTable(new int[] {0, 299, 7}, 2)),
                b64(Docs.packTable(new int[] {0, 300, 7}, 2))), OOR},
            {"unknown kind", with(ok, "\"version\":2", "\"version\":2,\"kind\":\"chunked\""), M},
            {"kind in a version 1 document", Docs.base().json().replace("\"version\":1",
                "\"version\":1,\"kind\":\"assignment\""), M},
            {"generation in a version 1 document", Docs.base().json().replace("\"version\":1",
                "\"version\":1,\"generation\":\"" + GEN + "\""), M},
            {"generation not hex", Docs.base().generation(GEN.toUpperCase(java.util.Locale.ROOT)).json(), INV},
            {"generation too short", Docs.base().generation("abc").json(), INV},
            {"retraction with a table", Docs.retraction("orders", 3, GEN).replace("\"epoch\"",
                "\"table\":[0],\"epoch\""), M},
            {"retraction without epoch", Docs.retraction("orders", 3, GEN).replace("\"epoch\":3,", ""), M},
            {"retraction with a bad topic", Docs.retraction("a/b", 3, GEN), INV},
            {"retraction in version 1", Docs.retraction("orders", 3, GEN).replace("\"version\":2",
                "\"version\":1"), M},
            {"generation record with a topic", Docs.generationRecord(GEN).replace("\"kind\"",
                "\"topic\":\"orders\",\"kind\""), M},
            {"generation record without its id", "{\"format\":\"dkg.assignment\",\"version\":2,\"kind\":"
                + "\"generation\"}", M},
            {"generation record with a bad id", Docs.generationRecord("xyz"), INV},
        };
        List<String> failures = new ArrayList<>();
        for (Object[] c : cases) {
            try {
                Assignment.decode(((String) c[1]).getBytes(StandardCharsets.UTF_8));
                failures.add(c[0] + ": accepted, want " + c[2]);
            } catch (AssignmentException e) {
                if (e.reason() != c[2]) {
                    failures.add(c[0] + ": " + e.reason() + " (" + e.getMessage() + "), want " + c[2]);
                }
            }
        }
        if (!failures.isEmpty()) {
            fail(String.join("\n", failures));
        }
        // And the well-formed ones they are edits of.
        for (String good : new String[] {okJson, p300,
            Docs.base().partitions(70).table(0).splitJson("hot", parts(64, 64)).json(),
            Docs.base().generation(GEN).json(), Docs.base().version(2).json()}) {
            try {
                Assignment.fromJson(good.getBytes(StandardCharsets.UTF_8));
            } catch (AssignmentException e) {
                fail(good + ": " + e.getMessage());
            }
        }
    }

    private static String b64(byte[] b) {
        return java.util.Base64.getEncoder().encodeToString(b);
    }

    @Test
    void otherKindsDecodeToTheirValues() throws AssignmentException {
        ControlValue r = Assignment.decode(Docs.utf8(Docs.retraction("orders", 12, GEN)));
        assertEquals(new ControlValue.Retraction("orders", 12, GEN, 1700000000000L), r);
        ControlValue g = Assignment.decode(Docs.utf8(Docs.generationRecord(GEN)));
        assertEquals(new ControlValue.Generation(GEN), g);
        // Member order is free: kind may come last.
        String reordered = "{\"generation\":\"" + GEN + "\",\"version\":2,\"format\":\"dkg.assignment\","
                + "\"kind\":\"generation\"}";
        assertEquals(g, Assignment.decode(Docs.utf8(reordered)));
        AssignmentException e = org.junit.jupiter.api.Assertions.assertThrows(AssignmentException.class,
                () -> Assignment.fromJson(Docs.utf8(Docs.retraction("orders", 12, null))));
        assertEquals(RejectReason.INVALID, e.reason());
        Assignment a = Assignment.fromJson(Docs.base().generation(GEN).bytes());
        assertEquals(GEN, a.generation());
        assertNull(Docs.base().build().generation());
        assertNotEquals(a, Docs.base().generation(GEN.replace('0', '1')).build(), "generation is a member");
        // Split parts are members too (rule 8 compares decoded members).
        assertNotEquals(splitDoc("[{\"partition\":1,\"weight\":3},{\"partition\":4,\"weight\":1}]").build(),
                splitDoc("[{\"partition\":1,\"weight\":2},{\"partition\":4,\"weight\":1}]").build());
        assertEquals(splitDoc("[{\"partition\":1,\"weight\":3},{\"partition\":4,\"weight\":1}]").build(),
                splitDoc("[{\"weight\":3,\"partition\":1},{\"partition\":4,\"weight\":1}]").build());
    }
}

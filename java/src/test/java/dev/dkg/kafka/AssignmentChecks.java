package dev.dkg.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;

/**
 * What every accepted assignment must satisfy, whatever bytes it came from: the invariants of {@code docs/spec.md}
 * section 4 read back through the public API, and a lookup that stays in range for any key. Shared by the corpus
 * replay ({@link CorpusTest}) and the fuzz test ({@link AssignmentFuzzTest}).
 */
final class AssignmentChecks {
    private static final byte[][] PROBES = {
        new byte[0], "hot".getBytes(StandardCharsets.UTF_8), "cold".getBytes(StandardCharsets.UTF_8),
    };

    private AssignmentChecks() {}

    /** Decodes {@code data}: the assignment, re-validated, or {@code null} with a non-null reason checked. */
    static Assignment decode(byte[] data) {
        try {
            Assignment a = Assignment.fromJson(data);
            revalidate(a, data);
            return a;
        } catch (AssignmentException e) {
            assertNotNull(e.reason(), "a rejection names its reason");
            return null;
        }
    }

    /** The accepted document's invariants, and its lookup for the probes, {@code data} and every heavy key. */
    static void revalidate(Assignment a, byte[] data) {
        int n = a.partitions();
        assertTrue(n >= 1 && n <= Assignment.MAX_PARTITIONS, "partitions " + n);
        assertTrue(a.epoch() >= 0 && a.epoch() <= Assignment.MAX_EPOCH, "epoch " + a.epoch());
        assertFalse(a.topic().isEmpty(), "topic");
        int[] table = a.table();
        assertEquals(a.buckets(), table.length, "table length");
        assertTrue(table.length >= 1 && table.length <= Assignment.MAX_BUCKETS, "buckets " + table.length);
        for (int p : table) {
            assertTrue(p >= 0 && p < n, "table entry " + p + " of " + n);
        }
        for (int i = 0; i < a.heavyCount(); i++) {
            byte[] key = a.heavyKey(i);
            if (a.isSplit(i)) {
                int[] parts = a.splitPartitions(i);
                assertTrue(parts.length >= 2 && parts.length <= Assignment.MAX_SPLIT_PARTS, "split parts");
                for (int p : parts) {
                    assertTrue(p >= 0 && p < n, "split part " + p + " of " + n);
                }
                assertEquals(Route.SPLIT, a.route(key));
                int p = a.partitionFor(key);
                assertTrue(contains(parts, p), "split key placed on " + p + ", not one of its parts");
            } else {
                int p = a.heavyPartition(i);
                assertTrue(p >= 0 && p < n, "heavy partition " + p + " of " + n);
                assertEquals(Route.HEAVY, a.route(key));
                assertEquals(p, a.partitionFor(key), "heavy key placement");
            }
        }
        for (byte[] key : PROBES) {
            lookup(a, key);
        }
        lookup(a, data);
    }

    private static void lookup(Assignment a, byte[] key) {
        int bucket = a.bucket(key);
        assertTrue(bucket >= 0 && bucket < a.buckets(), "bucket " + bucket);
        Route route = a.route(key);
        int p = a.partitionFor(key);
        assertTrue(p >= 0 && p < a.partitions(), "partition " + p + " of " + a.partitions());
        if (route == Route.BUCKET) {
            assertEquals(a.table()[bucket], p, "bucket route follows the table");
        }
    }

    private static boolean contains(int[] values, int v) {
        for (int x : values) {
            if (x == v) {
                return true;
            }
        }
        return false;
    }
}

package dev.dkg.kafka;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class AssignmentTest {
    private static final String BASE = Docs.base().json();

    /** The lookup, stated the slow and obvious way. */
    private static int reference(Map<ByteBuffer, Integer> heavy, int[] table, int seed, byte[] key) {
        Integer p = heavy.get(ByteBuffer.wrap(key));
        return p != null ? p : table[Murmur2.toPositive(Murmur2.hash(key, seed)) % table.length];
    }

    @Test
    void lookupMatchesTheDefinitionForRandomDocuments() {
        SplittableRandom random = new SplittableRandom(42);
        for (int round = 0; round < 30; round++) {
            int partitions = 1 + random.nextInt(50);
            int[] table = new int[1 + random.nextInt(500)];
            for (int i = 0; i < table.length; i++) {
                table[i] = random.nextInt(partitions);
            }
            Docs d = Docs.base().partitions(partitions).seed(random.nextInt()).table(table).epoch(round);
            Map<ByteBuffer, Integer> heavy = new HashMap<>();
            List<byte[]> keys = new ArrayList<>();
            int heavyCount = random.nextInt(300);
            while (heavy.size() < heavyCount) {
                byte[] key = randomKey(random);
                if (heavy.putIfAbsent(ByteBuffer.wrap(key), random.nextInt(partitions)) == null) {
                    d.heavy(key, heavy.get(ByteBuffer.wrap(key)));
                    keys.add(key);
                }
            }
            Assignment a = d.build();
            assertEquals(heavyCount, a.heavyCount());
            for (byte[] key : keys) {
                assertEquals(heavy.get(ByteBuffer.wrap(key)), a.partitionFor(key));
                assertEquals(Route.HEAVY, a.route(key));
            }
            for (int i = 0; i < 2000; i++) {
                byte[] key = randomKey(random);
                int want = reference(heavy, table, d.seed, key);
                assertEquals(want, a.partitionFor(key), "round " + round);
                assertEquals(heavy.containsKey(ByteBuffer.wrap(key)) ? Route.HEAVY : Route.BUCKET, a.route(key));
                assertEquals(Murmur2.toPositive(Murmur2.hash(key, d.seed)) % table.length, a.bucket(key));
            }
        }
    }

    /**
     * The lookup compares keys by words (first and last 8 bytes, the middle 8 at a time, short keys by overlapping
     * loads): heavy keys of every length from 0 to 80 bytes and a few longer, each looked up itself, with each one
     * of its bytes changed, cut by one byte and grown by one, under bucket counts that give one heavy key per bucket
     * (groups) and several (runs): each answer is the definition's.
     */
    @Test
    void nearMissesOfHeavyKeysRouteByTheirBucket() {
        SplittableRandom random = new SplittableRandom(7);
        List<byte[]> heavyKeys = new ArrayList<>();
        for (int len = 0; len <= 80; len++) {
            heavyKeys.add(randomBytes(random, len));
        }
        for (int len : new int[] {127, 128, 129, 1000}) {
            heavyKeys.add(randomBytes(random, len));
        }
        for (int buckets : new int[] {1, 5, 97, 4096}) {
            int partitions = 13;
            int[] table = new int[buckets];
            for (int i = 0; i < buckets; i++) {
                table[i] = random.nextInt(partitions);
            }
            Docs d = Docs.base().partitions(partitions).seed(random.nextInt()).table(table);
            Map<ByteBuffer, Integer> heavy = new HashMap<>();
            // At most MAX_HEAVY_KEYS_PER_BUCKET per bucket: with 1 or 5 buckets only a few of the keys are heavy.
            int[] perBucket = new int[buckets];
            for (byte[] key : heavyKeys) {
                int b = Murmur2.toPositive(Murmur2.hash(key, d.seed)) % buckets;
                if (perBucket[b] < Assignment.MAX_HEAVY_KEYS_PER_BUCKET) {
                    perBucket[b]++;
                    int p = random.nextInt(partitions);
                    heavy.put(ByteBuffer.wrap(key), p);
                    d.heavy(key, p);
                }
            }
            Assignment a = d.build();
            for (byte[] key : heavyKeys) {
                List<byte[]> probes = new ArrayList<>();
                probes.add(key);
                probes.add(Arrays.copyOf(key, key.length + 1));
                if (key.length > 0) {
                    probes.add(Arrays.copyOf(key, key.length - 1));
                }
                for (int i = 0; i < key.length; i++) {
                    byte[] changed = key.clone();
                    changed[i] ^= (byte) (1 << random.nextInt(8));
                    probes.add(changed);
                }
                for (byte[] probe : probes) {
                    boolean isHeavy = heavy.containsKey(ByteBuffer.wrap(probe));
                    assertEquals(reference(heavy, table, d.seed, probe), a.partitionFor(probe),
                            () -> buckets + " buckets, key of " + probe.length + " bytes");
                    assertEquals(isHeavy ? Route.HEAVY : Route.BUCKET, a.route(probe));
                }
            }
        }
    }

    private static byte[] randomBytes(SplittableRandom random, int len) {
        byte[] key = new byte[len];
        random.nextBytes(key);
        return key;
    }

    /** Two keys with the same 32-bit bucket hash: only the one listed is heavy (the bytes decide). */
    @Test
    void keysCollidingInTheFullHashAreToldApart() {
        SplittableRandom random = new SplittableRandom(1);
        int seed = 12345;
        Map<Integer, byte[]> seen = new HashMap<>();
        byte[][] pair = null;
        while (pair == null) {
            byte[] key = new byte[8];
            random.nextBytes(key);
            byte[] other = seen.putIfAbsent(Murmur2.hash(key, seed), key);
            if (other != null && !Arrays.equals(other, key)) {
                pair = new byte[][] {other, key};
            }
        }
        assertEquals(Murmur2.hash(pair[0], seed), Murmur2.hash(pair[1], seed));
        int[] table = new int[64];
        Arrays.fill(table, 0);
        Assignment a = Docs.base().partitions(3).seed(seed).table(table).heavy(pair[0], 2).build();
        assertEquals(2, a.partitionFor(pair[0]));
        assertEquals(Route.HEAVY, a.route(pair[0]));
        assertEquals(0, a.partitionFor(pair[1]));
        assertEquals(Route.BUCKET, a.route(pair[1]));
    }

    @Test
    void emptyAndLongKeysRoute() {
        byte[] big = new byte[Assignment.MAX_KEY_BYTES];
        Arrays.fill(big, (byte) 7);
        Assignment a = Docs.base().heavy(new byte[0], 1).heavy(big, 2).build();
        assertEquals(1, a.partitionFor(new byte[0]));
        assertEquals(2, a.partitionFor(big));
        byte[] longer = Arrays.copyOf(big, big.length + 1);
        assertEquals(Route.BUCKET, a.route(longer));
    }

    @Test
    void fieldsAreReadAsWritten() {
        Assignment a = Docs.base().epoch(Assignment.MAX_EPOCH).seed(-1).createdAtMs(5).heavy("hot", 1).build();
        assertEquals("orders", a.topic());
        assertEquals(3, a.partitions());
        assertEquals("9007199254740991", Long.toUnsignedString(a.epoch()));
        assertEquals(-1, a.bucketSeed());
        assertEquals(4, a.buckets());
        assertArrayEquals(new int[] {0, 1, 2, 0}, a.table());
        assertArrayEquals("hot".getBytes(StandardCharsets.UTF_8), a.heavyKey(0));
        assertEquals(1, a.heavyPartition(0));
        assertEquals(1000, a.heavyWeight(0));
        assertEquals(0.01, a.theta());
        assertEquals(0.005, a.epsilon());
        assertEquals(4.0, a.mu());
        assertEquals(100000, a.windowRecords());
        assertEquals(5, a.createdAtMs());
        assertArrayEquals(new double[] {0.5, 0.5, 0.5}, a.predictedLoad());
    }

    @Test
    void equalityIsOfTheDocumentWithRustFloatSemantics() throws Exception {
        Assignment a = Assignment.fromJson(Docs.utf8(BASE));
        Assignment spaced = Assignment.fromJson(Docs.utf8(BASE.replace(",", " ,\n ")));
        assertEquals(a, spaced);
        assertEquals(a.hashCode(), spaced.hashCode());
        Assignment zero = Assignment.fromJson(Docs.utf8(BASE.replace("\"mu\":4.0", "\"mu\":0.0")));
        Assignment negZero = Assignment.fromJson(Docs.utf8(BASE.replace("\"mu\":4.0", "\"mu\":-0.0")));
        assertEquals(zero, negZero, "0.0 == -0.0 as in Rust's PartialEq");
        assertEquals(zero.hashCode(), negZero.hashCode());
        assertNotEquals(a, Assignment.fromJson(Docs.utf8(BASE.replace("\"table\":[0,1,2,0]", "\"table\":[0,1,2,1]"))));
        assertNotEquals(a, Assignment.fromJson(Docs.utf8(BASE.replace("0.005", "0.006"))));
        assertNotEquals(a, Assignment.fromJson(Docs.utf8(BASE.replace("[0.5,0.5,0.5]", "[0.5,0.5,0.25]"))));
        assertNotEquals(Docs.base().heavy("a", 0).build(), Docs.base().heavy("b", 0).build());
    }

    private record Case(String name, String doc, RejectReason reason) {}

    private static Case c(String name, String doc, RejectReason reason) {
        return new Case(name, doc, reason);
    }

    private static String with(String from, String to) {
        if (!BASE.contains(from)) {
            throw new AssertionError("base document lacks " + from);
        }
        return BASE.replace(from, to);
    }

    private static String deep(int levels) {
        return "[".repeat(levels) + "]".repeat(levels);
    }

    @Test
    void rejectsWithTheRustReasons() {
        RejectReason m = RejectReason.MALFORMED_JSON;
        RejectReason v = RejectReason.UNSUPPORTED_VERSION;
        RejectReason inv = RejectReason.INVALID;
        RejectReason oor = RejectReason.OUT_OF_RANGE;
        RejectReason big = RejectReason.OVERSIZE;
        String v3 = with("\"version\":1", "\"version\":3");
        String topic250 = "t".repeat(250);
        List<Case> cases = List.of(
                c("not json", "{not json", m),
                c("empty", "", m),
                c("a string", "\"dkg.assignment\"", m),
                c("other format", with("dkg.assignment", "dkg.other"), m),
                c("version 3", v3, v),
                c("version 3, unknown member (the version is read first)",
                        v3.replace("{", "{\"x\":{\"y\":[1e999]},"), v),
                c("version 3, deep unknown member (no depth limit when skipping)",
                        v3.replace("{", "{\"x\":" + deep(100_000) + ","), v),
                c("version 3 but a syntax error further on", v3 + ",", m),
                c("version 3 but format missing", "{\"version\":3}", m),
                c("version string", with("\"version\":1", "\"version\":\"1\""), m),
                c("version float", with("\"version\":1", "\"version\":1.0"), m),
                c("version exponent", with("\"version\":1", "\"version\":1e0"), m),
                c("version negative", with("\"version\":1", "\"version\":-1"), m),
                c("version past u64", with("\"version\":1", "\"version\":18446744073709551616"), m),
                c("version max u64", with("\"version\":1", "\"version\":18446744073709551615"), v),
                c("duplicate version", with("\"version\":1", "\"version\":1,\"version\":1"), m),
                c("duplicate format", with("\"version\":1", "\"version\":1,\"format\":\"dkg.assignment\""), m),
                c("array header v3 (readers of version 2 require an object)", "[\"dkg.assignment\",3]", m),
                c("array header v1 (the document must be an object)", "[\"dkg.assignment\",1]", m),
                c("array header too long", "[\"dkg.assignment\",2,3]", m),
                c("unknown member", with("\"epoch\":7", "\"epoch\":7,\"salt\":1"), m),
                c("unknown params member", with("\"mu\":4.0", "\"mu\":4.0,\"nu\":1"), m),
                c("unknown bucket_hash member", with("\"seed\":625341585", "\"seed\":625341585,\"x\":0"), m),
                c("unknown heavy member", Docs.base().heavy("k", 0).json().replace("\"weight\"", "\"w\":1,\"weight\""), m),
                c("missing member", with(",\"created_at_ms\":1700000000000", ""), m),
                c("duplicate member", with("\"epoch\":7", "\"epoch\":7,\"epoch\":7"), m),
                c("partitions past u32", with("\"partitions\":3", "\"partitions\":4294967296"), m),
                c("partitions negative", with("\"partitions\":3", "\"partitions\":-3"), m),
                c("partitions minus zero", with("\"partitions\":3", "\"partitions\":-0"), m),
                c("partitions float", with("\"partitions\":3", "\"partitions\":3.0"), m),
                c("partitions leading zero", with("\"partitions\":3", "\"partitions\":03"), m),
                c("partitions null", with("\"partitions\":3", "\"partitions\":null"), m),
                c("seed past u32", with("\"seed\":625341585", "\"seed\":4294967296"), m),
                c("unknown hash function", with("\"murmur2\"", "\"xxhash\""), m),
                c("hash function missing", with("\"function\":\"murmur2\",", ""), m),
                c("bucket_hash as array", with("{\"function\":\"murmur2\",\"seed\":625341585}", "[\"murmur2\",1]"), m),
                c("params as array", with("{\"theta\":0.01,\"epsilon\":0.005,\"mu\":4.0,\"window_records\":100000}",
                        "[0.01,0.005,4.0,100000]"), m),
                c("trailing characters", BASE + " x", m),
                c("trailing comma", with("[0,1,2,0]", "[0,1,2,0,]"), m),
                c("lone surrogate in topic", with("\"topic\":\"orders\"", "\"topic\":\"orders\\ud800\""), m),
                c("control character in topic", with("\"topic\":\"orders\"", "\"topic\":\"ord\u0001ers\""), m),
                c("bad escape", with("\"topic\":\"orders\"", "\"topic\":\"ord\\x\""), m),
                c("infinite float", with("\"mu\":4.0", "\"mu\":1e400"), m),
                c("float with bare dot", with("\"mu\":4.0", "\"mu\":4."), m),
                c("BOM", "\ufeff" + BASE, m),
                c("buckets disagree with table", with("\"buckets\":4", "\"buckets\":5"), inv),
                c("no buckets", with("\"buckets\":4,\"table\":[0,1,2,0]", "\"buckets\":0,\"table\":[]"), inv),
                c("table entry out of range", with("[0,1,2,0]", "[0,1,3,0]"), oor),
                c("table entry u32 max", with("[0,1,2,0]", "[0,1,4294967295,0]"), oor),
                c("heavy partition out of range", Docs.base().heavy("k", 3).json(), oor),
                c("duplicate heavy key", Docs.base().heavy("k", 0).heavy("k", 1).json(), inv),
                c("unpadded base64", Docs.base().heavy("hi", 0).json().replace("aGk=", "aGk"), inv),
                c("non-canonical trailing bits", Docs.base().heavy("hi", 0).json().replace("aGk=", "aGl="), inv),
                c("base64 with a space", Docs.base().heavy("hi", 0).json().replace("aGk=", "aG k="), inv),
                c("url-safe base64", Docs.base().heavy(new byte[] {(byte) 0xfb, (byte) 0xff}, 0).json()
                        .replace("+/8=", "-_8="), inv),
                c("topic with a slash", with("\"topic\":\"orders\"", "\"topic\":\"a/b\""), inv),
                c("topic empty", with("\"topic\":\"orders\"", "\"topic\":\"\""), inv),
                c("topic dot", with("\"topic\":\"orders\"", "\"topic\":\".\""), inv),
                c("topic 250 chars", with("\"topic\":\"orders\"", "\"topic\":\"" + topic250 + "\""), inv),
                c("partitions zero", with("\"partitions\":3", "\"partitions\":0"), inv),
                c("partitions over the limit", with("\"partitions\":3", "\"partitions\":1000001"), big),
                c("predicted_load too short", with("[0.5,0.5,0.5]", "[0.5,0.5]"), inv),
                c("predicted_load negative", with("[0.5,0.5,0.5]", "[0.5,-0.5,0.5]"), inv),
                c("theta negative", with("\"theta\":0.01", "\"theta\":-0.01"), inv),
                c("heavy key too long", Docs.base().heavy(new byte[Assignment.MAX_KEY_BYTES + 1], 0).json(), big));
        List<String> failures = new ArrayList<>();
        for (Case k : cases) {
            try {
                Assignment.fromJson(k.doc.getBytes(StandardCharsets.UTF_8));
                failures.add(k.name + ": accepted, want " + k.reason);
            } catch (AssignmentException e) {
                if (e.reason() != k.reason) {
                    failures.add(k.name + ": " + e.reason() + " (" + e.getMessage() + "), want " + k.reason);
                }
            }
        }
        if (!failures.isEmpty()) {
            fail(String.join("\n", failures));
        }
    }

    @Test
    void acceptsWhatRustAccepts() throws Exception {
        List<String> ok = List.of(
                BASE,
                " \t\r\n" + BASE + " \n",
                BASE.replace("\"topic\":\"orders\"", "\"topic\":\"\\u006frders\""),
                BASE.replace("\"mu\":4.0", "\"mu\":4"),
                BASE.replace("\"mu\":4.0", "\"mu\":4E+0"),
                BASE.replace("\"mu\":4.0", "\"mu\":1e-400"),
                BASE.replace("\"epoch\":7", "\"epoch\":9007199254740991"),
                BASE.replace("\"seed\":625341585", "\"seed\":4294967295"),
                // Members in any order.
                "{\"predicted_load\":[1],\"version\":1,\"format\":\"dkg.assignment\",\"table\":[0],\"buckets\":1,"
                        + "\"heavy\":[],\"topic\":\"t\",\"partitions\":1,\"epoch\":0,\"created_at_ms\":0,"
                        + "\"params\":{\"window_records\":0,\"mu\":0,\"epsilon\":0,\"theta\":0},"
                        + "\"bucket_hash\":{\"seed\":0,\"function\":\"murmur2\"}}");
        for (String doc : ok) {
            Assignment.fromJson(doc.getBytes(StandardCharsets.UTF_8));
        }
    }

    @Test
    void invalidUtf8IsMalformedWhereReadAndIgnoredWhereSkipped() {
        byte[] v1 = with("\"topic\":\"orders\"", "\"topic\":\"ord\u00e9rs\"").getBytes(StandardCharsets.UTF_8);
        // Replace the two bytes of é (C3 A9) with a lone continuation byte and a space.
        byte[] bad = v1.clone();
        int at = indexOf(bad, (byte) 0xc3);
        bad[at] = (byte) 0xa9;
        bad[at + 1] = 'x';
        AssignmentException e = assertThrows(AssignmentException.class, () -> Assignment.fromJson(bad));
        assertEquals(RejectReason.MALFORMED_JSON, e.reason());
        // The same bytes under version 3: the header pass skips topic without checking its UTF-8.
        byte[] bad2 = new String(bad, StandardCharsets.ISO_8859_1).replace("\"version\":1", "\"version\":3")
                .getBytes(StandardCharsets.ISO_8859_1);
        e = assertThrows(AssignmentException.class, () -> Assignment.fromJson(bad2));
        assertEquals(RejectReason.UNSUPPORTED_VERSION, e.reason());
        // Member names are always read as strings, skipped or not (checked against the Rust decoder).
        byte[] badKey = "{\"format\":\"dkg.assignment\",\"version\":3,\"tXpic\":\"x\"}"
                .getBytes(StandardCharsets.ISO_8859_1);
        badKey[indexOf(badKey, (byte) 'X')] = (byte) 0xff;
        e = assertThrows(AssignmentException.class, () -> Assignment.fromJson(badKey));
        assertEquals(RejectReason.MALFORMED_JSON, e.reason());
        // A lone surrogate escape in a skipped value is not checked either.
        e = assertThrows(AssignmentException.class, () -> Assignment.fromJson(
                Docs.utf8("{\"format\":\"dkg.assignment\",\"version\":3,\"x\":\"\\ud800\"}")));
        assertEquals(RejectReason.UNSUPPORTED_VERSION, e.reason());
    }

    @Test
    void oversizeIsCheckedBeforeParsing() {
        byte[] doc = new byte[Assignment.MAX_ASSIGNMENT_BYTES + 1];
        Arrays.fill(doc, (byte) ' ');
        byte[] base = Docs.utf8(BASE);
        System.arraycopy(base, 0, doc, 0, base.length);
        AssignmentException e = assertThrows(AssignmentException.class, () -> Assignment.fromJson(doc));
        assertEquals(RejectReason.OVERSIZE, e.reason());
        byte[] fits = Arrays.copyOf(doc, Assignment.MAX_ASSIGNMENT_BYTES);
        assertTrue(assertDoesNotThrowAssignment(fits).topic().equals("orders"));
    }

    private static Assignment assertDoesNotThrowAssignment(byte[] doc) {
        try {
            return Assignment.fromJson(doc);
        } catch (AssignmentException e) {
            throw new AssertionError(e.getMessage(), e);
        }
    }

    private static int indexOf(byte[] b, byte x) {
        for (int i = 0; i < b.length; i++) {
            if (b[i] == x) {
                return i;
            }
        }
        throw new AssertionError("byte not found");
    }

    private static byte[] randomKey(SplittableRandom random) {
        // Lengths around the interesting edges: empty, tails of 1-3 bytes, 8-16, long.
        int len = random.nextInt(4) == 0 ? random.nextInt(4) : random.nextInt(40);
        byte[] key = new byte[len];
        random.nextBytes(key);
        return key;
    }
}

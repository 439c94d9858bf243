package dev.dkg.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dkg.kafka.ControlUpdate.Outcome;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

class AssignmentBookTest {
    private static byte[] doc(String topic, long epoch, int... table) {
        return Docs.base().topic(topic).epoch(epoch).table(table).bytes();
    }

    @Test
    void acceptsNewerAndRejectsHostileValuesKeepingTheLastGood() {
        AssignmentBook book = new AssignmentBook();
        byte[] t = Docs.utf8("t");
        ControlUpdate first = book.apply(t, doc("t", 5, 0, 1, 2));
        assertEquals(Outcome.ACCEPTED, first.outcome());
        assertEquals("t", first.topic());
        Assignment current = book.get("t");
        assertSame(first.assignment(), current);

        byte[] oversize = new byte[Assignment.MAX_ASSIGNMENT_BYTES + 1];
        Arrays.fill(oversize, (byte) ' ');
        Object[][] cases = {
            {null, doc("t", 6, 0), RejectReason.BAD_KEY},
            {new byte[0], doc("t", 6, 0), RejectReason.BAD_KEY},
            {new byte[] {(byte) 0xff, (byte) 0xfe}, doc("t", 6, 0), RejectReason.BAD_KEY},
            {t, Docs.utf8("{not json"), RejectReason.MALFORMED_JSON},
            {t, Docs.utf8(Docs.base().topic("t").epoch(6).json().replace("\"version\":1", "\"version\":3")),
                RejectReason.UNSUPPORTED_VERSION},
            {t, doc("t", 6, 0, 1, 7), RejectReason.OUT_OF_RANGE},
            {t, oversize, RejectReason.OVERSIZE},
            {t, doc("u", 9, 0), RejectReason.TOPIC_MISMATCH},
            {t, doc("t", 4, 0), RejectReason.STALE_EPOCH},
            {t, doc("t", 5, 2, 1, 0), RejectReason.EPOCH_CONFLICT},
        };
        for (Object[] c : cases) {
            ControlUpdate u = book.apply((byte[]) c[0], (byte[]) c[1]);
            assertEquals(Outcome.REJECTED, u.outcome(), String.valueOf(c[2]));
            assertEquals(c[2], u.reason());
            assertSame(current, book.get("t"), "the last good assignment stays");
        }
        // An identical re-publication is a no-op.
        assertEquals(Outcome.UNCHANGED, book.apply(t, doc("t", 5, 0, 1, 2)).outcome());
        assertSame(current, book.get("t"));
        // A newer epoch replaces it.
        assertEquals(Outcome.ACCEPTED, book.apply(t, doc("t", 6, 1)).outcome());
        assertEquals(6, book.get("t").epoch());
        // A tombstone retracts and clears the epoch floor; a second one changes nothing.
        assertEquals(Outcome.RETRACTED, book.apply(t, null).outcome());
        assertNull(book.get("t"));
        assertEquals(Outcome.UNCHANGED, book.apply(t, null).outcome());
        assertEquals(Outcome.ACCEPTED, book.apply(t, doc("t", 1, 0)).outcome());
        assertEquals(1, book.get("t").epoch());
        assertEquals(1, book.size());
    }

    @Test
    void epochsCompareUnsigned() {
        AssignmentBook book = new AssignmentBook();
        byte[] t = Docs.utf8("t");
        assertEquals(Outcome.ACCEPTED, book.apply(t, doc("t", Assignment.MAX_EPOCH, 0)).outcome());
        // Above 2^53 - 1 (spec 4.4 step 11b), 2^63 (negative as a Java long) and 2^64 - 1 included: out_of_range.
        for (long epoch : new long[] {Assignment.MAX_EPOCH + 1, Long.MAX_VALUE, Long.MIN_VALUE, -1L}) {
            assertEquals(RejectReason.OUT_OF_RANGE, book.apply(t, doc("t", epoch, 0)).reason());
        }
        assertEquals(RejectReason.STALE_EPOCH, book.apply(t, doc("t", 1, 0)).reason());
    }

    @Test
    void topicsAreIndependentAndTombstonesNeedNoValidTopicName() {
        AssignmentBook book = new AssignmentBook();
        assertEquals(Outcome.ACCEPTED, book.apply(Docs.utf8("a"), doc("a", 3, 0)).outcome());
        assertEquals(Outcome.ACCEPTED, book.apply(Docs.utf8("b"), doc("b", 1, 0)).outcome());
        assertEquals(2, book.snapshot().size());
        assertEquals(Outcome.UNCHANGED, book.apply(Docs.utf8("not/a topic"), null).outcome());
        assertEquals(Outcome.RETRACTED, book.apply(Docs.utf8("a"), null).outcome());
        assertEquals(1, book.get("b").epoch());
    }

    @Test
    void lowerSizeLimitAppliesBeforeParsing() {
        AssignmentBook book = new AssignmentBook(10);
        assertEquals(RejectReason.OVERSIZE, book.apply(Docs.utf8("t"), doc("t", 1, 0)).reason());
        assertEquals(Assignment.MAX_ASSIGNMENT_BYTES, new AssignmentBook(Integer.MAX_VALUE).maxValueBytes());
    }

    private static final String GEN_A = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    private static final String GEN_B = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    /** One record of a sequence and what it must do: outcome, reason (or null), the topic's epoch after (or null). */
    private record Step(String key, String value, Outcome outcome, RejectReason reason, Long epochAfter) {}

    private static Step step(String key, String value, Outcome outcome, Long epochAfter) {
        return new Step(key, value, outcome, null, epochAfter);
    }

    private static Step reject(String key, String value, RejectReason reason, Long epochAfter) {
        return new Step(key, value, Outcome.REJECTED, reason, epochAfter);
    }

    private static String v2(String topic, long epoch, String generation, int... table) {
        return Docs.base().topic(topic).epoch(epoch).table(table).generation(generation).json();
    }

    private static void run(String name, Step... steps) {
        AssignmentBook book = new AssignmentBook();
        DkgRouter router = DkgRouter.detached("_dkg.assignments");
        for (int i = 0; i < steps.length; i++) {
            Step st = steps[i];
            byte[] key = Docs.utf8(st.key());
            byte[] value = st.value() == null ? null : Docs.utf8(st.value());
            String at = name + " record " + i;
            for (ControlUpdate u : new ControlUpdate[] {book.apply(key, value), router.apply(key, value)}) {
                assertEquals(st.outcome(), u.outcome(), at + ": " + u.detail());
                assertEquals(st.reason(), u.reason(), at);
            }
            Assignment now = book.get(st.key());
            assertEquals(st.epochAfter(), now == null ? null : now.epoch(), at);
            assertSame(now, router.assignment(st.key()) == null ? null : now, at);
            assertEquals(now == null, router.assignment(st.key()) == null, at + ": the router follows the book");
        }
    }

    /** Retraction documents (spec 6.4): like a tombstone, but the epoch floor stays. */
    @Test
    void retractionKeepsItsEpochAsTheFloor() {
        String r12 = Docs.retraction("t", 12, null);
        run("retraction",
                step("t", v2("t", 10, null, 0), Outcome.ACCEPTED, 10L),
                step("t", r12, Outcome.RETRACTED, null),
                step("t", r12, Outcome.UNCHANGED, null),
                reject("t", r12.replace("1700000000000", "1700000000001"), RejectReason.EPOCH_CONFLICT, null),
                reject("t", v2("t", 12, null, 0), RejectReason.EPOCH_CONFLICT, null),
                reject("t", v2("t", 11, null, 0), RejectReason.STALE_EPOCH, null),
                reject("t", Docs.retraction("t", 11, null), RejectReason.STALE_EPOCH, null),
                reject("t", Docs.retraction("u", 13, null), RejectReason.TOPIC_MISMATCH, null),
                step("t", v2("t", 13, null, 0), Outcome.ACCEPTED, 13L),
                reject("t", Docs.retraction("t", 13, null), RejectReason.EPOCH_CONFLICT, 13L),
                reject("t", Docs.retraction("t", 2, null), RejectReason.STALE_EPOCH, 13L),
                step("t", Docs.retraction("t", 20, null), Outcome.RETRACTED, null),
                // A tombstone clears the floor: a lower epoch is accepted again (v1's rule).
                step("t", null, Outcome.UNCHANGED, null),
                step("t", v2("t", 1, null, 0), Outcome.ACCEPTED, 1L),
                // A retraction of a topic without an assignment changes no routing but sets its floor.
                step("u", Docs.retraction("u", 5, null), Outcome.UNCHANGED, null),
                reject("u", v2("u", 4, null, 0), RejectReason.STALE_EPOCH, null),
                step("u", v2("u", 6, null, 0), Outcome.ACCEPTED, 6L));
        AssignmentBook book = new AssignmentBook();
        book.apply(Docs.utf8("t"), Docs.utf8(r12));
        assertEquals(12, book.retractedAt("t").getAsLong());
        book.apply(Docs.utf8("t"), null);
        assertTrue(book.retractedAt("t").isEmpty());
    }

    /** The {@code @generation} record and documents' generations (spec 6.4, rules G1-G7). */
    @Test
    void generationRules() {
        String g = AssignmentBook.GENERATION_KEY;
        run("generation",
                step("t", v2("t", 1, null, 0), Outcome.ACCEPTED, 1L),
                // The first generation record is adopted and keeps the state (a topic written before generations).
                step(g, Docs.generationRecord(GEN_A), Outcome.UNCHANGED, null),
                step(g, Docs.generationRecord(GEN_A), Outcome.UNCHANGED, null),
                // ... t's epoch 1 is still in force: 2 is accepted above it (below it would be stale).
                reject("t", v2("t", 0, GEN_A, 0), RejectReason.STALE_EPOCH, 1L),
                step("t", v2("t", 2, GEN_A, 0), Outcome.ACCEPTED, 2L),
                // v1 documents carry none: never a mismatch.
                step("t", Docs.base().topic("t").epoch(3).table(0).json(), Outcome.ACCEPTED, 3L),
                // Another generation's document: drop everything and re-read ...
                step("t", v2("t", 4, GEN_B, 0), Outcome.REREAD, null),
                // ... the re-read meets the same log: now that document is rejected, not re-read forever.
                step(g, Docs.generationRecord(GEN_A), Outcome.UNCHANGED, null),
                step("t", v2("t", 2, GEN_A, 0), Outcome.ACCEPTED, 2L),
                reject("t", v2("t", 4, GEN_B, 0), RejectReason.GENERATION_MISMATCH, 2L),
                // A generation record with a new id: the topic was recreated, the old state goes.
                step(g, Docs.generationRecord(GEN_B), Outcome.RESET, null),
                step("t", v2("t", 1, GEN_B, 0), Outcome.ACCEPTED, 1L),
                // A document of generation A (the first time as a document's): one re-read.
                step("t", v2("t", 9, GEN_A, 0), Outcome.REREAD, null),
                // Racing publishers (A's generation record, then B's, then a document still under A): after its
                // one re-read, A's document is rejected.
                step(g, Docs.generationRecord(GEN_A), Outcome.UNCHANGED, null),
                step(g, Docs.generationRecord(GEN_B), Outcome.RESET, null),
                reject("t", v2("t", 9, GEN_A, 0), RejectReason.GENERATION_MISMATCH, null),
                // Generation records belong under their key only; an assignment under it is a mismatch.
                reject("t", Docs.generationRecord(GEN_A), RejectReason.INVALID, null),
                reject(g, v2("t", 1, null, 0), RejectReason.TOPIC_MISMATCH, null),
                step(g, null, Outcome.UNCHANGED, null));
        AssignmentBook book = new AssignmentBook();
        assertNull(book.generation());
        // A document naming a generation while none is in force: not in force, so a re-read too.
        assertTrue(book.apply(Docs.utf8("t"), Docs.utf8(v2("t", 1, GEN_B, 0))).reread());
        book.apply(Docs.utf8(g), Docs.utf8(Docs.generationRecord(GEN_A)));
        assertEquals(GEN_A, book.generation());
        assertEquals(RejectReason.GENERATION_MISMATCH, book.apply(Docs.utf8("t"), Docs.utf8(v2("t", 1, GEN_B, 0)))
                .reason());
        book.apply(Docs.utf8("t"), Docs.utf8(v2("t", 1, GEN_A, 0)));
        assertEquals(1, book.size());
        ControlUpdate reset = book.apply(Docs.utf8(g), Docs.utf8(Docs.generationRecord(GEN_B)));
        assertEquals(Outcome.RESET, reset.outcome());
        assertFalse(reset.reread(), "a generation record's reset needs no re-read");
        assertEquals(0, book.size());
    }
}

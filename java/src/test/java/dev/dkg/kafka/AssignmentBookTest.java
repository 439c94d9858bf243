package dev.dkg.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

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
        assertEquals(Outcome.ACCEPTED, book.apply(t, doc("t", Long.MAX_VALUE, 0)).outcome());
        // 2^63 is above 2^63 - 1 as an unsigned 64-bit epoch (negative as a Java long).
        assertEquals(Outcome.ACCEPTED, book.apply(t, doc("t", Long.MIN_VALUE, 0)).outcome());
        assertEquals(RejectReason.STALE_EPOCH, book.apply(t, doc("t", Long.MAX_VALUE, 0)).reason());
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
}

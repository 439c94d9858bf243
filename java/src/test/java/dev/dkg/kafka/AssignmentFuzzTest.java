package dev.dkg.kafka;

import com.code_intelligence.jazzer.junit.FuzzTest;

/**
 * Jazzer fuzzes {@link Assignment#fromJson}, the decoder every producer runs on control-topic values: whatever the
 * bytes, it returns an assignment that passes {@link AssignmentChecks#revalidate} or throws
 * {@link AssignmentException} with a reason; any other exception or failed check is a finding.
 *
 * <p>Under {@code mvn verify} (regression mode) it replays the committed corpus {@code spec/corpus/assignment/},
 * which the pom copies to this test's inputs resource directory. {@code JAZZER_FUZZ=1} fuzzes it for
 * {@code maxDuration} (scripts/test runs it; {@code JAZZER_MAX_DURATION} overrides the time); the inputs it finds
 * go to {@code java/.cifuzz-corpus/} (git-ignored), a crashing one to {@code java/src/test/resources/}.
 */
class AssignmentFuzzTest {
    @FuzzTest(maxDuration = "45s")
    void fromJson(byte[] data) {
        AssignmentChecks.decode(data);
    }
}

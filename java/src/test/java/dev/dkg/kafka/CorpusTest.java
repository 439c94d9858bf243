package dev.dkg.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The differential check of the assignment decoder: every input of the committed fuzz corpus
 * ({@code spec/corpus/assignment/}, minimised by {@code cargo fuzz cmin}) gets from {@link Assignment#fromJson} the
 * verdict the Rust decoder gives it ({@code spec/corpus/assignment.json}, regenerated and compared by the Rust test
 * {@code crates/dkg-protocol/tests/corpus_verdicts.rs}): accepted, or rejected with the same {@link RejectReason}.
 * The directory comes from the {@code dkg.corpus} system property (set by the pom); a missing one fails the test.
 */
class CorpusTest {
    @Test
    void sameVerdictsAsRust() throws IOException {
        String dir = System.getProperty("dkg.corpus");
        assertNotNull(dir, "system property dkg.corpus is not set (the pom sets it to ../spec/corpus)");
        Path inputs = Path.of(dir, "assignment");
        JsonNode verdicts = new ObjectMapper().readTree(Path.of(dir, "assignment.json").toFile()).get("verdicts");
        Map<String, String> want = new TreeMap<>();
        verdicts.properties().forEach(e -> want.put(e.getKey(), e.getValue().asText()));
        List<String> names;
        try (Stream<Path> files = Files.list(inputs)) {
            names = files.map(p -> p.getFileName().toString()).sorted().collect(Collectors.toList());
        }
        assertEquals(want.keySet(), new java.util.TreeSet<>(names), "the verdicts name exactly the corpus files");
        assertTrue(names.size() >= 300, "only " + names.size() + " corpus inputs");
        List<String> failures = new ArrayList<>();
        int accepted = 0;
        for (String name : names) {
            byte[] data = Files.readAllBytes(inputs.resolve(name));
            String got;
            try {
                AssignmentChecks.revalidate(Assignment.fromJson(data), data);
                got = "accept";
                accepted++;
            } catch (AssignmentException e) {
                got = e.reason().label();
                if (!got.equals(want.get(name))) {
                    got += " (" + e.getMessage() + ")";
                }
            }
            if (!got.equals(want.get(name))) {
                failures.add(name + ": " + got + ", Rust: " + want.get(name));
            }
        }
        assertTrue(accepted > 0 && accepted < names.size(), "both verdicts occur");
        if (!failures.isEmpty()) {
            fail(failures.size() + " of " + names.size() + " corpus inputs differ from Rust:\n"
                    + String.join("\n", failures));
        }
    }
}

package dev.dkg.kafka;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.tools.DiagnosticCollector;
import javax.tools.JavaCompiler;
import javax.tools.JavaFileObject;
import javax.tools.SimpleJavaFileObject;
import javax.tools.ToolProvider;
import org.apache.kafka.clients.producer.Partitioner;
import org.junit.jupiter.api.Test;

/**
 * The root README's Java snippet (its five-minute path) compiles against this jar and the kafka-clients under test,
 * and its {@code partitioner.class} names a partitioner of this jar: the front door cannot drift from the API. The
 * snippet is the README's first {@code ```java} block, compiled as the body of a method (with the imports a user
 * writes anyway).
 */
class ReadmeSnippetTest {
    private static final Pattern JAVA_BLOCK = Pattern.compile("```java\n(.*?)```", Pattern.DOTALL);
    private static final Pattern PARTITIONER = Pattern.compile("\"partitioner\\.class\", \"([^\"]+)\"");

    @Test
    void theReadmeSnippetCompilesAndNamesThisJarsPartitioner() throws IOException, ClassNotFoundException {
        String readme = Files.readString(Path.of("..", "README.md"));
        Matcher block = JAVA_BLOCK.matcher(readme);
        assertTrue(block.find(), "../README.md has no ```java block");
        String body = block.group(1);
        String source = "import java.util.Properties;\nimport org.apache.kafka.clients.producer.*;\n"
                + "class ReadmeSnippet {\n    static void run() {\n" + body + "    }\n}\n";
        JavaFileObject file = new SimpleJavaFileObject(
                URI.create("string:///ReadmeSnippet.java"), JavaFileObject.Kind.SOURCE) {
            @Override
            public CharSequence getCharContent(boolean ignoreEncodingErrors) {
                return source;
            }
        };
        // Surefire runs the tests from a manifest-only jar; the test class path proper is in this property.
        String classPath = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        Path out = Files.createTempDirectory("dkg-readme-snippet");
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        DiagnosticCollector<JavaFileObject> diagnostics = new DiagnosticCollector<>();
        boolean compiled = javac.getTask(null, null, diagnostics,
                List.of("-classpath", classPath, "-d", out.toString()), null, List.of(file)).call();
        assertTrue(compiled, () -> "the README's Java snippet does not compile:\n" + source + "\n"
                + diagnostics.getDiagnostics());

        Matcher partitioner = PARTITIONER.matcher(body);
        assertTrue(partitioner.find(), "the README's Java snippet sets no partitioner.class:\n" + body);
        Class<?> named = Class.forName(partitioner.group(1));
        assertTrue(Partitioner.class.isAssignableFrom(named) && named.getName().startsWith("dev.dkg.kafka."),
                named + " is not a partitioner of this jar");
    }
}

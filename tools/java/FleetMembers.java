// Java consumer-group members (dev.dkg.kafka.DkgKafkaConsumer, the plug-in's java/src/main/java, or a plain
// KafkaConsumer for the control run) for the mixed-fleet test partitioner/tests/consumer_mixed_fleet.rs: several
// members, of one or more groups, each on a thread of its own, reporting every record they process on stdout. The
// test checks the order per key and producer over each group. Compiled at test time with javac -sourcepath
// java/src/main/java against the kafka classpath cached by scripts/kafka; never part of the Maven build.
//
// Usage:
//   java -cp <kafka classpath>:<dir> FleetMembers BOOTSTRAP TOPIC CONTROL HANDOFF MODE MEMBER...
//       MODE: dkg (DkgKafkaConsumer) or plain (KafkaConsumer). MEMBER: NAME:GROUP:EVERY:PAUSE_MS[:PROTOCOL], a
//       member that pauses PAUSE_MS after every EVERY records (uneven processing speeds, so partitions lag behind
//       each other), of a group of PROTOCOL: classic (the default) or consumer (KIP-848).
//       Every member is constructed first (a DkgKafkaConsumer reads the control and handoff topics then); then
//       "ready". Commands on stdin, one a line: "start NAME" subscribes NAME and starts its poll loop; "stop" closes
//       every started member (final commit, leave the group) and exits 0 after "closed". End of stdin: exit 1.
//   stdout, one line each, the wall clock in ns (Instant.now()) first:
//       "<ns> r NAME PARTITION OFFSET KEY VALUE"  a record handed to the application (processed);
//       "<ns> c NAME"                            commitSync() returned: every record NAME printed before is committed;
//       "<ns> a NAME N" / "<ns> v NAME N"        N partitions assigned / revoked or lost;
//       "<ns> e NAME ERROR"                      the member failed (the test fails at once).
//       Records are printed and flushed before the next poll or commit, so whatever a commit covers was printed.
//   Exits 1 on any error (printed to stderr).
//
// Every member of a classic group uses partition.assignment.strategy=cooperative-sticky, as the Rust DkgConsumer and
// Python's do, so that Java and Rust members can share a classic group (one assignor all members support). A
// KIP-848 member sets nothing of the group's but group.protocol (the broker assigns; the client refuses the rest).

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.FileOutputStream;
import java.io.FileDescriptor;
import java.io.BufferedOutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import dev.dkg.kafka.DkgConfig;
import dev.dkg.kafka.DkgKafkaConsumer;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.serialization.StringDeserializer;

public final class FleetMembers {
    private static final PrintStream OUT =
            new PrintStream(new BufferedOutputStream(new FileOutputStream(FileDescriptor.out), 1 << 16), false,
                    StandardCharsets.UTF_8);

    private static long now() {
        Instant t = Instant.now();
        return t.getEpochSecond() * 1_000_000_000L + t.getNano();
    }

    /** One line, flushed by the caller's next flush (records) or at once (everything else). */
    private static void line(String text, boolean flush) {
        synchronized (OUT) {
            OUT.print(now());
            OUT.print(' ');
            OUT.print(text);
            OUT.print('\n');
            if (flush) {
                OUT.flush();
            }
        }
    }

    private static void flush() {
        synchronized (OUT) {
            OUT.flush();
        }
    }

    /** A member: its consumer, its pace, its poll thread. */
    static final class Member implements Runnable {
        final String name;
        final String topic;
        final Consumer<String, String> consumer;
        final long every;
        final long pauseMs;
        volatile boolean running = true;
        volatile Throwable failure;
        Thread thread;

        Member(String name, String topic, Consumer<String, String> consumer, long every, long pauseMs) {
            this.name = name;
            this.topic = topic;
            this.consumer = consumer;
            this.every = every;
            this.pauseMs = pauseMs;
        }

        @Override
        public void run() {
            try {
                consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                    @Override
                    public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                        if (!partitions.isEmpty()) {
                            line("v " + name + " " + partitions.size(), true);
                        }
                    }

                    @Override
                    public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                        if (!partitions.isEmpty()) {
                            line("a " + name + " " + partitions.size(), true);
                        }
                    }
                });
                long n = 0;
                while (running) {
                    boolean any = false;
                    for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(100))) {
                        any = true;
                        line("r " + name + " " + r.partition() + " " + r.offset() + " " + r.key() + " " + r.value(),
                                false);
                        n++;
                        if (pauseMs > 0 && n % every == 0) {
                            flush();
                            Thread.sleep(pauseMs);
                        }
                    }
                    flush();
                    if (any) {
                        try {
                            consumer.commitSync();
                            line("c " + name, true);
                        } catch (RebalanceInProgressException e) {
                            // Kafka's answer to a commit during a rebalance: poll on, commit after it (no "c": the
                            // test then allows these records once more should this member crash).
                        }
                    }
                }
                flush();
                consumer.close();
            } catch (Throwable e) {
                failure = e;
                e.printStackTrace();
                line("e " + name + " " + e.toString().replace('\n', ' '), true);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 6) {
            System.err.println("usage: FleetMembers BOOTSTRAP TOPIC CONTROL HANDOFF MODE NAME:GROUP:EVERY:PAUSE_MS...");
            System.exit(2);
        }
        String topic = args[1];
        boolean dkg = switch (args[4]) {
            case "dkg" -> true;
            case "plain" -> false;
            default -> throw new IllegalArgumentException("MODE must be dkg or plain, got " + args[4]);
        };
        Map<String, Member> members = new LinkedHashMap<>();
        for (int i = 5; i < args.length; i++) {
            String[] spec = args[i].split(":");
            Map<String, Object> c = new HashMap<>();
            c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
            c.put(ConsumerConfig.GROUP_ID_CONFIG, spec[1]);
            c.put(ConsumerConfig.CLIENT_ID_CONFIG, spec[0]);
            c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
            c.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 50);
            String protocol = spec.length > 4 ? spec[4] : "classic";
            switch (protocol) {
                case "classic" -> {
                    c.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 6000);
                    c.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 500);
                    c.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
                            CooperativeStickyAssignor.class.getName());
                }
                case "consumer" -> c.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
                default -> throw new IllegalArgumentException("PROTOCOL must be classic or consumer: " + args[i]);
            }
            c.put(DkgConfig.CONTROL_TOPIC_CONFIG, args[2]);
            c.put(DkgConfig.HANDOFF_TOPIC_CONFIG, args[3]);
            c.put(DkgConfig.STARTUP_TIMEOUT_MS_CONFIG, "30000");
            // Keeps the commit metadata's list of unprocessed offsets within the broker's 4096 B (C7, C13).
            c.put(DkgKafkaConsumer.MAX_HELD_RECORDS_CONFIG, 200);
            StringDeserializer k = new StringDeserializer();
            StringDeserializer v = new StringDeserializer();
            Consumer<String, String> consumer;
            if (dkg) {
                consumer = new DkgKafkaConsumer<>(c, k, v);
            } else {
                c.keySet().removeIf(key -> key.startsWith("dkg."));
                consumer = new KafkaConsumer<>(c, k, v);
            }
            members.put(spec[0], new Member(spec[0], topic, consumer, Long.parseLong(spec[2]),
                    Long.parseLong(spec[3])));
        }
        line("ready", true);
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String command;
        while ((command = stdin.readLine()) != null) {
            if (command.startsWith("start ")) {
                Member m = members.get(command.substring("start ".length()));
                if (m == null || m.thread != null) {
                    throw new IllegalArgumentException("no member to start: " + command);
                }
                m.thread = new Thread(m, "member-" + m.name);
                m.thread.start();
            } else if (command.equals("stop")) {
                boolean failed = false;
                for (Member m : members.values()) {
                    m.running = false;
                }
                for (Member m : members.values()) {
                    if (m.thread != null) {
                        m.thread.join();
                        failed |= m.failure != null;
                    } else {
                        m.consumer.close();
                    }
                }
                line("closed", true);
                System.exit(failed ? 1 : 0);
            } else {
                throw new IllegalArgumentException("unknown command: " + command);
            }
        }
        System.err.println("FleetMembers: stdin closed before \"stop\"");
        System.exit(1);
    }
}

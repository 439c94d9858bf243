// A Java ordering producer (dev.dkg.kafka.DkgKafkaProducer, the plug-in's java/src/main/java) for the mixed-fleet
// test partitioner/tests/consumer_java_producer.rs: the test's Zipf workload (keys k0001..k2000, Zipf 1.1, value
// "<idx>:<seq>"), sent at a fixed rate through the ordering protocol while Rust producers write the same topic and
// DkgConsumer members check the order. Compiled at test time with javac -sourcepath java/src/main/java against the
// kafka classpath cached by scripts/kafka; never part of the Maven build.
//
// Usage:
//   java -cp <kafka classpath>:<dir> OrderingProducer BOOTSTRAP TOPIC CONTROL HANDOFF IDX COUNT RATE LEASE_MS OUT LAST_EPOCH
//       After its last send it waits (at most 60 s) until it has adopted LAST_EPOCH, then closes.
//       stdout: "ready <producer id>" once constructed (control topic read, lease written), then "done <acked>"
//       after close; it sends nothing before it reads a line ("go") on stdin, so the test can start its sends
//       together with the Rust producers' and the epoch switches (a JVM starts in its own time); OUT: one line
//       per acknowledged record, "<seq> <key> <partition>", in send order. A line "stop" after "go" ends the sends
//       before COUNT (partitioner/tests/consumer_mixed_fleet.rs sends until its last switch has happened).
//       Exits 1 on any error (printed to stderr).

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import dev.dkg.kafka.Assignment;
import dev.dkg.kafka.DkgConfig;
import dev.dkg.kafka.DkgKafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

public final class OrderingProducer {
    private static final int KEYS = 2_000;
    private static final double EXPONENT = 1.1;

    public static void main(String[] args) throws Exception {
        if (args.length != 10) {
            System.err.println(
                    "usage: OrderingProducer BOOTSTRAP TOPIC CONTROL HANDOFF IDX COUNT RATE LEASE_MS OUT LAST_EPOCH");
            System.exit(2);
        }
        String topic = args[1];
        int idx = Integer.parseInt(args[4]);
        int count = Integer.parseInt(args[5]);
        double rate = Double.parseDouble(args[6]);
        Map<String, Object> config = new HashMap<>();
        config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        config.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        config.put(DkgConfig.CONTROL_TOPIC_CONFIG, args[2]);
        config.put(DkgConfig.HANDOFF_TOPIC_CONFIG, args[3]);
        config.put(DkgConfig.TOPICS_CONFIG, topic);
        config.put(DkgConfig.LEASE_MS_CONFIG, args[7]);

        // Zipf(KEYS, EXPONENT) by inverse CDF, seeded per producer.
        double[] cdf = new double[KEYS];
        double sum = 0;
        for (int r = 1; r <= KEYS; r++) {
            sum += 1 / Math.pow(r, EXPONENT);
            cdf[r - 1] = sum;
        }
        Random random = new Random(idx * 7919L + 1);
        int[] partitions = new int[count];
        String[] keys = new String[count];
        AtomicReference<Exception> failure = new AtomicReference<>();
        AtomicBoolean stopped = new AtomicBoolean();
        int sends = 0;
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        try (DkgKafkaProducer<String, String> producer =
                new DkgKafkaProducer<>(config, new StringSerializer(), new StringSerializer())) {
            System.out.println("ready " + producer.producerId());
            System.out.flush();
            String go = stdin.readLine();
            if (!"go".equals(go)) {
                throw new IllegalStateException("expected \"go\" on stdin, read " + go);
            }
            // A "stop" line ends the sends early (the mixed-fleet test sends until its last switch has happened).
            Thread stopper = new Thread(() -> {
                try {
                    for (String line; (line = stdin.readLine()) != null; ) {
                        if (line.equals("stop")) {
                            stopped.set(true);
                        }
                    }
                } catch (java.io.IOException e) {
                    // stdin gone: no stop
                }
            }, "stdin");
            stopper.setDaemon(true);
            stopper.start();
            long start = System.nanoTime();
            for (int seq = 0; seq < count && !stopped.get(); seq++) {
                sends = seq + 1;
                if (seq % 50 == 0) {
                    long due = start + (long) (seq / rate * 1e9);
                    long wait = due - System.nanoTime();
                    if (wait > 0) {
                        Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                    }
                }
                double u = random.nextDouble() * sum;
                int lo = 0;
                int hi = KEYS - 1;
                while (lo < hi) {
                    int mid = (lo + hi) >>> 1;
                    if (cdf[mid] < u) {
                        lo = mid + 1;
                    } else {
                        hi = mid;
                    }
                }
                String key = String.format("k%04d", lo + 1);
                keys[seq] = key;
                partitions[seq] = -1;
                int s = seq;
                producer.send(new ProducerRecord<>(topic, key, idx + ":" + seq), (md, e) -> {
                    if (e != null) {
                        failure.compareAndSet(null, e);
                    } else {
                        partitions[s] = md.partition();
                    }
                });
            }
            producer.flush();
            long lastEpoch = Long.parseLong(args[9]);
            long until = System.nanoTime() + 60_000_000_000L;
            while (System.nanoTime() < until) {
                Assignment a = producer.router().assignment(topic);
                if (a != null && a.epoch() >= lastEpoch) {
                    break;
                }
                Thread.sleep(20);
            }
        }
        if (failure.get() != null) {
            failure.get().printStackTrace();
            System.exit(1);
        }
        int acked = 0;
        try (BufferedWriter out = Files.newBufferedWriter(Path.of(args[8]), StandardCharsets.UTF_8)) {
            for (int seq = 0; seq < sends; seq++) {
                if (partitions[seq] >= 0) {
                    out.write(seq + " " + keys[seq] + " " + partitions[seq] + "\n");
                    acked++;
                }
            }
        }
        System.out.println("done " + acked);
    }
}

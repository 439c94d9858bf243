// The Java Kafka client's own answer for where a keyed record goes, for the parity test
// partitioner/tests/java_default_partition_parity.rs. Compiled at test time against the kafka-clients jar cached by
// scripts/kafka (the pinned Kafka version); never part of the Rust build.
//
// Usage:
//   java -cp <kafka classpath>:<dir> DefaultPartition [--base64] N1 N2 ...
//       stdin: one key per line, hex (default) or standard base64; an empty line is the empty (non-null) key.
//       stdout: one line per key: "<Utils.murmur2(key) as int> <partition for N1> <partition for N2> ..."
//       Each partition is computed twice, by BuiltInPartitioner.partitionForKey (what KafkaProducer calls for a
//       keyed record without an explicit partition or a custom partitioner) and by the documented formula
//       Utils.toPositive(Utils.murmur2(key)) % N; exits 2 if they ever disagree.
//   java -cp <kafka classpath>:<dir> DefaultPartition --produce BOOTSTRAP TOPIC [--base64]
//       stdin: keys as above. Sends each key through a real KafkaProducer (default partitioner, acks=all,
//       idempotent), value = the key's 0-based line number as decimal text, and prints
//       "<line> <partition> <offset>" per record as acknowledged by the broker, in input order.

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.utils.Utils;

public final class DefaultPartition {
    private DefaultPartition() {}

    public static void main(String[] args) throws Exception {
        boolean base64 = false;
        boolean produce = false;
        List<String> rest = new ArrayList<>();
        for (String a : args) {
            if (a.equals("--base64")) {
                base64 = true;
            } else if (a.equals("--produce")) {
                produce = true;
            } else {
                rest.add(a);
            }
        }
        List<byte[]> keys = readKeys(base64);
        if (produce) {
            if (rest.size() != 2) {
                usage();
            }
            produce(rest.get(0), rest.get(1), keys);
        } else {
            if (rest.isEmpty()) {
                usage();
            }
            int[] counts = new int[rest.size()];
            for (int i = 0; i < counts.length; i++) {
                counts[i] = Integer.parseInt(rest.get(i));
                if (counts[i] < 1) {
                    usage();
                }
            }
            partitions(keys, counts);
        }
    }

    private static void usage() {
        System.err.println("usage: DefaultPartition [--base64] N1 [N2 ...]  |  DefaultPartition --produce BOOTSTRAP TOPIC [--base64]");
        System.exit(64);
    }

    private static List<byte[]> readKeys(boolean base64) throws Exception {
        List<byte[]> keys = new ArrayList<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII), 1 << 16);
        String line;
        while ((line = in.readLine()) != null) {
            keys.add(base64 ? Base64.getDecoder().decode(line) : fromHex(line));
        }
        return keys;
    }

    private static byte[] fromHex(String s) {
        if (s.length() % 2 != 0) {
            throw new IllegalArgumentException("odd-length hex key: " + s);
        }
        byte[] out = new byte[s.length() / 2];
        for (int i = 0; i < out.length; i++) {
            int hi = Character.digit(s.charAt(2 * i), 16);
            int lo = Character.digit(s.charAt(2 * i + 1), 16);
            if (hi < 0 || lo < 0) {
                throw new IllegalArgumentException("bad hex key: " + s);
            }
            out[i] = (byte) ((hi << 4) | lo);
        }
        return out;
    }

    private static void partitions(List<byte[]> keys, int[] counts) throws Exception {
        BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.US_ASCII), 1 << 16);
        StringBuilder sb = new StringBuilder();
        for (int k = 0; k < keys.size(); k++) {
            byte[] key = keys.get(k);
            int hash = Utils.murmur2(key);
            sb.setLength(0);
            sb.append(hash);
            for (int n : counts) {
                int viaProducer = BuiltInPartitioner.partitionForKey(key, n);
                int viaFormula = Utils.toPositive(hash) % n;
                if (viaProducer != viaFormula) {
                    out.flush();
                    System.err.println("BuiltInPartitioner.partitionForKey disagrees with toPositive(murmur2) % n for key #"
                            + k + " n=" + n + ": " + viaProducer + " vs " + viaFormula);
                    System.exit(2);
                }
                sb.append(' ').append(viaProducer);
            }
            sb.append('\n');
            out.write(sb.toString());
        }
        out.flush();
    }

    private static void produce(String bootstrap, String topic, List<byte[]> keys) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        // No partitioner.class and no explicit partition: the producer's built-in default placement for keyed records.
        List<Future<RecordMetadata>> acks = new ArrayList<>(keys.size());
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < keys.size(); i++) {
                byte[] value = Integer.toString(i).getBytes(StandardCharsets.US_ASCII);
                acks.add(producer.send(new ProducerRecord<>(topic, keys.get(i), value)));
            }
            producer.flush();
            BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.US_ASCII), 1 << 16);
            for (int i = 0; i < acks.size(); i++) {
                RecordMetadata md = acks.get(i).get();
                out.write(i + " " + md.partition() + " " + md.offset() + "\n");
            }
            out.flush();
        }
    }
}

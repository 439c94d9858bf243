package dev.dkg.kafka;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.StringJoiner;

/** Builds v1 assignment documents for tests (the shape of docs/spec.md, written out by hand). */
final class Docs {
    String topic = "orders";
    int partitions = 3;
    long epoch = 7;
    int seed = 625341585;
    int[] table = {0, 1, 2, 0};
    final List<byte[]> heavyKeys = new ArrayList<>();
    final List<Integer> heavyPartitions = new ArrayList<>();
    String params = "{\"theta\":0.01,\"epsilon\":0.005,\"mu\":4.0,\"window_records\":100000}";
    long createdAtMs = 1700000000000L;
    String predictedLoad;

    static Docs base() {
        return new Docs();
    }

    Docs topic(String t) {
        topic = t;
        return this;
    }

    Docs partitions(int n) {
        partitions = n;
        return this;
    }

    Docs epoch(long e) {
        epoch = e;
        return this;
    }

    Docs seed(int s) {
        seed = s;
        return this;
    }

    Docs table(int... t) {
        table = t;
        return this;
    }

    Docs heavy(byte[] key, int partition) {
        heavyKeys.add(key);
        heavyPartitions.add(partition);
        return this;
    }

    Docs heavy(String key, int partition) {
        return heavy(key.getBytes(StandardCharsets.UTF_8), partition);
    }

    Docs createdAtMs(long ms) {
        createdAtMs = ms;
        return this;
    }

    String json() {
        StringJoiner t = new StringJoiner(",", "[", "]");
        for (int p : table) {
            t.add(Integer.toUnsignedString(p));
        }
        StringJoiner h = new StringJoiner(",", "[", "]");
        for (int i = 0; i < heavyKeys.size(); i++) {
            h.add("{\"key_b64\":\"" + Base64.getEncoder().encodeToString(heavyKeys.get(i)) + "\",\"partition\":"
                    + heavyPartitions.get(i) + ",\"weight\":" + (1000 - i) + "}");
        }
        String load = predictedLoad;
        if (load == null) {
            StringJoiner l = new StringJoiner(",", "[", "]");
            for (int i = 0; i < partitions; i++) {
                l.add("0.5");
            }
            load = l.toString();
        }
        return "{\"format\":\"dkg.assignment\",\"version\":1,\"topic\":\"" + topic + "\",\"partitions\":" + partitions
                + ",\"epoch\":" + Long.toUnsignedString(epoch) + ",\"bucket_hash\":{\"function\":\"murmur2\",\"seed\":"
                + Integer.toUnsignedString(seed) + "},\"buckets\":" + table.length + ",\"table\":" + t + ",\"heavy\":"
                + h + ",\"params\":" + params + ",\"created_at_ms\":" + createdAtMs + ",\"predicted_load\":" + load
                + "}";
    }

    byte[] bytes() {
        return json().getBytes(StandardCharsets.UTF_8);
    }

    Assignment build() {
        try {
            return Assignment.fromJson(bytes());
        } catch (AssignmentException e) {
            throw new AssertionError("test document rejected: " + e.getMessage(), e);
        }
    }

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }
}

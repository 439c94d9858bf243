package dev.dkg.kafka;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.StringJoiner;

/**
 * Builds assignment documents for tests (the shape of docs/spec.md, written out by hand): version 1, or version 2
 * once a version 2 member is used (split keys, the compact table, a generation).
 */
final class Docs {
    int version = 1;
    String topic = "orders";
    int partitions = 3;
    long epoch = 7;
    int seed = 625341585;
    int[] table = {0, 1, 2, 0};
    final List<byte[]> heavyKeys = new ArrayList<>();
    final List<Integer> heavyPartitions = new ArrayList<>();
    /** Per heavy key: null, or the {@code split} array's JSON text. */
    final List<String> heavySplits = new ArrayList<>();
    boolean compactTable;
    String generation;
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
        heavySplits.add(null);
        return this;
    }

    /** A split heavy key (version 2): parts {@code partitions[i]} with {@code weights[i]}, no {@code partition}. */
    Docs split(String key, int[] partitions, int[] weights) {
        StringJoiner parts = new StringJoiner(",", "[", "]");
        for (int i = 0; i < partitions.length; i++) {
            parts.add("{\"partition\":" + partitions[i] + ",\"weight\":" + weights[i] + "}");
        }
        return splitJson(key, parts.toString());
    }

    /** A split heavy key with the {@code split} member's JSON text as given (version 2). */
    Docs splitJson(String key, String splitJson) {
        version = 2;
        heavyKeys.add(key.getBytes(StandardCharsets.UTF_8));
        heavyPartitions.add(null);
        heavySplits.add(splitJson);
        return this;
    }

    /** The table as {@code table_b64} + {@code table_width} (version 2). */
    Docs compact() {
        version = 2;
        compactTable = true;
        return this;
    }

    /** A {@code generation} member (version 2). */
    Docs generation(String id) {
        version = 2;
        generation = id;
        return this;
    }

    Docs version(int v) {
        version = v;
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
            String where = heavySplits.get(i) == null ? "\"partition\":" + heavyPartitions.get(i)
                    : "\"split\":" + heavySplits.get(i);
            h.add("{\"key_b64\":\"" + Base64.getEncoder().encodeToString(heavyKeys.get(i)) + "\"," + where
                    + ",\"weight\":" + (1000 - i) + "}");
        }
        String tableMembers = "\"table\":" + t;
        if (compactTable) {
            int width = partitions <= 0x100 ? 1 : partitions <= 0x10000 ? 2 : 4;
            tableMembers = "\"table_b64\":\"" + Base64.getEncoder().encodeToString(packTable(table, width))
                    + "\",\"table_width\":" + width;
        }
        String load = predictedLoad;
        if (load == null) {
            StringJoiner l = new StringJoiner(",", "[", "]");
            for (int i = 0; i < partitions; i++) {
                l.add("0.5");
            }
            load = l.toString();
        }
        return "{\"format\":\"dkg.assignment\",\"version\":" + version
                + (generation == null ? "" : ",\"generation\":\"" + generation + "\"") + ",\"topic\":\"" + topic
                + "\",\"partitions\":" + partitions + ",\"epoch\":" + Long.toUnsignedString(epoch)
                + ",\"bucket_hash\":{\"function\":\"murmur2\",\"seed\":" + Integer.toUnsignedString(seed)
                + "},\"buckets\":" + table.length + "," + tableMembers + ",\"heavy\":" + h + ",\"params\":" + params
                + ",\"created_at_ms\":" + createdAtMs + ",\"predicted_load\":" + load + "}";
    }

    /** Table entries as little-endian unsigned integers of {@code width} bytes (spec 4.6). */
    static byte[] packTable(int[] table, int width) {
        byte[] out = new byte[table.length * width];
        for (int i = 0; i < table.length; i++) {
            for (int j = 0; j < width; j++) {
                out[i * width + j] = (byte) (table[i] >>> (8 * j));
            }
        }
        return out;
    }

    /** A version 2 retraction document. */
    static String retraction(String topic, long epoch, String generation) {
        return "{\"format\":\"dkg.assignment\",\"version\":2,\"kind\":\"retraction\",\"topic\":\"" + topic
                + "\",\"epoch\":" + Long.toUnsignedString(epoch)
                + (generation == null ? "" : ",\"generation\":\"" + generation + "\"")
                + ",\"created_at_ms\":1700000000000}";
    }

    /** A version 2 generation record's value. */
    static String generationRecord(String id) {
        return "{\"format\":\"dkg.assignment\",\"version\":2,\"kind\":\"generation\",\"generation\":\"" + id
                + "\"}";
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

package dev.dkg.kafka;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.stream.Collectors;

/**
 * A validated DKG assignment (document format {@code dkg.assignment}, version 1 or 2) and its O(1) lookup;
 * immutable but for the per-key record counters of split heavy keys (version 2, see "Split keys" below).
 *
 * <p>DKG (Rivetti et al., "Efficient Key Grouping for Near-Optimal Load Balancing in Stream Processing Systems",
 * DEBS 2015) places a key at {@code heavy[key]} if it is a heavy hitter, else at {@code table[bucket(key)]} with
 * {@code bucket(key) = toPositive(murmur2(key, seed)) % buckets}. A key is heavy only if all its bytes equal a
 * heavy key's. Reference: {@code crates/dkg-core/src/assignment/} ({@code Assignment::from_json},
 * {@code Assignment::new}, {@code Assignment::route}) and {@code docs/spec.md}; this class must accept, reject and
 * route exactly as they do (the golden vectors under {@code spec/vectors} check it).
 *
 * <p>Decoding ({@link #fromJson}) checks, in this order: size (over {@link #MAX_ASSIGNMENT_BYTES}:
 * {@code oversize}), JSON shape ({@code malformed_json}, see {@link StrictJson}), format name
 * ({@code malformed_json}), version ({@code unsupported_version}), {@code buckets} against the table length
 * ({@code invalid}), heavy-key base64 ({@code invalid}), then the invariants of {@code Assignment::new}: topic name,
 * partition count ({@code invalid} if 0, {@code oversize} over {@link #MAX_PARTITIONS}), bucket count, table and
 * heavy partitions in range ({@code out_of_range}), heavy-key count and sizes ({@code oversize}), predicted load,
 * parameters, then bucket by bucket at most {@link #MAX_HEAVY_KEYS_PER_BUCKET} heavy keys and no duplicate
 * ({@code invalid}). Version 2 ({@code docs/spec.md} 4.6 and 11): a compact table is decoded (and its width and
 * length checked, {@code invalid}) where the JSON table's length is; a split entry's parts are checked after its
 * key length (count, then part by part range, duplicate and weight, then the weight sum); limits inside a version 2
 * document are {@code invalid}, not {@code oversize}; {@link #decode} also returns the other kinds of value
 * ({@link ControlValue}).
 *
 * <h2>Lookup</h2>
 *
 * The design of the Rust {@code Lookup} ({@code crates/dkg-core/src/assignment/lookup.rs}): one 32-bit hash
 * {@code h} serves both routes, the bucket {@code toPositive(h) % buckets} is computed by multiplication (Lemire,
 * Kaser, Kurz, "Faster remainder by direct computation", 2019), and an index answers "heavy partition or bucket
 * partition" without branching on which it is (heavy and light keys interleave at random in a skewed stream, and a
 * mispredicted branch costs about as much as the whole lookup). Each bucket's slot names a 64-byte group: the
 * bucket's single heavy key (first and last 8 bytes, length, arena offset) and the two answers; a bucket without a
 * heavy key names a group whose key cannot match. The key is compared with the group's key by OR of XORs and the
 * outcome selects the answer by a shift. Buckets with several heavy keys (rare) name a run, past the groups,
 * matched by hash, length and bytes: at most {@link #MAX_HEAVY_KEYS_PER_BUCKET} compares, whatever the keys. The
 * branches left depend only on the key's length (which a topic's keys tend to share) and on the bucket being a run.
 *
 * <h2>Split keys (version 2, {@code docs/spec.md} section 4.6)</h2>
 *
 * A split heavy key spreads its records over 2 to {@value #MAX_SPLIT_PARTS} partitions in proportion to integer
 * weights. Its lookup answer is {@code -1 - (SPLIT_BASE + s)} ({@code s}: its index among the split keys), a
 * "heavy partition" no topic has, so the non-split path is unchanged and the caller's range check (which it does
 * anyway) is the only branch that sees split keys. Each split key has a precomputed schedule, the smooth weighted
 * round robin sequence of its weights (period = their sum, at most {@value #MAX_SPLIT_WEIGHT_SUM}; shared by keys
 * with equal weights), and an atomic counter: its record {@code n} (counted per instance, from 0) goes to
 * {@code schedule[n % period]}.
 */
public final class Assignment implements ControlValue {
    /** The {@code format} field of every assignment document. */
    public static final String FORMAT_NAME = "dkg.assignment";
    /** The document version of documents that use no version 2 member. */
    public static final long FORMAT_VERSION = 1;
    /** The newest document version this build reads (spec section 11). */
    public static final long MAX_FORMAT_VERSION = 2;
    /** Most parts one split key may have (spec 4.6). */
    public static final int MAX_SPLIT_PARTS = 64;
    /** Largest sum of one split key's part weights: the period of its schedule (spec 4.6). */
    public static final int MAX_SPLIT_WEIGHT_SUM = 4096;
    /**
     * Largest sum, over all split keys of one document, of their weight sums (spec 4.6): bounds the schedules a hostile
     * document can make the lookup allocate (one byte per unit of weight).
     */
    public static final long MAX_SPLIT_WEIGHT_TOTAL = 1L << 20;
    /** Largest encoded document accepted (checked before parsing). */
    public static final int MAX_ASSIGNMENT_BYTES = 8 * 1024 * 1024;
    /** Largest partition count accepted. */
    public static final int MAX_PARTITIONS = 1_000_000;
    /** Largest bucket count accepted. */
    public static final int MAX_BUCKETS = 1 << 22;
    /** Largest epoch accepted, 2^53 - 1 (spec 4.4 step 11b: exact in a double gauge and in every JSON decoder). */
    public static final long MAX_EPOCH = (1L << 53) - 1;
    /** Largest number of heavy keys accepted. */
    public static final int MAX_HEAVY_KEYS = 1_000_000;
    /**
     * Most heavy keys one bucket may hold (spec 4.4 step 18): a bucket's heavy keys are matched by a scan, which
     * keys chosen to collide in murmur2 must not make long.
     */
    public static final int MAX_HEAVY_KEYS_PER_BUCKET = 16;
    /** Longest heavy key accepted, in bytes. */
    public static final int MAX_KEY_BYTES = 64 * 1024;
    /** Largest total size of all heavy keys, in bytes. */
    public static final long MAX_HEAVY_KEY_BYTES_TOTAL = 256L * 1024 * 1024;
    /** Longest legal Kafka topic name. */
    public static final int MAX_TOPIC_LEN = 249;

    private static final VarHandle LONG_LE = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
    private static final VarHandle INT_LE = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);
    /** Longs per lookup group (64 bytes: one cache line). */
    private static final int GROUP_LONGS = 8;
    /** Key words a group holds ({@link #keyWords}). */
    private static final int KEY_WORDS = 5;
    /** Longest key compared from the group's words alone; longer ones also read the arena. */
    private static final int INLINE_KEY_BYTES = 40;
    /** The length of a group without a heavy key: no key has it. */
    private static final int LIGHT = -1;
    /** Zero bytes after the arena; also the longest key compared without a branch on its bytes. */
    private static final int ARENA_PAD = 64;
    /**
     * Split key {@code s}'s lookup answer is {@code -1 - (SPLIT_BASE + s)}: above every partition (at most
     * {@link #MAX_PARTITIONS}) and every split index (at most {@link #MAX_HEAVY_KEYS}), so it decodes to no partition.
     */
    static final int SPLIT_BASE = 1 << 30;
    /** Longs between two split keys' counters (128 bytes: threads counting different keys share no cache line). */
    private static final int COUNTER_STRIDE = 16;

    private final String topic;
    private final int partitions;
    private final long epoch;
    private final int seed;
    private final int[] table;
    private final byte[][] heavyKeys;
    private final int[] heavyPartitions;
    private final long[] heavyWeights;
    private final double theta;
    private final double epsilon;
    private final double mu;
    private final long windowRecords;
    private final long createdAtMs;
    private final double[] predictedLoad;
    /** The {@code generation} member (version 2), or null. */
    private final String generation;
    /** Per heavy key: null for a whole key, else its parts' partitions and weights (document order). */
    private final int[][] splitPartitionsOf;
    private final int[][] splitWeightsOf;

    /** Per split key (in document order): its parts' partitions, and its schedule as part indices. */
    private final int[][] splitParts;
    private final byte[][] splitOrder;
    /** Split key {@code s}'s records so far at {@code s * COUNTER_STRIDE}. */
    private final AtomicLongArray splitCounters;

    // The lookup index (see "Lookup" in the class comment), built from the document by the constructor.
    /** Bucket to group index, or {@code groupCount + r} for a bucket whose heavy keys are run {@code r}. */
    private final int[] slots;
    /**
     * {@value #GROUP_LONGS} longs per group: at 0-4 the key's words ({@link #keyWords}), at 5 its arena offset
     * (high half) and length (low half, {@link #LIGHT} for a group without a key), at 6 the two answers, the heavy
     * key's as {@code -1 - partition} (low half) and the bucket's partition (high half); 7 is padding.
     */
    private final long[] groups;
    private final int groupCount;
    /** Buckets of several heavy keys: run {@code r} is entries {@code [runStart[r], runStart[r + 1])}. */
    private final int[] runStart;
    /** Per run entry: the key's bucket hash, length, arena offset and partition. */
    private final int[] runHash;
    private final int[] runLen;
    private final int[] runOffset;
    private final int[] runPartition;
    /** All heavy keys back to back, then {@value #ARENA_PAD} zero bytes (see {@link #middleDiff}). */
    private final byte[] arena;
    /** {@code buckets()} and Lemire's multiplier for it: {@code x % buckets} without a division. */
    private final int divisor;
    private final long multiplier;

    Assignment(StrictJson.Document d, byte[][] keys) throws AssignmentException {
        validateTopic(d.topic);
        if (d.partitions == 0) {
            throw invalid("partitions must be at least 1");
        }
        long partitions = d.partitions & 0xffff_ffffL;
        if (partitions > MAX_PARTITIONS) {
            throw tooLarge(d, "partitions", partitions, MAX_PARTITIONS);
        }
        int[] table = d.table;
        if (table.length == 0) {
            throw invalid("the bucket table must have at least 1 bucket");
        }
        if (table.length > MAX_BUCKETS) {
            throw tooLarge(d, "buckets", table.length, MAX_BUCKETS);
        }
        checkEpoch(d.epoch);
        for (int p : table) {
            if (Integer.compareUnsigned(p, d.partitions) >= 0) {
                throw outOfRange(d.topic, p, d.partitions);
            }
        }
        StrictJson.HeavyIn[] heavy = d.heavy;
        if (heavy.length > MAX_HEAVY_KEYS) {
            throw tooLarge(d, "heavy keys", heavy.length, MAX_HEAVY_KEYS);
        }
        long keyBytes = 0;
        int[] heavyPartitions = new int[heavy.length];
        long[] heavyWeights = new long[heavy.length];
        int[][] splitPartitionsOf = new int[heavy.length][];
        int[][] splitWeightsOf = new int[heavy.length][];
        // The lookup's heavy answer: the key's partition, or SPLIT_BASE + its index among the split keys.
        int[] heavyAnswers = new int[heavy.length];
        int splitCount = 0;
        long splitWeight = 0;
        for (int i = 0; i < heavy.length; i++) {
            if (keys[i].length > MAX_KEY_BYTES) {
                throw tooLarge(d, "heavy key bytes", keys[i].length, MAX_KEY_BYTES);
            }
            StrictJson.HeavyIn h = heavy[i];
            if (h.splitPartitions == null && Integer.compareUnsigned(h.partition, d.partitions) >= 0) {
                throw outOfRange(d.topic, h.partition, d.partitions);
            }
            heavyPartitions[i] = h.partition;
            heavyAnswers[i] = h.partition;
            if (h.splitPartitions != null) {
                int[] parts = h.splitPartitions;
                int[] weights = h.splitWeights;
                AssignmentJson.validateSplit(d, parts, weights);
                splitPartitionsOf[i] = parts;
                splitWeightsOf[i] = weights;
                for (int w : weights) {
                    splitWeight += w & 0xffff_ffffL;
                }
                heavyPartitions[i] = parts[0];
                heavyAnswers[i] = SPLIT_BASE + splitCount++;
            }
            heavyWeights[i] = h.weight;
            keyBytes += keys[i].length;
        }
        if (keyBytes > MAX_HEAVY_KEY_BYTES_TOTAL) {
            throw tooLarge(d, "total heavy key bytes", keyBytes, MAX_HEAVY_KEY_BYTES_TOTAL);
        }
        if (splitWeight > MAX_SPLIT_WEIGHT_TOTAL) {
            throw tooLarge(d, "total split weight", splitWeight, MAX_SPLIT_WEIGHT_TOTAL);
        }
        double[] load = d.predictedLoad;
        if (load.length != partitions) {
            throw invalid("predicted_load has " + load.length + " entries, expected one per partition ("
                    + partitions + ")");
        }
        for (int i = 0; i < load.length; i++) {
            if (!(Double.isFinite(load[i]) && load[i] >= 0.0)) {
                throw invalid("predicted_load[" + i + "] = " + load[i] + " is not a finite non-negative share");
            }
        }
        String[] names = {"theta", "epsilon", "mu"};
        double[] values = {d.theta, d.epsilon, d.mu};
        for (int i = 0; i < names.length; i++) {
            if (!(Double.isFinite(values[i]) && values[i] >= 0.0)) {
                throw invalid("params." + names[i] + " = " + values[i] + " is not a finite non-negative number");
            }
        }
        this.topic = d.topic;
        this.partitions = d.partitions;
        this.epoch = d.epoch;
        this.seed = d.bucketSeed;
        this.table = table;
        this.heavyKeys = keys;
        this.heavyPartitions = heavyPartitions;
        this.heavyWeights = heavyWeights;
        this.theta = d.theta;
        this.epsilon = d.epsilon;
        this.mu = d.mu;
        this.windowRecords = d.windowRecords;
        this.createdAtMs = d.createdAtMs;
        this.predictedLoad = load;
        this.generation = d.generation;
        this.splitPartitionsOf = splitPartitionsOf;
        this.splitWeightsOf = splitWeightsOf;
        this.splitParts = new int[splitCount][];
        this.splitOrder = new byte[splitCount][];
        this.splitCounters = new AtomicLongArray(splitCount * COUNTER_STRIDE);
        Map<List<Integer>, byte[]> schedules = new HashMap<>();
        for (int i = 0, s = 0; i < heavy.length; i++) {
            if (splitWeightsOf[i] != null) {
                int[] w = splitWeightsOf[i];
                splitParts[s] = splitPartitionsOf[i];
                // Keys with equal weights share a schedule (a hot topic's split keys tend to: 1:1, 2:1, ...).
                splitOrder[s++] = schedules.computeIfAbsent(Arrays.stream(w).boxed().collect(Collectors.toList()), k -> schedule(w));
            }
        }

        int buckets = table.length;
        int n = keys.length;
        this.divisor = buckets;
        // Lemire, Kaser, Kurz: ceil(2^64 / d), wrapping to 0 for d = 1 (then every remainder is 0, still exact).
        this.multiplier = Long.divideUnsigned(-1L, buckets) + 1;
        int[] hashes = new int[n];
        int[] bucketOf = new int[n];
        int[] start = new int[buckets + 1];
        int[] offset = new int[n];
        int arenaBytes = 0;
        for (int i = 0; i < n; i++) {
            hashes[i] = Murmur2.hash(keys[i], seed);
            bucketOf[i] = Murmur2.toPositive(hashes[i]) % buckets;
            start[bucketOf[i] + 1]++;
            offset[i] = arenaBytes;
            // Fits: total key bytes <= MAX_HEAVY_KEY_BYTES_TOTAL (checked above) < 2^31 - ARENA_PAD.
            arenaBytes += keys[i].length;
        }
        for (int b = 0; b < buckets; b++) {
            start[b + 1] += start[b];
        }
        int[] sortedRef = new int[n];
        int[] next = Arrays.copyOf(start, buckets);
        for (int i = 0; i < n; i++) {
            sortedRef[next[bucketOf[i]]++] = i;
        }
        // Bucket by bucket, as the Rust decoder: the bound, then duplicates (equal keys share a bucket).
        for (int b = 0; b < buckets; b++) {
            int from = start[b];
            int to = start[b + 1];
            if (to - from > MAX_HEAVY_KEYS_PER_BUCKET) {
                throw invalid("bucket " + b + " holds " + (to - from) + " heavy keys, at most "
                        + MAX_HEAVY_KEYS_PER_BUCKET + " are allowed");
            }
            for (int x = from + 1; x < to; x++) {
                for (int y = from; y < x; y++) {
                    int kx = sortedRef[x];
                    int ky = sortedRef[y];
                    if (hashes[kx] == hashes[ky] && Arrays.equals(keys[kx], keys[ky])) {
                        throw invalid("heavy key listed twice (base64 "
                                + display(Base64.getEncoder().encodeToString(keys[kx])) + ")");
                    }
                }
            }
        }
        byte[] arena = new byte[arenaBytes + ARENA_PAD];
        for (int i = 0; i < n; i++) {
            System.arraycopy(keys[i], 0, arena, offset[i], keys[i].length);
        }
        this.arena = arena;

        // Groups: one per bucket with exactly one heavy key; every other key-less bucket names a group with its
        // partition (another bucket's heavy-key group, whose key hashes elsewhere and so never matches, or one made
        // for the partition). Sharing keeps the groups few and the index small in the cache.
        int[] slots = new int[buckets];
        Arrays.fill(slots, -1);
        int[] partitionGroup = new int[d.partitions];
        Arrays.fill(partitionGroup, -1);
        long[] groups = new long[GROUP_LONGS * Math.min(buckets, n + d.partitions)];
        int groupCount = 0;
        int runs = 0;
        int runEntries = 0;
        for (int b = 0; b < buckets; b++) {
            int count = start[b + 1] - start[b];
            if (count == 1) {
                int i = sortedRef[start[b]];
                slots[b] = groupCount;
                if (partitionGroup[table[b]] < 0) {
                    partitionGroup[table[b]] = groupCount;
                }
                setGroup(groups, groupCount++, keyWords(keys[i], keys[i].length), offset[i], keys[i].length,
                        -1 - heavyAnswers[i], table[b]);
            } else if (count > 1) {
                runs++;
                runEntries += count;
            }
        }
        for (int b = 0; b < buckets; b++) {
            if (slots[b] < 0 && start[b + 1] == start[b]) {
                int p = table[b];
                if (partitionGroup[p] < 0) {
                    partitionGroup[p] = groupCount;
                    setGroup(groups, groupCount++, new long[KEY_WORDS], 0, LIGHT, p, p);
                }
                slots[b] = partitionGroup[p];
            }
        }
        // Buckets of several heavy keys (about heavy^2 / (2 * buckets) of them): slots past the groups, so the
        // bounds check on the group index is the branch to the run, matched by hash, length and bytes.
        this.runStart = new int[runs + 1];
        this.runHash = new int[runEntries];
        this.runLen = new int[runEntries];
        this.runOffset = new int[runEntries];
        this.runPartition = new int[runEntries];
        int r = 0;
        int e = 0;
        for (int b = 0; b < buckets; b++) {
            if (start[b + 1] - start[b] > 1) {
                slots[b] = groupCount + r;
                runStart[r++] = e;
                for (int at = start[b]; at < start[b + 1]; at++) {
                    int i = sortedRef[at];
                    runHash[e] = hashes[i];
                    runLen[e] = keys[i].length;
                    runOffset[e] = offset[i];
                    runPartition[e] = heavyAnswers[i];
                    e++;
                }
            }
        }
        runStart[r] = e;
        this.slots = slots;
        this.groups = Arrays.copyOf(groups, GROUP_LONGS * groupCount);
        this.groupCount = groupCount;
    }

    /** Group {@code g}: {@code words} ({@link #keyWords}) and the rest as the {@link #groups} comment says. */
    private static void setGroup(long[] groups, int g, long[] words, int offset, int len, int heavyAnswer,
            int bucketPartition) {
        int at = g * GROUP_LONGS;
        System.arraycopy(words, 0, groups, at, KEY_WORDS);
        groups[at + 5] = ((long) offset << 32) | (len & 0xffff_ffffL);
        groups[at + 6] = ((long) bucketPartition << 32) | (heavyAnswer & 0xffff_ffffL);
    }

    /**
     * Decodes and validates an assignment document (see the class comment for the checks and their order).
     *
     * @throws AssignmentException with the {@link RejectReason} the Rust decoder reports for the same bytes; a
     *     valid version 2 document of another kind (a retraction or generation record) is {@code invalid} here
     */
    public static Assignment fromJson(byte[] bytes) throws AssignmentException {
        ControlValue v = decode(bytes);
        if (v instanceof Assignment) {
            return (Assignment) v;
        }
        throw invalid("a " + v.kind() + " document, not an assignment");
    }

    /**
     * Decodes and validates a control-topic value of any kind: an assignment (version 1 or 2), a retraction or a
     * generation record (version 2); the decoder is {@link AssignmentJson#decode}.
     */
    static ControlValue decode(byte[] bytes) throws AssignmentException {
        return AssignmentJson.decode(bytes);
    }

    /**
     * Smooth weighted round robin over {@code weights} for one period (their sum), as part indices: per pick, every
     * part's credit grows by its weight, the part with the most credit (ties: the first) is picked and pays the sum.
     * Each part {@code i} is picked exactly {@code weights[i]} times per period, evenly spread (3:1 gives
     * {@code 0 0 1 0}).
     */
    static byte[] schedule(int[] weights) {
        int sum = 0;
        for (int w : weights) {
            sum += w;
        }
        long[] credit = new long[weights.length];
        byte[] order = new byte[sum];
        for (int n = 0; n < sum; n++) {
            int best = 0;
            for (int i = 0; i < weights.length; i++) {
                credit[i] += weights[i];
                if (credit[i] > credit[best]) {
                    best = i;
                }
            }
            credit[best] -= sum;
            order[n] = (byte) best;
        }
        return order;
    }


    // ------------------------------------------------------------------------------------------------------------
    // Lookup.

    /**
     * The partition for {@code key}: O(1), allocation-free, never throws, always in {@code [0, partitions())}. For
     * a split key each call counts one record of the key and answers its schedule's next partition.
     */
    public int partitionFor(byte[] key) {
        int r = lookup(key);
        int p = r ^ (r >> 31);
        return p < SPLIT_BASE ? p : splitPartition(p);
    }

    /**
     * Which route {@link #partitionFor} takes for {@code key}: {@link Route#HEAVY}, {@link Route#SPLIT} or
     * {@link Route#BUCKET} (counts nothing).
     */
    public Route route(byte[] key) {
        int r = lookup(key);
        return r >= 0 ? Route.BUCKET : -1 - r >= SPLIT_BASE ? Route.SPLIT : Route.HEAVY;
    }

    /**
     * The next partition of split key {@code SPLIT_BASE + s} (a decoded lookup answer {@code >= SPLIT_BASE}): record
     * {@code n} of the key (an atomic count per instance) goes to {@code schedule[n % period]}. Never blocks (one
     * atomic increment), never throws for an answer of {@link #lookup}.
     */
    int splitPartition(int answer) {
        int s = answer - SPLIT_BASE;
        long n = splitCounters.getAndIncrement(s * COUNTER_STRIDE);
        byte[] order = splitOrder[s];
        return splitParts[s][order[(int) Long.remainderUnsigned(n, order.length)]];
    }

    /** Whether {@code partition} is one of split key {@code SPLIT_BASE + s}'s parts (no counter is touched). */
    boolean splitHasPart(int answer, int partition) {
        for (int q : splitParts[answer - SPLIT_BASE]) {
            if (q == partition) {
                return true;
            }
        }
        return false;
    }

    /**
     * The partitions of {@code key}'s parts if it is a split heavy key (document order, a copy), else null. Counts
     * nothing (the consumer asks where a key lives without spreading it).
     */
    public int[] splitPartsOf(byte[] key) {
        int r = lookup(key);
        int p = r ^ (r >> 31);
        return p < SPLIT_BASE ? null : splitParts[p - SPLIT_BASE].clone();
    }

    /** The bucket of {@code key} (heavy or not): {@code toPositive(murmur2(key, seed)) % buckets()}. */
    public int bucket(byte[] key) {
        return Murmur2.toPositive(Murmur2.hash(key, seed)) % table.length;
    }

    /**
     * The partition, as {@code p} for the bucket route and {@code -1 - p} for a heavy key (one hash, no allocation,
     * no branch on which of the two it is; see "Lookup" in the class comment); for a split key {@code p} is
     * {@code SPLIT_BASE + s}, for {@link #splitPartition}.
     */
    int lookup(byte[] key) {
        int len = key.length;
        if (len >= 4 && len < 8) {
            return lookup4To7(key, len);
        }
        int h = Murmur2.hash(key, seed);
        int g = slots[bucketOf(h)];
        if (g >= groupCount) {
            return runLookup(g - groupCount, h, key);
        }
        long[] gs = groups;
        int at = g * GROUP_LONGS;
        long ref = gs[at + 5];
        long diff;
        if (len >= 8) {
            diff = ((long) LONG_LE.get(key, 0) ^ gs[at]) | ((long) LONG_LE.get(key, len - 8) ^ gs[at + 1]);
            if (len > 16) {
                if (len <= INLINE_KEY_BYTES) {
                    diff |= ((long) LONG_LE.get(key, 8) ^ gs[at + 2])
                            | ((long) LONG_LE.get(key, Math.min(16, len - 16)) ^ gs[at + 3])
                            | ((long) LONG_LE.get(key, len - 16) ^ gs[at + 4]);
                } else {
                    diff |= middleDiff(key, len, (int) (ref >>> 32), (int) ref);
                }
            }
        } else {
            // A short heavy key's other words are 0, and a longer one differs in length.
            diff = shortWord(key, len) ^ gs[at];
        }
        diff |= len ^ (int) ref;
        // 0 if the key is the group's heavy key, else 1: selects the low (heavy) or high (bucket) answer.
        int differs = (int) ((diff | -diff) >>> 63);
        return (int) (gs[at + 6] >>> (differs << 5));
    }

    /**
     * {@link #lookup} for keys of 4 to 7 bytes: their first and last 4 bytes are read once and serve both the hash
     * and the compare ({@link #shortWord}'s word), with no loop; about 2.7 ns less than the general path at 6 bytes.
     */
    private int lookup4To7(byte[] key, int len) {
        int first = (int) INT_LE.get(key, 0);
        int last = (int) INT_LE.get(key, len - 4);
        int h = Murmur2.hash4To7(seed, len, first, last);
        int g = slots[bucketOf(h)];
        if (g >= groupCount) {
            return runLookup(g - groupCount, h, key);
        }
        long[] gs = groups;
        int at = g * GROUP_LONGS;
        long diff = (((first & 0xffff_ffffL) | ((long) last << 32)) ^ gs[at]) | (len ^ (int) gs[at + 5]);
        int differs = (int) ((diff | -diff) >>> 63);
        return (int) (gs[at + 6] >>> (differs << 5));
    }

    /** {@code toPositive(h) % buckets()} by multiplication (Lemire's fastmod; exact for every 32-bit input). */
    private int bucketOf(int h) {
        long low = multiplier * (h & 0x7fff_ffffL);
        // The unsigned high half of low * divisor (Math.multiplyHigh is signed; divisor > 0).
        return (int) (Math.multiplyHigh(low, divisor) + ((low >> 63) & divisor));
    }

    /**
     * For keys over {@value #INLINE_KEY_BYTES} bytes: non-zero if the bytes of {@code key} between its first and
     * last 8 differ from the group key's at {@code offset} (whose length is {@code groupLen}; only an equal length
     * can match). Up to 64 bytes: 8 at a
     * time, the last 8 overlapping, OR of XORs, no branch on the bytes (the arena's padding keeps the reads in
     * bounds whatever the group); longer keys are compared only if everything else matched.
     */
    private long middleDiff(byte[] key, int len, int offset, int groupLen) {
        if (len <= ARENA_PAD) {
            long diff = 0;
            for (int o = 8; o < len - 8; o += 8) {
                int q = Math.min(o, len - 16);
                diff |= (long) LONG_LE.get(key, q) ^ (long) LONG_LE.get(arena, offset + q);
            }
            return diff;
        }
        return groupLen == len && Arrays.equals(key, 8, len - 8, arena, offset + 8, offset + len - 8) ? 0 : 1;
    }

    /** A bucket of several heavy keys: an exact match in its run, else the bucket's partition. */
    private int runLookup(int r, int h, byte[] key) {
        int len = key.length;
        for (int e = runStart[r], end = runStart[r + 1]; e < end; e++) {
            if (runHash[e] == h && runLen[e] == len
                    && Arrays.equals(key, 0, len, arena, runOffset[e], runOffset[e] + len)) {
                return -1 - runPartition[e];
            }
        }
        return table[bucketOf(h)];
    }

    /**
     * The words of a key the lookup compares inline, little-endian: its first and last 8 bytes and, for 17 to
     * {@value #INLINE_KEY_BYTES} bytes, the 8 at offsets 8, {@code min(16, len - 16)} and {@code len - 16}
     * (overlapping, so with the length they are the whole key); for keys under 8 bytes, {@link #shortWord}. Words a
     * key's length does not use are 0. Only the lookup reads them: the Rust {@code key_words} differs for 4 to 7
     * bytes, which changes no placement.
     */
    private static long[] keyWords(byte[] key, int len) {
        long[] w = new long[KEY_WORDS];
        if (len < 8) {
            w[0] = shortWord(key, len);
            return w;
        }
        w[0] = (long) LONG_LE.get(key, 0);
        w[1] = (long) LONG_LE.get(key, len - 8);
        if (len > 16 && len <= INLINE_KEY_BYTES) {
            w[2] = (long) LONG_LE.get(key, 8);
            w[3] = (long) LONG_LE.get(key, Math.min(16, len - 16));
            w[4] = (long) LONG_LE.get(key, len - 16);
        }
        return w;
    }

    /**
     * A key of under 8 bytes as one word: 4 to 7 bytes as its first and last 4 (overlapping loads; with the length
     * they are the whole key), shorter ones zero-padded, little-endian.
     */
    private static long shortWord(byte[] key, int len) {
        if (len >= 4) {
            return ((int) INT_LE.get(key, 0) & 0xffff_ffffL) | ((long) (int) INT_LE.get(key, len - 4) << 32);
        }
        long word = 0;
        for (int i = len - 1; i >= 0; i--) {
            word = (word << 8) | (key[i] & 0xff);
        }
        return word;
    }

    // ------------------------------------------------------------------------------------------------------------
    // Document fields.

    /** The data topic. */
    public String topic() {
        return topic;
    }

    /** The partition count the assignment was made for. */
    public int partitions() {
        return partitions;
    }

    /** The epoch (an unsigned 64-bit number; compare with {@link Long#compareUnsigned}). */
    public long epoch() {
        return epoch;
    }

    /** The bucket hash seed ({@code bucket_hash.seed}, 32 bits). */
    public int bucketSeed() {
        return seed;
    }

    /** The bucket count. */
    public int buckets() {
        return table.length;
    }

    /** Bucket to partition (a copy). */
    public int[] table() {
        return table.clone();
    }

    /** Number of heavy keys. */
    public int heavyCount() {
        return heavyKeys.length;
    }

    /** Heavy key {@code i} in document order (a copy). */
    public byte[] heavyKey(int i) {
        return heavyKeys[i].clone();
    }

    /** The partition of heavy key {@code i} (of a split key: its first part's). */
    public int heavyPartition(int i) {
        return heavyPartitions[i];
    }

    /** Whether heavy key {@code i} is split over several partitions (version 2). */
    public boolean isSplit(int i) {
        return splitPartitionsOf[i] != null;
    }

    /** The partitions of split heavy key {@code i}'s parts, in document order (a copy; empty for a whole key). */
    public int[] splitPartitions(int i) {
        return splitPartitionsOf[i] == null ? new int[0] : splitPartitionsOf[i].clone();
    }

    /** The weights of split heavy key {@code i}'s parts, in document order (a copy; empty for a whole key). */
    public int[] splitWeights(int i) {
        return splitWeightsOf[i] == null ? new int[0] : splitWeightsOf[i].clone();
    }

    /**
     * One period of split heavy key {@code i}'s schedule as partitions (a new array; empty for a whole key): its
     * record {@code n} goes to entry {@code n % length}.
     */
    public int[] splitSchedule(int i) {
        if (splitWeightsOf[i] == null) {
            return new int[0];
        }
        byte[] order = schedule(splitWeightsOf[i]);
        int[] out = new int[order.length];
        for (int n = 0; n < order.length; n++) {
            out[n] = splitPartitionsOf[i][order[n]];
        }
        return out;
    }

    /** The {@code generation} member (version 2 documents), or null. */
    public String generation() {
        return generation;
    }

    /** {@code "assignment"}. */
    @Override
    public String kind() {
        return StrictJson.KIND_ASSIGNMENT;
    }

    /** The weight of heavy key {@code i} (unsigned 64-bit). */
    public long heavyWeight(int i) {
        return heavyWeights[i];
    }

    /** {@code params.theta}. */
    public double theta() {
        return theta;
    }

    /** {@code params.epsilon}. */
    public double epsilon() {
        return epsilon;
    }

    /** {@code params.mu}. */
    public double mu() {
        return mu;
    }

    /** {@code params.window_records} (unsigned 64-bit). */
    public long windowRecords() {
        return windowRecords;
    }

    /** Creation time, unix milliseconds, as the publisher's clock read it (unsigned 64-bit). */
    public long createdAtMs() {
        return createdAtMs;
    }

    /** Predicted share of records per partition (a copy). */
    public double[] predictedLoad() {
        return predictedLoad.clone();
    }

    /**
     * Equality of the document fields (as the Rust {@code PartialEq}: floats compare with {@code ==}, so
     * {@code 0.0} equals {@code -0.0}). An identical re-publication under the current epoch is a no-op; any other
     * document under it is an {@code epoch_conflict}.
     */
    @Override
    public boolean equals(Object o) {
        if (this == o) {
            return true;
        }
        if (!(o instanceof Assignment)) {
            return false;
        }
        Assignment a = (Assignment) o;
        if (!(topic.equals(a.topic) && partitions == a.partitions && epoch == a.epoch && seed == a.seed
                && Arrays.equals(table, a.table) && heavyKeys.length == a.heavyKeys.length
                && Arrays.equals(heavyPartitions, a.heavyPartitions) && Arrays.equals(heavyWeights, a.heavyWeights)
                && theta == a.theta && epsilon == a.epsilon && mu == a.mu && windowRecords == a.windowRecords
                && createdAtMs == a.createdAtMs && predictedLoad.length == a.predictedLoad.length
                && Objects.equals(generation, a.generation))) {
            return false;
        }
        for (int i = 0; i < heavyKeys.length; i++) {
            if (!(Arrays.equals(heavyKeys[i], a.heavyKeys[i])
                    && Arrays.equals(splitPartitionsOf[i], a.splitPartitionsOf[i])
                    && Arrays.equals(splitWeightsOf[i], a.splitWeightsOf[i]))) {
                return false;
            }
        }
        for (int i = 0; i < predictedLoad.length; i++) {
            if (predictedLoad[i] != a.predictedLoad[i]) {
                return false;
            }
        }
        return true;
    }

    @Override
    public int hashCode() {
        // Consistent with equals: no float field (0.0 and -0.0 are equal but hash differently).
        int h = topic.hashCode();
        h = 31 * h + partitions;
        h = 31 * h + Long.hashCode(epoch);
        h = 31 * h + seed;
        h = 31 * h + Arrays.hashCode(table);
        h = 31 * h + Arrays.hashCode(heavyPartitions);
        return h;
    }

    @Override
    public String toString() {
        return "Assignment{topic=" + topic + ", partitions=" + partitions + ", epoch=" + Long.toUnsignedString(epoch)
                + ", buckets=" + table.length + ", heavy=" + heavyKeys.length + ", createdAtMs="
                + Long.toUnsignedString(createdAtMs) + "}";
    }

    // ------------------------------------------------------------------------------------------------------------
    // Validation helpers.

    /** Kafka's {@code Topic.validate}: 1 to 249 characters of {@code [a-zA-Z0-9._-]}, and not "." or "..". */
    static void validateTopic(String topic) throws AssignmentException {
        String why = null;
        if (topic.isEmpty()) {
            why = "empty";
        } else if (topic.getBytes(java.nio.charset.StandardCharsets.UTF_8).length > MAX_TOPIC_LEN) {
            why = "longer than 249 characters";
        } else if (topic.equals(".") || topic.equals("..")) {
            why = "'.' and '..' are reserved";
        } else {
            for (int i = 0; i < topic.length(); i++) {
                char c = topic.charAt(i);
                boolean ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.'
                        || c == '_' || c == '-';
                if (!ok) {
                    why = "only ASCII letters, digits, '.', '_' and '-' are allowed";
                    break;
                }
            }
        }
        if (why != null) {
            throw invalid("invalid topic name \"" + display(topic) + "\": " + why);
        }
    }

    static AssignmentException invalid(String what) {
        return new AssignmentException(RejectReason.INVALID, what);
    }

    static AssignmentException tooLarge(String what, long actual, long limit) {
        return tooLarge(RejectReason.OVERSIZE, what, actual, limit);
    }

    static AssignmentException tooLarge(RejectReason reason, String what, long actual, long limit) {
        return new AssignmentException(reason, "assignment too large: " + what + " is " + actual + ", limit " + limit);
    }

    /**
     * A limit inside the document: {@code oversize} in version 1 (spec gap G2), {@code invalid} in version 2
     * (spec 4.6: {@code oversize} is only the value's size there).
     */
    static AssignmentException tooLarge(StrictJson.Document d, String what, long actual, long limit) {
        RejectReason reason = d.version == FORMAT_VERSION ? RejectReason.OVERSIZE : RejectReason.INVALID;
        return tooLarge(reason, what, actual, limit);
    }

    /** Spec 4.4 step 11b: an epoch (unsigned) above {@value #MAX_EPOCH} is {@code out_of_range}. */
    static void checkEpoch(long epoch) throws AssignmentException {
        if (Long.compareUnsigned(epoch, MAX_EPOCH) > 0) {
            throw new AssignmentException(RejectReason.OUT_OF_RANGE, "epoch " + Long.toUnsignedString(epoch)
                    + " out of range (at most " + MAX_EPOCH + ")");
        }
    }

    static AssignmentException outOfRange(String topic, int partition, int partitions) {
        return new AssignmentException(RejectReason.OUT_OF_RANGE, "topic \"" + display(topic) + "\": partition "
                + Integer.toUnsignedString(partition) + " out of range (topic has " + partitions + " partitions)");
    }

    /** Errors echo strings from untrusted documents: keep them short. */
    static String display(String s) {
        return s.codePointCount(0, s.length()) <= 64 ? s : s.substring(0, s.offsetByCodePoints(0, 64)) + "...";
    }
}

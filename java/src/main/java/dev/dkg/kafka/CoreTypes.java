package dev.dkg.kafka;

import java.util.TreeMap;

/** The consumer core's limits and what it hands out: its decisions, commit snapshots, drained epochs, split changes. */
final class CoreTypes {
    private CoreTypes() {}

    /** The state machine's limits. */
    static final class Config {
        /** Held records per partition above which the partition is paused (C13). */
        final int maxHeld;
        /** A paused partition that released nothing for this long is resumed anyway (C13). */
        final long stallTimeoutNanos;
        /** Commit metadata size limit (the broker's {@code offset.metadata.max.bytes}). */
        final int maxMetadataBytes;
        /** Epochs of history kept. */
        final int history;
        /** A record of an epoch above every known one is released after this long if still unknown (C19). */
        final long unknownEpochWaitNanos;
        /** A lease read at wall-clock t counts as expiring at t + this at the latest (C2). */
        final long maxLeaseMs;

        Config(int maxHeld, long stallTimeoutNanos, int maxMetadataBytes, int history, long unknownEpochWaitNanos,
                long maxLeaseMs) {
            this.maxHeld = maxHeld;
            this.stallTimeoutNanos = stallTimeoutNanos;
            this.maxMetadataBytes = maxMetadataBytes;
            this.history = history;
            this.unknownEpochWaitNanos = unknownEpochWaitNanos;
            this.maxLeaseMs = maxLeaseMs;
        }
    }

    /** What {@link ConsumerCore#onRecord} decided. */
    enum Outcome {
        /** Hand it to the application now. */
        DELIVER,
        /** Held (or queued behind released records of its partition): comes out of {@link ConsumerCore#nextReady}. */
        HELD,
        /** Processed by a previous owner (C11, C12). */
        SKIPPED,
        /** A record of a partition not owned (raced with a revocation): dropped, the next owner reads it. */
        UNOWNED
    }

    /** {@link Snapshot#windowLeftOut} of a snapshot whose metadata keeps its window (or has none). */
    static final int NO_WINDOW_LEFT_OUT = -1;

    /** A commit to make (offset = lowest unprocessed, metadata) and, after it succeeds, the progress to announce. */
    static final class Snapshot extends Value {
        final int partition;
        final long offset;
        final String metadata;
        final long drained;
        final TreeMap<String, Long> passed;
        /**
         * {@link #NO_WINDOW_LEFT_OUT}, or the metadata leaves out its skip window ({@code n}, {@code u}) because it
         * did not fit the metadata limit, and this many unprocessed offsets were in it: a next owner would re-process
         * the records processed above {@link #offset} (C7; counted in {@link Anomalies#windowsLeftOut}).
         */
        final int windowLeftOut;

        Snapshot(int partition, long offset, String metadata, long drained, TreeMap<String, Long> passed) {
            this(partition, offset, metadata, drained, passed, NO_WINDOW_LEFT_OUT);
        }

        Snapshot(int partition, long offset, String metadata, long drained, TreeMap<String, Long> passed,
                int windowLeftOut) {
            this.partition = partition;
            this.offset = offset;
            this.metadata = metadata;
            this.drained = drained;
            this.passed = passed;
            this.windowLeftOut = windowLeftOut;
        }

        @Override
        Object[] components() {
            return new Object[] {partition, offset, metadata, drained, passed, windowLeftOut};
        }
    }

    /** An epoch a partition drained: the epoch hook runs before its progress commit (C7). */
    static final class Drained {
        final int partition;
        /** The assignment before {@code next}, or null. */
        final Assignment prev;
        final Assignment next;

        Drained(int partition, Assignment prev, Assignment next) {
            this.partition = partition;
            this.prev = prev;
            this.next = next;
        }
    }

    /** A key became split, was split differently, or became whole again, in {@code epoch} (C18). */
    static final class SplitChange extends Value {
        final RecordKey key;
        final long epoch;
        /** The parts' partitions from {@code epoch} on; empty: the key is whole again. */
        final int[] parts;
        /** The whole key's partition from {@code epoch} on (when whole again), else -1. */
        final int partition;

        SplitChange(RecordKey key, long epoch, int[] parts, int partition) {
            this.key = key;
            this.epoch = epoch;
            this.parts = parts;
            this.partition = partition;
        }

        @Override
        Object[] components() {
            return new Object[] {key, epoch, java.util.Arrays.toString(parts), partition};
        }
    }

    /** Input the protocol could not trust, handled by a documented bound and counted (C2, C19, 9.1). */
    static final class Anomalies {
        /** Records released because their epoch stayed unknown (C19). */
        long unknownEpochRecords;
        /** Leases whose expiry was clamped to {@code max_lease} (C2). */
        long clampedLeases;
        /** Marker records rejected, by {@link HandoffRecords.MarkerReject#ordinal}. */
        final long[] rejectedMarkers = new long[HandoffRecords.MarkerReject.values().length];
        /**
         * Commit snapshots whose metadata left out the skip window because it did not fit the metadata limit (C7):
         * counted once per snapshot built ({@code ConsumerCore.snapshotFresh}), not per commit made from it. Only a
         * snapshot without a window is reused, so in effect every commit that leaves out its window counts once.
         */
        long windowsLeftOut;
    }
}

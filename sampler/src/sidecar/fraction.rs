//! `--read-fraction F`: which records of each owned partition the consume loop reads, and with which
//! weight, so that a sampler follows a topic faster than it could consume it in full.
//!
//! # The schedule
//! Per partition the loop reads a chunk of `C` consecutive offsets `[s, s + C)` (`--read-chunk`) and then
//! seeks to `e = s + C / F`, skipping the rest; the next chunk starts at the first record at or after `e`.
//! Chunk boundaries are offsets, not record counts, so a compacted or transactional log (offsets without a
//! record: deleted keys, commit markers) is sampled by the same rule: a chunk holds as many records as its
//! share of the log holds. Every record of the chunk stands for `(e - s) / C` offsets, which is `1 / F` in
//! a backlog; the weight is planned when the chunk starts (the seek target must be known then) from the
//! log end the consumer last saw (librdkafka's statistics, `hi_offset`): the skip never goes past the end
//! of the log (a seek past it would be "offset out of range" and fall back to `auto.offset.reset`), so
//! near the head `e` is the log end and the weight shrinks to the span actually covered, down to 1 (no
//! skip) when the sampler is less than a chunk behind. Integer weights are carried from record to record
//! (error diffusion), so a chunk's weights sum to its span within one record. The weights multiply
//! `--sample-ratio`'s.
//!
//! # Reading to the end of what was fetched
//! A broker answers a fetch with whole record batches, and a busy producer's batches are large (about
//! 8,000 records of 120 bytes at librdkafka's defaults, `batch.size` 1 MB, `batch.num.messages` 10,000),
//! so a chunk that ends mid-batch leaves the rest of that batch fetched, parsed and purged by the seek:
//! half a batch per chunk on average, 40% more records parsed than read at the default chunk (measured;
//! no fetch-size setting changes it, the batch is the unit). With [`Schedule::extend_runs`] the chunk
//! goes on past its `C` offsets while the partition's records keep arriving back to back, at the same
//! weight, its skipped range growing with it (`e = s + (records' offsets) * weight`, so the read share
//! stays `F`), and seeks when the loop reports the run ended ([`Schedule::run_ended`]: a record of
//! another partition, or an empty poll, means what librdkafka had queued for it is used up), at the
//! latest after `2 C` offsets or at the log end seen at its start.
//!
//! Why weight by the planned span and not by a measured read/advance ratio: the span is known before the
//! chunk's records are observed (the sketch takes integer weights at observe time, it cannot be re-weighted
//! afterwards), and for a stationary log the records of `[s, s + C)` are a fair sample of `[s, e)` whatever
//! the offset gaps, so `records read * span / C` estimates the records of the span without bias.
//!
//! A record that arrives inside a chunk's skipped range (the seek was lost, or librdkafka delivered a
//! prefetched record) is dropped: the chunk's weight already stands for it. A rebalance forgets every
//! schedule (the partition resumes from its committed offset, and a new chunk starts there). The offsets
//! to commit are stored by the loop, not by librdkafka: the start of each chunk (everything before it is
//! accounted for) and each seek target ([`Schedule::positions`] at shutdown), so a restart resumes past
//! the last skipped range rather than re-reading and re-weighting it; after a crash at most the current
//! chunk is read twice (at `F = 1`, up to the auto-commit interval's records are).
//!
//! # The window spans as many records read as full reading's
//! An interval that reads a share `s` of the offsets it advances holds `s` times the records full reading
//! would, and the assignment built from noisy bucket counters is worse for it: at 12 partitions (768
//! buckets) a window of 10^5 records read packs 1-2.5 points worse than one of 10^6 (BENCHMARKS.md,
//! "Reading a fraction"). So with F < 1 the window decays by [`window_decay`] instead of `--decay`: by
//! `1 - s (1 - decay)`, which keeps its effective sample size (records read, `1 / (1 - decay)` intervals'
//! worth at full reading) the same as full reading's of the same traffic. The price is memory: at
//! `s = 0.1` and `--decay 0.5` the window's half-life is about 13.5 intervals instead of one, so drift is
//! followed more slowly; at the head of a topic (where `s` is about 1) nothing changes.
//!
//! # What F < 1 trades away
//! A burst shorter than the skipped range (`C / F - C` offsets) can be missed entirely, and the window
//! forgets more slowly (above). Streams whose keys cluster in time are estimated less well than their
//! record count says, since a chunk is consecutive records. The noise-aware hysteresis counts the records
//! read, not their weights, so it sees the sample as it is. At the head of a topic the sampler can read in
//! full, it reads (nearly) everything: the saving is for topics faster than it.
//!
//! Reference: the sampling-with-weights argument is Horvitz-Thompson (1952), each record weighted by the
//! inverse of the share of the log its chunk reads.
//!
//! This module is also compiled into the benches (`benches/common/sidecar.rs`, via `#[path]`), so it
//! depends on nothing but std.

use std::collections::HashMap;

/// Default `--read-chunk`: consecutive offsets per chunk (about one 1 MiB fetch of 100-byte records).
pub const DEFAULT_READ_CHUNK: u64 = 10_000;

/// The decay that keeps the window's records read equal to full reading's: an interval that read `read`
/// of the `advanced` offsets it went through (read or skipped) decays the window by `1 - s (1 - decay)`,
/// `s = read / advanced` (`decay` itself when nothing was skipped or nothing advanced).
pub fn window_decay(decay: f64, read: u64, advanced: u64) -> f64 {
    if advanced == 0 || read >= advanced {
        return decay;
    }
    let share = read as f64 / advanced as f64;
    (1.0 - share * (1.0 - decay)).clamp(0.0, 1.0)
}

/// What to do with one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Observe it with this weight (>= 1); then, when given, seek the partition to this offset.
    Read {
        /// Offsets of the log this record stands for.
        weight: u64,
        /// The chunk ended: the next offset to fetch.
        seek_to: Option<i64>,
    },
    /// Inside a skipped range: drop it (the chunk's weight stands for it); seek when given.
    Drop {
        /// The seek that skips the range has not been issued yet.
        seek_to: Option<i64>,
    },
}

/// One partition's current chunk: offsets `[start, read_end)` are read, `[read_end, skip_to)` skipped.
#[derive(Debug, Clone, Copy)]
struct Chunk {
    start: i64,
    read_end: i64,
    skip_to: i64,
    /// Offsets each read record stands for: `(skip_to - start) / (read_end - start)`.
    weight: f64,
    /// Error-diffusion carry of the fractional weight.
    carry: f64,
    /// The seek to `skip_to` was issued.
    seeked: bool,
    /// Past `read_end`, reading on while the run of this partition's records lasts.
    extending: bool,
    /// The furthest `skip_to` may grow to while extending (the log end seen at the start).
    limit: i64,
    /// One past the last offset seen.
    next: i64,
}

/// The read/skip schedule of every partition this consumer reads.
#[derive(Debug, Clone)]
pub struct Schedule {
    fraction: f64,
    chunk: u64,
    chunks: HashMap<i32, Chunk>,
    skipped: u64,
    started: u64,
    /// Read on past a chunk's end while its partition's run lasts ([`Schedule::extend_runs`]).
    extend: bool,
}

impl Schedule {
    /// Read `fraction` (in (0, 1]; anything else reads everything) of each partition in chunks of `chunk`
    /// offsets (at least 1).
    pub fn new(fraction: f64, chunk: u64) -> Self {
        let fraction = if fraction.is_finite() && fraction > 0.0 {
            fraction.min(1.0)
        } else {
            1.0
        };
        Self {
            fraction,
            chunk: chunk.max(1),
            chunks: HashMap::new(),
            skipped: 0,
            started: 0,
            extend: false,
        }
    }

    /// Read on past each chunk's `C` offsets while the partition's records keep arriving (up to `2 C`),
    /// seeking when [`Schedule::run_ended`] says the run is over (see the module docs).
    pub fn extend_runs(mut self) -> Self {
        self.extend = true;
        self
    }

    /// The loop saw a record of another partition (or none at all) after `partition`'s: if its chunk is
    /// reading on past its end, the run is over and this is where to seek.
    pub fn run_ended(&mut self, partition: i32) -> Option<i64> {
        let chunk = self.chunks.get_mut(&partition)?;
        if !chunk.extending || chunk.seeked {
            return None;
        }
        chunk.extending = false;
        chunk.seeked = true;
        self.skipped += u64::try_from(chunk.skip_to - chunk.next).unwrap_or(0);
        Some(chunk.skip_to)
    }

    /// The fraction of each partition's offsets read in a backlog.
    pub fn fraction(&self) -> f64 {
        self.fraction
    }

    /// Forget every chunk (after a rebalance: positions restart from the committed offsets).
    pub fn clear(&mut self) {
        self.chunks.clear();
    }

    /// Where each partition resumes: past its skipped range once the seek was issued, else past the last
    /// record seen (what the consumer should commit, so a restart neither re-reads nor re-weights).
    pub fn positions(&self) -> impl Iterator<Item = (i32, i64)> + '_ {
        self.chunks
            .iter()
            .map(|(&p, c)| (p, if c.seeked { c.skip_to } else { c.next }))
    }

    /// Chunks started so far (a record that starts one: everything before it is accounted for).
    pub fn chunks_started(&self) -> u64 {
        self.started
    }

    /// Offsets skipped (seeked over) since the last call.
    pub fn take_skipped(&mut self) -> u64 {
        std::mem::take(&mut self.skipped)
    }

    /// The verdict for the record at `offset` of `partition`. `log_end` is asked only when a chunk
    /// starts: the partition's known end offset (the next offset to be written), `None` if unknown.
    pub fn record(
        &mut self,
        partition: i32,
        offset: i64,
        log_end: impl FnOnce() -> Option<i64>,
    ) -> Verdict {
        let current = self
            .chunks
            .get(&partition)
            .is_some_and(|c| offset >= c.start && offset < c.skip_to);
        if !current {
            // First record, after a seek, or a rewind (a reset offset): a new chunk starts here.
            let c = self.start(offset, log_end());
            self.chunks.insert(partition, c);
            self.started += 1;
        }
        let Some(chunk) = self.chunks.get_mut(&partition) else {
            // Inserted above; read the record in full rather than panic.
            return Verdict::Read {
                weight: 1,
                seek_to: None,
            };
        };
        chunk.next = chunk.next.max(offset + 1);
        if chunk.extending && !chunk.seeked && offset >= chunk.read_end {
            // Reading on: this record's offsets stand for `weight` each, like the chunk's.
            let grown =
                chunk.start + ((offset + 1 - chunk.start) as f64 * chunk.weight).round() as i64;
            let last = offset + 1 >= chunk.read_end + (chunk.read_end - chunk.start);
            if grown <= chunk.limit {
                chunk.skip_to = chunk.skip_to.max(grown);
                let weight = chunk.next_weight();
                let seek_to = last.then(|| {
                    chunk.seeked = true;
                    chunk.extending = false;
                    self.skipped += u64::try_from(chunk.skip_to - offset - 1).unwrap_or(0);
                    chunk.skip_to
                });
                return Verdict::Read { weight, seek_to };
            }
            chunk.extending = false;
        }
        if offset >= chunk.read_end {
            let seek_to = (!chunk.seeked).then(|| {
                chunk.seeked = true;
                self.skipped += u64::try_from(chunk.skip_to - offset).unwrap_or(0);
                chunk.skip_to
            });
            return Verdict::Drop { seek_to };
        }
        let weight = chunk.next_weight();
        let mut seek_to = None;
        if offset + 1 >= chunk.read_end && chunk.skip_to > chunk.read_end {
            if self.extend && chunk.limit > chunk.skip_to {
                // Read on while the run lasts; the loop's `run_ended` seeks.
                chunk.extending = true;
            } else {
                chunk.seeked = true;
                self.skipped += u64::try_from(chunk.skip_to - offset - 1).unwrap_or(0);
                seek_to = Some(chunk.skip_to);
            }
        }
        Verdict::Read { weight, seek_to }
    }

    fn start(&self, start: i64, log_end: Option<i64>) -> Chunk {
        let chunk = i64::try_from(self.chunk).unwrap_or(i64::MAX);
        let read_end = start.saturating_add(chunk);
        let wanted = start.saturating_add((self.chunk as f64 / self.fraction).round() as i64);
        // Never past the log's end, never less than the chunk itself.
        let skip_to = log_end.map_or(read_end, |end| end.clamp(read_end, wanted.max(read_end)));
        Chunk {
            start,
            read_end,
            skip_to,
            weight: (skip_to - start) as f64 / chunk as f64,
            carry: 0.0,
            seeked: false,
            extending: false,
            limit: log_end.map_or(read_end, |end| end.max(read_end)),
            next: start,
        }
    }
}

impl Chunk {
    /// The integer weight of the next record read (error diffusion of the fractional weight).
    fn next_weight(&mut self) -> u64 {
        self.carry += self.weight;
        let weight = self.carry.floor().max(1.0);
        self.carry -= weight;
        weight as u64
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use proptest::prelude::*;

    use super::*;

    /// Feed a log of `offsets` (ascending, gaps allowed; the log end is `end`) through the schedule the
    /// way the consumer does: a seek jumps to the first offset at or after its target. Returns (records
    /// read, weight sum, offsets advanced, skipped count).
    fn replay(s: &mut Schedule, offsets: &[i64], end: i64) -> (u64, u64, i64, u64) {
        replay_runs(s, offsets, end, usize::MAX)
    }

    /// [`replay`], the run of records ending (`run_ended`) after every `run` records delivered.
    fn replay_runs(
        s: &mut Schedule,
        offsets: &[i64],
        end: i64,
        run: usize,
    ) -> (u64, u64, i64, u64) {
        let (mut read, mut weights, mut i, mut delivered) = (0u64, 0u64, 0usize, 0usize);
        while i < offsets.len() {
            let o = offsets[i];
            delivered += 1;
            if delivered % run == 0
                && let Some(to) = s.run_ended(0)
            {
                // Past the last record read (gaps allowed: the seek lands on the next one present).
                let last = offsets[i.saturating_sub(1)];
                assert!(
                    to > last && to <= end,
                    "run ended: seek to {to} after {last}, end {end}"
                );
                i = offsets.partition_point(|&x| x < to);
                continue;
            }
            let seek = match s.record(0, o, || Some(end)) {
                Verdict::Read { weight, seek_to } => {
                    assert!(weight >= 1);
                    read += 1;
                    weights += weight;
                    seek_to
                }
                Verdict::Drop { seek_to } => seek_to,
            };
            i = match seek {
                Some(to) => {
                    assert!(to > o && to <= end, "seek to {to} from {o}, end {end}");
                    offsets.partition_point(|&x| x < to)
                }
                None => i + 1,
            };
        }
        (
            read,
            weights,
            end - offsets.first().copied().unwrap_or(0),
            s.take_skipped(),
        )
    }

    #[test]
    fn table_of_schedules() {
        // (fraction, chunk, log length, expected reads, expected weight sum)
        let cases = [
            (1.0, 100, 1_000, 1_000, 1_000),
            (0.1, 100, 10_000, 1_000, 10_000),
            (0.5, 10, 1_000, 500, 1_000),
            (0.25, 4, 100, 28, 100), // last chunk [96, 100) reaches the end: weight 1
            (0.1, 100, 150, 100, 150), // one chunk, the skip capped at the log end
            (0.1, 100, 50, 50, 50),  // less than a chunk: read everything at weight 1
        ];
        for (f, c, n, reads, weights) in cases {
            let log: Vec<i64> = (0..n).collect();
            let mut s = Schedule::new(f, c);
            let (read, w, advanced, skipped) = replay(&mut s, &log, n);
            assert_eq!((read, w), (reads, weights), "F {f}, C {c}, n {n}");
            assert_eq!(read + skipped, advanced as u64, "F {f}, C {c}, n {n}");
        }
    }

    #[test]
    fn fraction_one_reads_everything_at_weight_one() {
        let mut s = Schedule::new(1.0, 7);
        for o in 0..1000 {
            assert_eq!(
                s.record(3, o, || Some(1_000_000)),
                Verdict::Read {
                    weight: 1,
                    seek_to: None
                }
            );
        }
        assert_eq!(s.take_skipped(), 0);
    }

    #[test]
    fn unknown_log_end_never_skips() {
        let mut s = Schedule::new(0.1, 10);
        for o in 0..1000 {
            assert_eq!(
                s.record(0, o, || None),
                Verdict::Read {
                    weight: 1,
                    seek_to: None
                }
            );
        }
    }

    #[test]
    fn records_in_a_skipped_range_are_dropped_and_seek_once() {
        let mut s = Schedule::new(0.5, 2);
        let end = || Some(100);
        assert!(matches!(
            s.record(0, 0, end),
            Verdict::Read {
                weight: 2,
                seek_to: None
            }
        ));
        assert_eq!(
            s.record(0, 1, end),
            Verdict::Read {
                weight: 2,
                seek_to: Some(4)
            }
        );
        // The seek was lost: offsets 2 and 3 still arrive, are dropped without a second seek.
        assert_eq!(s.record(0, 2, end), Verdict::Drop { seek_to: None });
        assert_eq!(s.record(0, 3, end), Verdict::Drop { seek_to: None });
        assert!(matches!(
            s.record(0, 4, end),
            Verdict::Read { weight: 2, .. }
        ));
        // A gap over the chunk's end: the first record past it seeks.
        assert_eq!(s.record(0, 6, end), Verdict::Drop { seek_to: Some(8) });
        assert_eq!(s.take_skipped(), 2 + 2);
        assert_eq!(s.positions().collect::<Vec<_>>(), vec![(0, 8)]);
        assert_eq!(
            s.record(0, 8, end),
            Verdict::Read {
                weight: 2,
                seek_to: None
            }
        );
        assert_eq!(s.positions().collect::<Vec<_>>(), vec![(0, 9)]);
    }

    #[test]
    fn a_chunk_reads_on_while_its_run_lasts() {
        let end = || Some(1_000);
        let mut s = Schedule::new(0.1, 10).extend_runs();
        for o in 0..15 {
            // Past the chunk's 10 offsets it reads on at the same weight, without a seek.
            assert_eq!(
                s.record(0, o, end),
                Verdict::Read {
                    weight: 10,
                    seek_to: None
                },
                "offset {o}"
            );
        }
        // The run ends: 15 records stood for 150 offsets.
        assert_eq!(s.run_ended(0), Some(150));
        assert_eq!(s.run_ended(0), None, "once");
        assert_eq!(s.take_skipped(), 135);
        assert_eq!(s.positions().collect::<Vec<_>>(), vec![(0, 150)]);
        // Without an end of the run it stops at twice the chunk.
        let mut s = Schedule::new(0.1, 10).extend_runs();
        for o in 0..19 {
            assert!(matches!(
                s.record(0, o, end),
                Verdict::Read { seek_to: None, .. }
            ));
        }
        assert_eq!(
            s.record(0, 19, end),
            Verdict::Read {
                weight: 10,
                seek_to: Some(200)
            }
        );
        // Never past the log end seen at the chunk's start: 12 records stand for the 120 offsets.
        let mut s = Schedule::new(0.1, 10).extend_runs();
        let end = || Some(120);
        let read: u64 = (0..12)
            .map(|o| match s.record(0, o, end) {
                Verdict::Read { weight, seek_to } => {
                    assert_eq!(seek_to, None);
                    weight
                }
                v => panic!("{v:?} at {o}"),
            })
            .sum();
        assert_eq!(read, 120);
        assert_eq!(s.record(0, 12, end), Verdict::Drop { seek_to: Some(120) });
    }

    #[test]
    fn the_window_decays_by_the_share_read() {
        // (decay, read, advanced, expected)
        for (d, r, a, want) in [
            (0.5, 100, 100, 0.5), // nothing skipped: --decay
            (0.5, 0, 0, 0.5),     // nothing advanced
            (0.5, 10, 100, 0.95), // a tenth read: 1 - 0.1 * 0.5
            (0.0, 10, 100, 0.9),  // even --decay 0 keeps ten intervals of a tenth
            (1.0, 10, 100, 1.0),  // never forgetting stays so
            (0.5, 1, 1_000, 0.9995),
        ] {
            let got = window_decay(d, r, a);
            assert!((got - want).abs() < 1e-12, "decay {d}, {r} of {a}: {got}");
        }
        // The effective records read, read / (1 - decay'), equal full reading's, advanced / (1 - decay).
        let (read, advanced, d) = (1_234u64, 98_765u64, 0.5);
        let eff = read as f64 / (1.0 - window_decay(d, read, advanced));
        assert!(
            (eff - advanced as f64 / (1.0 - d)).abs() < 1e-6 * eff,
            "{eff}"
        );
    }

    #[test]
    fn nonsense_fractions_read_everything() {
        for f in [0.0, -1.0, f64::NAN, 3.0] {
            assert_eq!(Schedule::new(f, 10).fraction(), 1.0, "{f}");
        }
    }

    #[test]
    fn a_rewind_or_clear_starts_a_new_chunk() {
        let mut s = Schedule::new(0.1, 10);
        for o in 100..105 {
            s.record(0, o, || Some(10_000));
        }
        // A rebalance reset the position to 50: read from there.
        assert!(matches!(
            s.record(0, 50, || Some(10_000)),
            Verdict::Read { .. }
        ));
        s.clear();
        assert!(matches!(
            s.record(0, 105, || Some(10_000)),
            Verdict::Read { .. }
        ));
    }

    proptest! {
        /// Over any log (with gaps) and any fraction: every offset is either read or skipped, each read
        /// record weighs >= 1, a seek never passes the log end, and the weights estimate the span's
        /// records: within one chunk's error of the records present.
        #[test]
        fn weights_cover_the_log(
            fraction in 0.01f64..=1.0,
            chunk in 1u64..200,
            gaps in proptest::collection::vec(1i64..4, 1..3000),
            run in proptest::option::of(1usize..500),
        ) {
            let mut log = Vec::with_capacity(gaps.len());
            let mut o = 0;
            for g in &gaps {
                log.push(o);
                o += g;
            }
            let end = o;
            // With `run`: reading on past each chunk, the run ending every `run` records.
            let mut s = Schedule::new(fraction, chunk);
            if run.is_some() {
                s = s.extend_runs();
            }
            let (read, weights, advanced, skipped) =
                replay_runs(&mut s, &log, end, run.unwrap_or(usize::MAX));
            prop_assert!(read as i64 <= advanced);
            prop_assert!(read >= 1);
            prop_assert!(skipped <= advanced as u64);
            if fraction == 1.0 {
                prop_assert_eq!(read, log.len() as u64);
            }
            // Every record of the log read at weight 1 when it is shorter than a chunk.
            if (end as u64) <= chunk {
                prop_assert_eq!((read, weights), (log.len() as u64, log.len() as u64));
            }
            // Weights sum to the offsets spanned by the chunks' records (within one offset per chunk
            // of rounding), so their ratio to the offsets advanced is the log's record density.
            let chunks = (advanced as f64 / chunk as f64).ceil() + 1.0;
            let spanned = weights as f64;
            prop_assert!(spanned >= read as f64);
            prop_assert!(
                spanned <= advanced as f64 + chunks,
                "weights {} > advanced {} + {}",
                spanned,
                advanced,
                chunks
            );
        }
    }
}

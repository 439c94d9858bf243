//! The per-partition hold buffer: records of moved keys wait here, per key in arrival (offset)
//! order, until the partitions their key used to live on are drained. Pure: no Kafka, no clock
//! (the caller passes `Monotonic`s), unit-tested below.
//!
//! Besides the held records the buffer tracks every record of the partition that was taken out
//! of Kafka but is not processed yet and did not take the fast path (held, or released and
//! waiting for the application): offset -> epoch. That set answers the two questions the
//! protocol asks of a partition:
//!
//! - *lowest unprocessed offset*: the offset to commit (a held record keeps the commit below it,
//!   which is what makes a crash re-deliver it to the next owner);
//! - *lowest epoch below an offset*: a marker of epoch `E` ending at `o` is passed once no record
//!   below `o` with an epoch below `E` is unprocessed (spec 9.3, C5).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Duration;

use super::Monotonic;

/// Which partitions must be drained (to the record's epoch) before a held record may go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Nothing: the record waits only for earlier records of its key (FIFO).
    Nothing,
    /// These partitions (the key's earlier homes, the record's own partition excluded).
    Partitions(Vec<u32>),
    /// Every partition but the record's own (an earlier epoch's assignment is unknown).
    AllBut(u32),
}

/// One held record.
#[derive(Debug)]
pub struct Held<M> {
    pub offset: i64,
    /// The record's epoch (0 = no epoch header), or the epoch it is counted as: what the
    /// markers of its partition and the FIFO of its key go by.
    pub epoch: u64,
    pub wait: Wait,
    /// The epoch the partitions of `wait` must have drained: the record's epoch, or one above it
    /// for a record that may be of either (a split record, see `split`).
    pub target: u64,
    pub since: Monotonic,
    pub msg: M,
}

/// A record released from the buffer, with how long it was held.
#[derive(Debug)]
pub struct Released<M> {
    pub offset: i64,
    pub held_for: Duration,
    pub msg: M,
}

/// The hold buffer of one partition.
#[derive(Debug)]
pub struct HoldBuffer<M> {
    by_key: HashMap<Box<[u8]>, VecDeque<Held<M>>, ahash::RandomState>,
    /// Offset -> epoch of every record that is held or released-but-unprocessed.
    unprocessed: BTreeMap<i64, u64>,
    held: usize,
}

impl<M> Default for HoldBuffer<M> {
    fn default() -> Self {
        Self {
            by_key: HashMap::default(),
            unprocessed: BTreeMap::new(),
            held: 0,
        }
    }
}

impl<M> HoldBuffer<M> {
    /// Records held now.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Keys with held records.
    #[cfg(test)]
    pub fn held_keys(&self) -> usize {
        self.by_key.len()
    }

    /// The lowest and highest epoch at most `known` of `key`'s held records (`None`: none held).
    /// Held records of epochs above `known` (never learnt: untrusted input) are left out, so that
    /// they cannot lift a later record of the key above the markers it must block.
    #[inline]
    pub fn key_epochs(&self, key: &[u8], known: u64) -> Option<(u64, u64)> {
        if self.by_key.is_empty() {
            return None;
        }
        let queue = self.by_key.get(key)?;
        let epochs = || queue.iter().map(|h| h.epoch).filter(|&e| e <= known);
        Some((epochs().min()?, epochs().max()?))
    }

    /// Queue a record behind the key's earlier held records.
    pub fn hold(&mut self, key: &[u8], record: Held<M>) {
        self.unprocessed.insert(record.offset, record.epoch);
        self.held += 1;
        match self.by_key.get_mut(key) {
            Some(queue) => queue.push_back(record),
            None => {
                self.by_key.insert(Box::from(key), VecDeque::from([record]));
            }
        }
    }

    /// Release every record whose `can_go` holds and that no earlier held record of its key with
    /// an epoch at most its own still precedes (such a record may be from the same producer, whose
    /// order must hold; one with a higher epoch cannot be: a producer's epochs never decrease).
    /// Within a key, released records come out in offset order. Released records stay
    /// *unprocessed* until [`HoldBuffer::processed`]. Returns how many were released.
    pub fn release(
        &mut self,
        now: Monotonic,
        mut can_go: impl FnMut(&Held<M>) -> bool,
        mut out: impl FnMut(Released<M>),
    ) -> usize {
        let mut released = 0;
        self.by_key.retain(|_, queue| {
            let mut blocked = u64::MAX;
            let mut i = 0;
            while i < queue.len() {
                let h = &queue[i];
                if h.epoch < blocked && can_go(h) {
                    if let Some(h) = queue.remove(i) {
                        released += 1;
                        out(Released {
                            offset: h.offset,
                            held_for: now.saturating_sub(h.since),
                            msg: h.msg,
                        });
                    }
                } else {
                    blocked = blocked.min(h.epoch);
                    i += 1;
                }
            }
            !queue.is_empty()
        });
        self.held -= released;
        released
    }

    /// A record that goes straight to the ready queue (behind released ones): unprocessed until
    /// [`HoldBuffer::processed`].
    pub fn queued(&mut self, offset: i64, epoch: u64) {
        self.unprocessed.insert(offset, epoch);
    }

    /// A released record was processed.
    pub fn processed(&mut self, offset: i64) {
        self.unprocessed.remove(&offset);
    }

    /// The lowest held or released-unprocessed offset.
    pub fn lowest_unprocessed(&self) -> Option<i64> {
        self.unprocessed.first_key_value().map(|(&o, _)| o)
    }

    /// Every held or released-unprocessed offset, ascending.
    pub fn unprocessed_offsets(&self) -> Vec<i64> {
        self.unprocessed.keys().copied().collect()
    }

    /// The lowest epoch among held or released-unprocessed records below `offset`.
    pub fn min_epoch_below(&self, offset: i64) -> Option<u64> {
        self.unprocessed.range(..offset).map(|(_, &e)| e).min()
    }

    /// Whether anything is held or released-unprocessed.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.unprocessed.is_empty()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn held(offset: i64, epoch: u64, wait: Wait, t: Monotonic) -> Held<&'static str> {
        Held {
            offset,
            epoch,
            wait,
            target: epoch,
            since: t,
            msg: "m",
        }
    }

    #[test]
    fn a_lower_epoch_bypasses_higher_held_epochs_of_its_key() {
        // Another producer's epoch-4 records of k wait; a lagging producer's epoch-2 record of k
        // behind them may go (it cannot be the same producer), an epoch-4 one may not.
        let t0 = Monotonic::ZERO;
        let mut b: HoldBuffer<&str> = HoldBuffer::default();
        b.hold(b"k", held(1, 4, Wait::AllBut(0), t0));
        b.hold(b"k", held(2, 2, Wait::Nothing, t0));
        b.hold(b"k", held(3, 4, Wait::Nothing, t0));
        b.hold(b"k", held(4, 3, Wait::Nothing, t0));
        let mut out = Vec::new();
        b.release(t0, |h| h.wait == Wait::Nothing, |r| out.push(r.offset));
        assert_eq!(
            out,
            vec![2, 4],
            "3 waits behind 1 (same epoch), 2 and 4 bypass"
        );
        let mut out = Vec::new();
        b.release(t0, |_| true, |r| out.push(r.offset));
        assert_eq!(out, vec![1, 3]);
    }

    #[test]
    fn fifo_per_key_and_unprocessed_tracking() {
        let t0 = Monotonic::ZERO;
        let mut b: HoldBuffer<&str> = HoldBuffer::default();
        b.hold(b"k", held(10, 5, Wait::Partitions(vec![1]), t0));
        // A later record of the same key and epoch with nothing to wait for still queues.
        b.hold(b"k", held(12, 5, Wait::Nothing, t0));
        b.hold(b"j", held(11, 5, Wait::AllBut(0), t0));
        assert_eq!((b.held(), b.held_keys()), (3, 2));
        assert_eq!(b.key_epochs(b"k", u64::MAX), Some((5, 5)));
        assert_eq!(b.key_epochs(b"x", u64::MAX), None);
        assert_eq!(
            b.key_epochs(b"k", 4),
            None,
            "epochs above the known ones do not count"
        );
        assert_eq!(b.lowest_unprocessed(), Some(10));
        assert_eq!(b.min_epoch_below(12), Some(5));
        assert_eq!(b.min_epoch_below(13), Some(5));
        assert_eq!(b.min_epoch_below(10), None);

        // Only `Nothing` may go: k's head must wait, so 12 stays behind it.
        let mut out = Vec::new();
        let n = b.release(
            t0 + Duration::from_millis(5),
            |h| h.wait == Wait::Nothing,
            |r| out.push(r.offset),
        );
        assert_eq!((n, out.as_slice()), (0, &[][..]));

        // Partition 1 drained: k's head and its follower go, in order; j stays.
        let mut out = Vec::new();
        b.release(
            t0 + Duration::from_millis(7),
            |h| !matches!(h.wait, Wait::AllBut(_)),
            |r| out.push((r.offset, r.held_for)),
        );
        assert_eq!(
            out,
            vec![
                (10, Duration::from_millis(7)),
                (12, Duration::from_millis(7))
            ]
        );
        assert_eq!((b.held(), b.held_keys()), (1, 1));
        assert_eq!(b.key_epochs(b"k", u64::MAX), None);
        // Released but not processed: still counted below offsets and for the commit.
        assert_eq!(b.lowest_unprocessed(), Some(10));
        b.processed(10);
        b.processed(12);
        assert_eq!(b.lowest_unprocessed(), Some(11));
        let mut out = Vec::new();
        b.release(t0, |_| true, |r| out.push(r.offset));
        b.processed(11);
        assert_eq!(out, vec![11]);
        assert!(b.is_empty() && b.held() == 0);
    }
}

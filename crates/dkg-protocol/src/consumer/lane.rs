//! The consumer's fast path: with no epoch switch in progress a record goes to the application
//! without the core's lock, its map lookups or the clock.
//!
//! The core ([`super::core::Core`]) sits behind a mutex because librdkafka's rebalance callbacks
//! reach it too (on the consuming thread inside its poll; on the closing thread once the consumer
//! is gone). Locking it, looking the partition up in its maps and reading the clock for every
//! record is work a steady epoch does not need. Instead, whenever its lock is released the core
//! *publishes*, per owned partition, a [`Lane`]:
//!
//! - a **gate**: open when a record of the partition would be delivered at once and change
//!   nothing in the core but the partition's position (the partition is owned, fetching started,
//!   no skip rule of a previous owner is left, none of its records is held, no released record
//!   waits anywhere), with the epoch below which stamped records may pass (the settled epoch + 1;
//!   unstamped records pass whenever it is open);
//! - the partition's **position**, which the consuming side advances itself on the fast path and
//!   the core reads for commits and lag;
//!
//! and one flag saying whether the consuming side has anything to ask the core before fetching
//! (released records, drained values to commit). A fast record then costs one atomic load and one
//! atomic store, on lines that in a steady epoch only the consuming thread touches.
//!
//! Split keys ([`super::split`]): the lane also carries the partition's drained epoch, and the
//! core publishes its [`SplitView`] beside the lanes, so a record taken here is labelled exactly
//! as the core would label it ([`Lanes::split_label`]: one more atomic load per record, and a key
//! lookup only while some epoch kept splits a key). A partition that may receive split records
//! that have to wait keeps its gate shut ([`SplitView::in_transition`]).
//!
//! Reading the gate without the lock is sound because the core never changes between that read
//! and the record's delivery: it changes only on the consuming side (its own calls, and the
//! rebalance callbacks librdkafka runs inside the poll that fetched the record, before it is
//! returned), or on the closing thread after the consuming side is gone. The simulation in
//! `core.rs` takes the fast path wherever a gate allows it and checks that the core would have
//! delivered every record a gate admitted.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

use super::split::{SharedView, SplitView};

/// No position yet (nothing fetched since the assignment).
const NO_POSITION: i64 = -1;

/// The lock-free state of one owned partition, shared between the core and the consuming side.
#[derive(Debug)]
pub struct Lane {
    /// 0: closed, every record of the partition goes through the core. `n > 0`: open to records
    /// without an epoch and to records of epochs below `n`. Written by the core only; closed for
    /// good when the partition is revoked (a new assignment gets a new lane).
    gate: AtomicU64,
    /// Every offset below it was fetched and is processed or tracked by the core (held,
    /// released, or handed out by the core). A record handed out through the lane is neither
    /// until the application is done with it: meanwhile the position is that record's offset.
    /// [`NO_POSITION`] before the first record.
    position: AtomicI64,
    /// The partition's drained epoch as last published (bounds a split record's epoch).
    drained: AtomicU64,
}

impl Default for Lane {
    fn default() -> Self {
        Self::new()
    }
}

impl Lane {
    /// A lane with no position and gate 0.
    pub fn new() -> Self {
        Self {
            gate: AtomicU64::new(0),
            position: AtomicI64::new(NO_POSITION),
            drained: AtomicU64::new(0),
        }
    }

    /// Whether a record at `offset` with `epoch` may skip the core. A record below the position
    /// (fetched again after a seek) never does: the core tracks it.
    #[inline]
    fn admits(&self, offset: i64, epoch: Option<u64>) -> bool {
        let gate = self.gate.load(Ordering::Acquire);
        gate != 0
            && epoch.is_none_or(|e| e < gate)
            && offset >= self.position.load(Ordering::Relaxed)
    }

    /// Set by the core when it publishes (0 = closed).
    pub fn set_gate(&self, gate: u64) {
        self.gate.store(gate, Ordering::Release);
    }

    /// Set by the core when it publishes.
    pub fn set_drained(&self, drained: u64) {
        self.drained.store(drained, Ordering::Release);
    }

    /// The position (`None` before the first record).
    pub fn position(&self) -> Option<i64> {
        let p = self.position.load(Ordering::Acquire);
        (p != NO_POSITION).then_some(p)
    }

    /// The core took a record at `offset` (it now tracks it, or it was consumed).
    pub fn fetched(&self, offset: i64) {
        if offset + 1 > self.position.load(Ordering::Acquire) {
            self.position.store(offset + 1, Ordering::Release);
        }
    }
}

/// Which record the application holds, so that it can be marked processed by whoever handed it
/// out.
#[derive(Clone, Copy, Debug)]
enum InApp {
    None,
    /// Handed out through the lane of `partition`.
    Lane {
        partition: u32,
        offset: i64,
    },
    /// Handed out by the core (which tracks it).
    Core,
}

/// The consuming side's view: the lanes of the partitions it has seen, the core's "nothing to
/// ask" flag, and where the application's record came from. Not shared (one per consumer).
#[derive(Debug)]
pub struct Lanes {
    by_partition: Vec<Option<Arc<Lane>>>,
    idle: Arc<AtomicBool>,
    in_app: InApp,
    shared: Arc<SharedView>,
    /// `shared`'s view as of `version`.
    view: Arc<SplitView>,
    version: u64,
}

impl Lanes {
    pub fn new(idle: Arc<AtomicBool>, shared: Arc<SharedView>) -> Self {
        let version = shared.version();
        let view = shared.get();
        Self {
            by_partition: Vec::new(),
            idle,
            in_app: InApp::None,
            shared,
            view,
            version,
        }
    }

    /// Over how many partitions the key of a record taken by [`Lanes::take`] is split in the
    /// record's epoch (`None`: whole), by the same rule as the core's.
    #[inline]
    pub fn split_label(
        &mut self,
        partition: u32,
        key: Option<&[u8]>,
        epoch: Option<u64>,
    ) -> Option<u32> {
        let version = self.shared.version();
        if version != self.version {
            self.view = self.shared.get();
            self.version = version;
        }
        if self.view.is_empty() {
            return None;
        }
        let key = key?;
        let lane = self.by_partition.get(partition as usize)?.as_ref()?;
        let drained = lane.drained.load(Ordering::Acquire);
        self.view.label(key, partition, drained, epoch)
    }

    /// Whether [`Lanes::split_label`] may label a record as split (some epoch kept splits a
    /// key): if not, it labels every record whole and needs no key.
    #[inline]
    pub fn labels_keys(&mut self) -> bool {
        let version = self.shared.version();
        if version != self.version {
            self.view = self.shared.get();
            self.version = version;
        }
        !self.view.is_empty()
    }

    /// The core has nothing to hand out or commit before the next fetch (no released record
    /// waits, no drained value awaits its commit).
    #[inline]
    pub fn core_idle(&self) -> bool {
        self.idle.load(Ordering::Acquire)
    }

    /// Hand a fetched record to the application without the core, if its
    /// partition's gate admits it. Returns whether it did; if not, the core must decide.
    #[inline]
    pub fn take(&mut self, partition: u32, offset: i64, epoch: Option<u64>) -> bool {
        let Some(Some(lane)) = self.by_partition.get(partition as usize) else {
            return false;
        };
        if !lane.admits(offset, epoch) {
            return false;
        }
        // Unprocessed until the application asks for the next record: the position stays on it.
        lane.position.store(offset, Ordering::Release);
        self.in_app = InApp::Lane { partition, offset };
        true
    }

    /// Whether [`Lanes::take`] would take the record (for tests that cross-check the core).
    #[cfg(test)]
    pub fn admits(&self, partition: u32, offset: i64, epoch: Option<u64>) -> bool {
        self.by_partition
            .get(partition as usize)
            .and_then(Option::as_ref)
            .is_some_and(|lane| lane.admits(offset, epoch))
    }

    /// The core handed the application its record.
    pub fn took_from_core(&mut self) {
        self.in_app = InApp::Core;
    }

    /// The application's record is processed. Returns whether the core handed it out (then the
    /// caller tells the core).
    #[inline]
    pub fn processed(&mut self) -> bool {
        match std::mem::replace(&mut self.in_app, InApp::None) {
            InApp::None => false,
            InApp::Core => true,
            InApp::Lane { partition, offset } => {
                if let Some(Some(lane)) = self.by_partition.get(partition as usize) {
                    lane.position.store(offset + 1, Ordering::Release);
                }
                false
            }
        }
    }

    /// After the core decided about a record of `partition` (under its lock): keep `lane`, the
    /// partition's current lane (a new one after a re-assignment, `None` if not owned).
    pub fn refresh(&mut self, partition: u32, lane: Option<&Arc<Lane>>) {
        let i = partition as usize;
        if self.by_partition.len() <= i {
            self.by_partition.resize(i + 1, None);
        }
        let slot = &mut self.by_partition[i];
        let same = match (slot.as_ref(), lane) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        if !same {
            *slot = lane.cloned();
        }
    }
}

//! The consumer's ordering protocol for Python: `dkg_kafka_protocol::consumer::core::Core` itself.
//!
//! The Python `DkgConsumer` (`src/dkg_kafka/consumer.py`) does only I/O: it polls confluent-kafka,
//! reads the handoff and control topics, commits and announces what this core says, pauses and
//! resumes partitions, and calls the hooks. Every decision (deliver, hold, skip, release order,
//! drained epochs, commit metadata) is the Rust core's, as in the Rust `DkgConsumer`
//! (`partitioner/src/kafka/consumer/`), whose glue this mirrors: no third implementation of the
//! rules of `docs/spec.md` 9.3.
//!
//! Records enter as the confluent-kafka `Message` itself ([`ConsumerCore::offer`] reads its
//! partition, offset, key and headers in one native call) and come back, when held, as that same
//! object. Times come from this module's clock (a monotonic origin and the wall clock) unless a
//! test sets them ([`ConsumerCore::set_clock`]).

use std::collections::{BTreeMap, VecDeque};
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dkg_kafka_protocol::consumer::Monotonic;
use dkg_kafka_protocol::consumer::core::{Core, CoreConfig, Incoming, Outcome};
use dkg_kafka_protocol::consumer::lane::Lanes;
use dkg_kafka_protocol::consumer::progress::CommitMeta;
use dkg_kafka_protocol::handoff::{self, HandoffEntry, HandoffKey, MarkerReject, Progress};
use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyList, PyString};

use crate::PyAssignment;
use crate::consumer_intake::{epoch_of_headers, names};
use crate::consumer_results::{CommitSnapshot, EpochChange, SplitChange};

/// What the core holds per record: the application's message object, its partition and its split
/// label (over how many partitions its key is split in its epoch; counted when handed out).
type Msg = (Py<PyAny>, u32, Option<u32>);

/// The clock: real (monotonic since creation, wall clock) or set by the caller (replays, tests).
#[derive(Debug)]
enum Clock {
    Real(Instant),
    Manual { mono: Monotonic, now_ms: u64 },
}

impl Clock {
    fn mono(&self) -> Monotonic {
        match self {
            Clock::Real(origin) => origin.elapsed(),
            Clock::Manual { mono, .. } => *mono,
        }
    }

    fn now_ms(&self) -> u64 {
        match self {
            Clock::Real(_) => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            Clock::Manual { now_ms, .. } => *now_ms,
        }
    }
}

#[derive(Debug)]
struct State {
    core: Core<Msg>,
    clock: Clock,
    /// Records handed to the application per partition (index = partition).
    records: Vec<u64>,
    split_records: u64,
    /// The split label of the last record handed out.
    last_split: Option<u32>,
    /// What the last `offer` decided.
    last_outcome: &'static str,
    /// When [`ConsumerCore::next`] next reports housekeeping due.
    housekeeping_at: Instant,
    /// Fetched from the client, not offered yet (a fetch takes what the client has queued).
    pending: VecDeque<Py<PyAny>>,
    /// The fast path (`dkg_kafka_protocol::consumer::lane`, as the Rust consumer's): records of quiet
    /// partitions are handed out without the core, and a fetch asks the core nothing while it
    /// published that it has nothing to hand out or commit.
    lanes: Lanes,
}

/// The state locked for a change of the core: unlocking publishes the fast path's view of it
/// ([`Core::publish`]), so the lanes read without the core always see its latest state.
struct Guard<'a>(MutexGuard<'a, State>);

impl Deref for Guard<'_> {
    type Target = State;

    fn deref(&self) -> &State {
        &self.0
    }
}

impl DerefMut for Guard<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.0
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        self.0.core.publish();
    }
}

/// The consumer protocol's state machine (`dkg_kafka_protocol::consumer::core::Core`) of one topic and
/// group member, for the Python `DkgConsumer`.
///
/// Not for concurrent use from several threads at once (the `DkgConsumer` calls it from the
/// thread that polls, rebalance callbacks included); a lock makes misuse safe, not fast.
#[pyclass(module = "dkg_kafka._native", frozen)]
#[derive(Debug)]
pub(crate) struct ConsumerCore {
    state: Mutex<State>,
    topic: String,
    group: String,
}

/// `DkgConsumer`'s control codes of [`ConsumerCore::next`].
fn code(py: Python<'_>, c: u8) -> Py<PyAny> {
    match c.into_pyobject(py) {
        Ok(v) => v.into_any().unbind(),
        Err(never) => match never {},
    }
}

fn secs(s: f64, what: &str) -> PyResult<Duration> {
    Duration::try_from_secs_f64(s).map_err(|_| {
        PyValueError::new_err(format!("{what} must be a non-negative number of seconds"))
    })
}

impl ConsumerCore {
    /// The state, for a change of the core (published on unlock).
    fn lock(&self) -> Guard<'_> {
        Guard(self.lock_fast())
    }

    /// The state for the fast path: lanes, counters and the fetched records only, never the
    /// core (nothing to publish).
    fn lock_fast(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn progress_bytes<'py>(
        py: Python<'py>,
        p: &Progress,
    ) -> (Bound<'py, PyBytes>, Bound<'py, PyBytes>) {
        let key = HandoffKey::Progress {
            group: p.group.clone(),
            topic: p.topic.clone(),
            partition: p.partition,
        }
        .encode();
        (
            PyBytes::new(py, key.as_bytes()),
            PyBytes::new(py, &handoff::to_json(p)),
        )
    }
}

fn count(state: &mut State, partition: u32, split: Option<u32>) {
    let i = partition as usize;
    if state.records.len() <= i {
        state.records.resize(i + 1, 0);
    }
    state.records[i] += 1;
    if split.is_some() {
        state.split_records += 1;
    }
    state.last_split = split;
}

#[pymethods]
impl ConsumerCore {
    #[new]
    #[pyo3(signature = (topic, group, partitions, *, max_held = 10_000, stall_timeout = 5.0,
        max_metadata_bytes = 4096, history = 32, unknown_epoch_wait = 10.0, max_lease = 120.0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        topic: &str,
        group: &str,
        partitions: u32,
        max_held: usize,
        stall_timeout: f64,
        max_metadata_bytes: usize,
        history: usize,
        unknown_epoch_wait: f64,
        max_lease: f64,
    ) -> PyResult<Self> {
        let cfg = CoreConfig {
            max_held: max_held.max(1),
            stall_timeout: secs(stall_timeout, "stall_timeout")?,
            max_metadata_bytes,
            history: history.max(2),
            unknown_epoch_wait: secs(unknown_epoch_wait, "unknown_epoch_wait")?,
            max_lease: secs(max_lease, "max_lease")?,
        };
        let clock = Clock::Real(Instant::now());
        let mut core = Core::new(topic, group, partitions, cfg);
        core.set_now_ms(clock.now_ms());
        core.publish();
        let lanes = core.lanes();
        Ok(Self {
            state: Mutex::new(State {
                core,
                clock,
                records: Vec::new(),
                split_records: 0,
                last_split: None,
                last_outcome: "none",
                housekeeping_at: Instant::now(),
                pending: VecDeque::new(),
                lanes,
            }),
            topic: topic.to_owned(),
            group: group.to_owned(),
        })
    }

    #[getter]
    fn topic(&self) -> &str {
        &self.topic
    }

    #[getter]
    fn group(&self) -> &str {
        &self.group
    }

    /// Use a caller-set clock from now on: `mono` seconds on a monotonic scale, `now_ms` the wall
    /// clock in milliseconds (replays and tests; the default is the real clocks).
    fn set_clock(&self, mono: f64, now_ms: u64) -> PyResult<()> {
        let mono = secs(mono, "mono")?;
        let mut s = self.lock();
        s.clock = Clock::Manual { mono, now_ms };
        s.core.set_now_ms(now_ms);
        Ok(())
    }

    /// The topic's partition count (it grew).
    fn set_partitions(&self, partitions: u32) {
        let mut s = self.lock();
        let now = s.clock.mono();
        s.core.set_partitions(partitions, now);
    }

    #[getter]
    fn partitions(&self) -> u32 {
        self.lock().core.partitions()
    }

    // ------------------------------------------------------------------ knowledge

    /// An epoch's assignment from the control topic (another topic's is ignored).
    fn on_assignment(&self, assignment: &Bound<'_, PyAssignment>) {
        let a = Arc::clone(&assignment.get().inner);
        let mut s = self.lock();
        let now = s.clock.mono();
        s.core.on_assignment(a, now);
    }

    /// One record of the handoff topic (key, value; `None` value = tombstone): leases, markers,
    /// history and other members' progress. Returns what it was (`"lease"`, `"marker"`,
    /// `"marker_rejected:<reason>"`, `"history"`, `"progress"`, `"removed"`, `"other_topic"`), or
    /// raises `ValueError` with the reason a record did not decode (the caller logs and skips it).
    #[pyo3(signature = (key, value))]
    fn on_handoff(
        &self,
        py: Python<'_>,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> PyResult<String> {
        let entry = py
            .detach(|| handoff::decode(key, value))
            .map_err(PyValueError::new_err)?;
        if *entry.topic() != *self.topic {
            return Ok("other_topic".to_owned());
        }
        let mut s = self.lock();
        let now = s.clock.mono();
        let kind = match entry {
            HandoffEntry::Lease(l) => {
                s.core.on_lease(l, now);
                "lease".to_owned()
            }
            HandoffEntry::History(a) => {
                s.core.on_assignment(a, now);
                "history".to_owned()
            }
            HandoffEntry::Progress(p) => {
                s.core.on_progress(&p, now);
                "progress".to_owned()
            }
            HandoffEntry::Marker(m) => {
                s.core.on_marker(m, now);
                "marker".to_owned()
            }
            HandoffEntry::MarkerRejected { reason, .. } => {
                s.core.on_marker_rejected(reason);
                format!("marker_rejected:{}", reason.as_str())
            }
            HandoffEntry::Removed(k) => {
                if let HandoffKey::Lease { producer, .. } = &k {
                    s.core.on_lease_removed(producer, now);
                }
                "removed".to_owned()
            }
        };
        Ok(kind)
    }

    /// Time passes: leases expire, releases are re-evaluated.
    fn tick(&self) {
        let mut s = self.lock();
        let (now, now_ms) = (s.clock.mono(), s.clock.now_ms());
        s.core.tick(now, now_ms);
    }

    // ------------------------------------------------------------------ ownership

    /// `partition` was assigned with its committed offset (`None`: none) and commit metadata
    /// (`None` or empty: none). Returns a warning for metadata this build does not read (the
    /// partition then starts without skip rules), else `None`.
    #[pyo3(signature = (partition, committed, metadata))]
    fn assign(
        &self,
        partition: u32,
        committed: Option<i64>,
        metadata: Option<&str>,
    ) -> Option<String> {
        let (meta, warning) = match metadata.and_then(CommitMeta::parse) {
            None => (None, None),
            Some(Ok(m)) => (Some(m), None),
            Some(Err(why)) => (None, Some(why)),
        };
        let committed = committed.filter(|&o| o >= 0);
        let mut s = self.lock();
        let (now, now_ms) = (s.clock.mono(), s.clock.now_ms());
        s.core.set_now_ms(now_ms);
        if partition >= s.core.partitions() {
            s.core.set_partitions(partition + 1, now);
        }
        s.core.assign(partition, committed, meta.as_ref(), now);
        drop(s);
        self.purge(partition);
        warning
    }

    /// The progress record `(key, value)` to announce for an owned partition as committed (on
    /// assignment), `None` if not owned.
    fn initial_progress<'py>(
        &self,
        py: Python<'py>,
        partition: u32,
    ) -> Option<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        let p = self.lock().core.initial_progress(partition)?;
        Some(Self::progress_bytes(py, &p))
    }

    /// `partition` was revoked (after its final commit) or lost: its held records are dropped
    /// (the next owner reads them again).
    fn revoke(&self, partition: u32) {
        {
            let mut s = self.lock();
            let now = s.clock.mono();
            s.core.revoke(partition, now);
        }
        self.purge(partition);
    }

    /// Records fetched but not offered yet.
    #[getter]
    fn pending(&self) -> usize {
        self.lock().pending.len()
    }

    /// Fetched records (from the client's `consume`), offered in order by `next` and `batch`.
    fn push(&self, msgs: &Bound<'_, PyList>) {
        let mut s = self.lock();
        s.pending.extend(msgs.iter().map(Bound::unbind));
    }

    fn owns(&self, partition: u32) -> bool {
        self.lock().core.owns(partition)
    }

    fn owned(&self) -> Vec<u32> {
        self.lock().core.owned()
    }

    // ------------------------------------------------------------------ records

    /// The record the application holds is processed.
    fn processed(&self) {
        if self.lock_fast().lanes.processed() {
            self.lock().core.processed();
        }
    }

    /// Before a fetch: the application's previous record is processed, then `True` if a progress
    /// commit is due (commit it, then ask again), else the next released record (it becomes the
    /// application's), else `None` (fetch from Kafka).
    fn take(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        let r = self.prelude(py, true)?;
        if r.bind(py).is_exact_instance_of::<pyo3::types::PyInt>() {
            return Some(PyBool::new(py, true).to_owned().into_any().unbind());
        }
        Some(r)
    }

    /// One step of `DkgConsumer.poll`, the per-record loop in one native call: the previous
    /// record is processed; then `1` if a progress commit is due (`check_progress`), a released
    /// record, `2` if housekeeping is due (see `defer_housekeeping`), else the next fetched record
    /// the protocol lets out: from those already fetched, else from what the client has queued
    /// (`consume(n, 0)`), else one `poll(seconds)` waiting at most `timeout` and never past the
    /// housekeeping time. Returns `None` (nothing fetched), an error event as the client
    /// returned it, the record, or `3` (what was fetched is held, skipped or unowned: ask again).
    #[pyo3(signature = (poll, consume, timeout, check_progress, batch = 500))]
    fn next(
        &self,
        py: Python<'_>,
        poll: &Bound<'_, PyAny>,
        consume: &Bound<'_, PyAny>,
        timeout: f64,
        check_progress: bool,
        batch: usize,
    ) -> PyResult<Py<PyAny>> {
        if let Some(r) = self.prelude(py, check_progress) {
            return Ok(r);
        }
        let wait = {
            let s = self.lock_fast();
            let now = Instant::now();
            if now >= s.housekeeping_at {
                return Ok(code(py, 2));
            }
            (s.housekeeping_at - now)
                .as_secs_f64()
                .min(timeout.max(0.0))
        };
        let mut offered = false;
        loop {
            let next = self.lock_fast().pending.pop_front();
            let msg = match next {
                Some(m) => m.into_bound(py),
                None if offered => return Ok(code(py, 3)),
                None => {
                    // Unlocked: the client's calls run the rebalance callbacks, which drive
                    // this core (and purge what was fetched of their partitions).
                    let queued = consume.call1((batch, 0.0))?;
                    let queued = queued.downcast::<PyList>()?;
                    if queued.is_empty() {
                        let msg = poll.call1((wait,))?;
                        if msg.is_none() {
                            return Ok(msg.unbind());
                        }
                        msg
                    } else {
                        self.lock_fast()
                            .pending
                            .extend(queued.iter().map(Bound::unbind));
                        continue;
                    }
                }
            };
            if !msg.call_method0(intern!(py, "error"))?.is_none() || self.offer(&msg)? {
                return Ok(msg.unbind());
            }
            offered = true;
            // A record that was not handed out can make progress due (C4, C7) first.
            let mut s = self.lock();
            if check_progress && s.core.has_progress_due() {
                return Ok(code(py, 1));
            }
        }
    }

    /// Housekeeping is due again in `seconds` (`next` reports `2` then).
    fn defer_housekeeping(&self, seconds: f64) -> PyResult<()> {
        let d = secs(seconds, "seconds")?;
        self.lock_fast().housekeeping_at = Instant::now() + d;
        Ok(())
    }

    /// Fill a `consume()` batch without fetching: append to `out` (up to `max` records) the
    /// released records and the fetched ones (`push`) the protocol lets out, in order, each
    /// earlier one counting as processed when the next is taken (as successive polls would). An
    /// error event ends the batch (appended). Returns whether a progress commit is due (with
    /// `check_progress`; it ends the batch).
    fn batch(&self, out: &Bound<'_, PyList>, max: usize, check_progress: bool) -> PyResult<bool> {
        let py = out.py();
        while out.len() < max {
            if let Some(r) = self.prelude(py, check_progress) {
                if r.bind(py).is_exact_instance_of::<pyo3::types::PyInt>() {
                    return Ok(true);
                }
                out.append(r)?;
                continue;
            }
            let next = self.lock_fast().pending.pop_front();
            let Some(msg) = next.map(|m| m.into_bound(py)) else {
                break;
            };
            if !msg.call_method0(intern!(py, "error"))?.is_none() {
                out.append(msg)?;
                break;
            }
            if self.offer(&msg)? {
                out.append(msg)?;
            }
        }
        Ok(false)
    }

    /// The next released record without asking about progress (it becomes the application's).
    fn next_ready(&self) -> Option<Py<PyAny>> {
        let mut s = self.lock();
        let (m, partition, split) = s.core.next_ready()?;
        s.lanes.took_from_core();
        count(&mut s, partition, split);
        Some(m)
    }

    /// A data record fetched from Kafka (a confluent-kafka `Message`, or anything with
    /// `partition()`, `offset()`, `key()` and `headers()`): `True` = hand it to the application
    /// now (it becomes the application's record); `False` = held (it comes back from `take`),
    /// skipped (processed by a previous owner) or of a partition not owned (dropped).
    fn offer(&self, msg: &Bound<'_, PyAny>) -> PyResult<bool> {
        let py = msg.py();
        let [n_partition, n_offset, n_key, n_headers] = names(py);
        let partition: u32 = msg.call_method0(n_partition.bind(py))?.extract()?;
        let offset: i64 = msg.call_method0(n_offset.bind(py))?.extract()?;
        let key_obj = msg.call_method0(n_key.bind(py))?;
        let headers = msg.call_method0(n_headers.bind(py))?;
        let epoch = epoch_of_headers(&headers);
        let key: Option<&[u8]> = if key_obj.is_none() {
            None
        } else if let Ok(b) = key_obj.downcast::<PyBytes>() {
            Some(b.as_bytes())
        } else if let Ok(s) = key_obj.downcast::<PyString>() {
            Some(s.to_str()?.as_bytes())
        } else {
            None
        };
        Ok(self.offer_record(partition, offset, key, epoch, msg))
    }

    /// [`ConsumerCore::offer`] with the record's parts given (`epoch`: its `dkg-epoch`, already
    /// read; `msg`: what comes back from `take` if it is held).
    #[pyo3(signature = (partition, offset, key, epoch, msg))]
    fn offer_record(
        &self,
        partition: u32,
        offset: i64,
        key: Option<&[u8]>,
        epoch: Option<u64>,
        msg: &Bound<'_, PyAny>,
    ) -> bool {
        {
            let mut f = self.lock_fast();
            if f.lanes.take(partition, offset, epoch) {
                let split = f.lanes.split_label(partition, key, epoch);
                count(&mut f, partition, split);
                f.last_outcome = "deliver";
                return true;
            }
        }
        let mut guard = self.lock();
        let s = &mut *guard;
        // The label is the record's at arrival (what the core decides by), held or not.
        let split = s.core.label_record(partition, offset, key, epoch);
        let clock = &s.clock;
        let outcome = s.core.on_record(
            Incoming {
                partition,
                offset,
                key,
                epoch,
                msg: || (msg.clone().unbind(), partition, split),
            },
            || clock.mono(),
        );
        let State { core, lanes, .. } = s;
        lanes.refresh(partition, core.lane(partition));
        let (label, deliver) = match outcome {
            Outcome::Deliver => {
                s.lanes.took_from_core();
                count(s, partition, split);
                ("deliver", true)
            }
            Outcome::Held => ("held", false),
            Outcome::Skipped => ("skipped", false),
            Outcome::Unowned => ("unowned", false),
        };
        s.last_outcome = label;
        deliver
    }

    // ------------------------------------------------------------------ commits

    /// Partitions whose drained epoch changed since their last progress commit.
    fn progress_due(&self) -> Vec<u32> {
        self.lock().core.progress_due()
    }

    /// The epochs `partition` drained since the hooks last ran for it (oldest first), marking
    /// them hooked: run `on_epoch` for each before the progress commit.
    fn take_drained_epochs(&self, partition: u32) -> Vec<EpochChange> {
        let mut s = self.lock();
        let owned = s.core.owned();
        let partitions = s.core.partitions();
        s.core
            .take_drained_epochs(partition)
            .into_iter()
            .map(|d| EpochChange {
                prev: d.prev,
                next: d.next,
                partition: d.partition,
                owned: owned.clone(),
                partitions,
            })
            .collect()
    }

    /// What to commit for `partition` now: a `CommitSnapshot`, `None` before its first record,
    /// or the metadata's size in bytes when it is over the limit (then nothing may be committed:
    /// an offset without its passed map would let a next owner re-process records others rely
    /// on being done).
    fn snapshot(&self, py: Python<'_>, partition: u32) -> PyResult<Option<Py<PyAny>>> {
        let snap = self.lock().core.snapshot(partition);
        Ok(match snap {
            None => None,
            Some(Ok(s)) => Some(Py::new(py, CommitSnapshot { inner: s })?.into_any()),
            Some(Err(size)) => Some(size.into_pyobject(py)?.into_any().unbind()),
        })
    }

    /// A partition with nothing fetched whose drained epoch changed through leases only: as
    /// durable as what it started from. Returns the progress record `(key, value)` to announce.
    fn mark_durable<'py>(
        &self,
        py: Python<'py>,
        partition: u32,
    ) -> Option<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        let mut s = self.lock();
        let now = s.clock.mono();
        let p = s.core.mark_durable(partition, now)?;
        Some(Self::progress_bytes(py, &p))
    }

    /// The commit of `snapshot` succeeded: its drained epoch is durable. Returns the progress
    /// record `(key, value)` to announce on the handoff topic (`None`: the partition is no longer
    /// owned).
    fn committed<'py>(
        &self,
        py: Python<'py>,
        snapshot: &Bound<'py, CommitSnapshot>,
    ) -> Option<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        let snap = &snapshot.get().inner;
        let mut s = self.lock();
        if !s.core.owns(snap.partition) {
            return None;
        }
        let now = s.clock.mono();
        s.core.committed(snap.partition, snap.drained, now);
        let p = s.core.progress_record(snap);
        Some(Self::progress_bytes(py, &p))
    }

    // ------------------------------------------------------------------ flow control, state

    /// `(pause, resume)`: partitions over the hold limit, and partitions released enough (or
    /// stalled past the stall timeout).
    fn flow(&self) -> (Vec<u32>, Vec<u32>) {
        let mut s = self.lock();
        let now = s.clock.mono();
        s.core.flow(now)
    }

    /// Partitions (with their held count) resumed past the hold limit since the last call.
    fn take_stalled(&self) -> Vec<(u32, usize)> {
        self.lock().core.take_stalled()
    }

    /// Keys whose split changed since the last call (run `on_split_change` for each).
    fn take_split_changes(&self, py: Python<'_>) -> Vec<SplitChange> {
        self.lock()
            .core
            .take_split_changes()
            .into_iter()
            .map(|c| SplitChange {
                key: PyBytes::new(py, &c.key).unbind(),
                epoch: c.epoch,
                parts: c.parts.to_vec(),
                partition: c.partition,
            })
            .collect()
    }

    /// Hold times (seconds) of records released since the last call.
    fn take_hold_times(&self) -> Vec<f64> {
        self.lock()
            .core
            .take_hold_times()
            .iter()
            .map(Duration::as_secs_f64)
            .collect()
    }

    /// What the core could not trust since the last call: `(unknown_epoch_records,
    /// clamped_leases, {marker reject reason: count})`.
    fn take_anomalies(&self) -> (u64, u64, BTreeMap<&'static str, u64>) {
        let a = self.lock().core.take_anomalies();
        let rejected = MarkerReject::ALL
            .iter()
            .map(|r| (r.as_str(), a.rejected_markers[r.index()]))
            .collect();
        (a.unknown_epoch_records, a.clamped_leases, rejected)
    }

    /// Records held per owned partition.
    fn held_counts(&self) -> Vec<(u32, usize)> {
        self.lock().core.held_counts().collect()
    }

    /// Lowest unprocessed offset per owned partition (`None` before its first record).
    fn positions(&self) -> Vec<(u32, Option<i64>)> {
        self.lock().core.positions().collect()
    }

    /// Records handed to the application, per partition (index = partition).
    fn records(&self) -> Vec<u64> {
        self.lock().records.clone()
    }

    /// Over how many partitions the key of the last record handed out is split in its epoch
    /// (`None`: whole), as the record was labelled when it arrived.
    #[getter]
    fn last_split(&self) -> Option<u32> {
        self.lock().last_split
    }

    /// What the last `offer` decided: `"deliver"`, `"held"`, `"skipped"` (processed by a
    /// previous owner, C11/C12) or `"unowned"`.
    #[getter]
    fn last_outcome(&self) -> &'static str {
        self.lock().last_outcome
    }

    /// Records handed out whose key is split in their epoch.
    #[getter]
    fn split_records(&self) -> u64 {
        self.lock().split_records
    }

    /// The lowest epoch drained on every partition, as this member knows it.
    #[getter]
    fn settled(&self) -> u64 {
        self.lock().core.settled()
    }

    /// The newest epoch known.
    #[getter]
    fn max_epoch(&self) -> u64 {
        self.lock().core.max_epoch()
    }

    /// The newest assignment known.
    fn latest(&self) -> Option<PyAssignment> {
        self.lock().core.latest().map(|a| PyAssignment {
            inner: Arc::clone(a),
        })
    }

    /// Leases whose expiry lies long past, closed ones only once their closing epoch is settled
    /// (`Core::collectable_leases`; tombstone them with their markers): `(lease key, marker
    /// key)` pairs.
    fn expired_leases(&self) -> Vec<(String, String)> {
        let s = self.lock();
        let now_ms = s.clock.now_ms();
        s.core
            .collectable_leases(now_ms)
            .map(|l| {
                let marker = HandoffKey::Marker {
                    topic: l.topic.clone(),
                    producer: l.producer.clone(),
                };
                (HandoffKey::of_lease(l).encode(), marker.encode())
            })
            .collect()
    }
}

impl ConsumerCore {
    /// The start of every fetch: the application's record is processed; then `1` if a progress
    /// commit is due, or the next released record.
    fn prelude(&self, py: Python<'_>, check_progress: bool) -> Option<Py<PyAny>> {
        let tell_core = {
            let mut f = self.lock_fast();
            let tell_core = f.lanes.processed();
            // The core published that nothing is released or due: nothing to ask it.
            if !tell_core && f.lanes.core_idle() {
                return None;
            }
            tell_core
        };
        let mut s = self.lock();
        if tell_core {
            s.core.processed();
        }
        if check_progress && s.core.has_progress_due() {
            return Some(code(py, 1));
        }
        let (m, partition, split) = s.core.next_ready()?;
        s.lanes.took_from_core();
        count(&mut s, partition, split);
        Some(m)
    }

    /// Drop fetched, not yet offered records of `partition` (it was assigned again or revoked:
    /// the client fetches it again from the committed offset).
    fn purge(&self, partition: u32) {
        Python::attach(|py| {
            let mut s = self.lock();
            if s.pending.is_empty() {
                return;
            }
            let p = intern!(py, "partition");
            s.pending.retain(|m| {
                m.bind(py)
                    .call_method0(p)
                    .and_then(|v| v.extract::<u32>())
                    .map_or(true, |q| q != partition)
            });
        });
    }
}

/// Add the consumer's classes to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ConsumerCore>()?;
    m.add_class::<CommitSnapshot>()?;
    m.add_class::<EpochChange>()?;
    m.add_class::<SplitChange>()?;
    Ok(())
}

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
//! partition, offset, key and headers in one native call, through the accessors' C functions when
//! they are confluent-kafka's: [`crate::msgread`]) and come back, when held, as that same object.
//! `DkgConsumer.consume` makes one native call per fetched batch ([`ConsumerCore::released`]):
//! when every record of it is of a quiet partition (the lanes' fast path) the batch itself comes
//! back; `DkgConsumer.poll` one per record ([`ConsumerCore::next`]), over batches drained ahead
//! from the client's queue. Times come from this module's clock (a monotonic origin and the wall clock) unless a
//! test sets them ([`ConsumerCore::set_clock`]).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
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
use crate::consumer_intake::epoch_of_headers;
use crate::consumer_results::{CommitSnapshot, EpochChange, SplitChange};
use crate::msgread::{Field, Reader, read};

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
    /// When the last [`ConsumerCore::next`] began (`DkgConsumer.poll`'s deadline, read only when
    /// the step did not return a record).
    step_started: Instant,
    /// Fetched from the client, not offered yet (a fetch takes what the client has queued).
    pending: VecDeque<Py<PyAny>>,
    /// The fast path (`dkg_kafka_protocol::consumer::lane`, as the Rust consumer's): records of quiet
    /// partitions are handed out without the core, and a fetch asks the core nothing while it
    /// published that it has nothing to hand out or commit.
    lanes: Lanes,
    /// Epochs of this topic's history records on the handoff topic (`assignment/<topic>/<E>`),
    /// for [`ConsumerCore::garbage`] (the Rust driver's `history_keys`).
    history_keys: BTreeSet<u64>,
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
    /// The accessors of the first message type whose accessors are C functions (confluent-kafka's
    /// `Message`), called directly ([`crate::msgread`]).
    reader: OnceLock<Reader>,
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
                step_started: Instant::now(),
                pending: VecDeque::new(),
                lanes,
                history_keys: BTreeSet::new(),
            }),
            topic: topic.to_owned(),
            group: group.to_owned(),
            reader: OnceLock::new(),
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
                s.history_keys.insert(a.epoch());
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
                match &k {
                    HandoffKey::Lease { producer, .. } => s.core.on_lease_removed(producer, now),
                    HandoffKey::Assignment { epoch, .. } => {
                        s.history_keys.remove(epoch);
                    }
                    _ => {}
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
    /// the protocol lets out: from those already fetched, else from what `client` (a
    /// confluent-kafka `Consumer`) has queued (`client.consume(n, 0)`), else one
    /// `client.poll(seconds)` waiting at most `timeout` (`None` or negative: an hour) and never
    /// past the housekeeping time. Returns `None` (nothing fetched), an error event as the client
    /// returned it, the record, or `3` (what was fetched is held, skipped or unowned: ask again).
    /// `step_elapsed` tells how long ago the step began.
    #[pyo3(signature = (client, timeout, check_progress, batch = 500))]
    fn next(
        &self,
        py: Python<'_>,
        client: &Bound<'_, PyAny>,
        timeout: Option<f64>,
        check_progress: bool,
        batch: usize,
    ) -> PyResult<Py<PyAny>> {
        let timeout = timeout.filter(|t| *t >= 0.0).unwrap_or(3600.0);
        // The prelude's lane part, the housekeeping time and the first fetched record under one
        // lock (the common step: the previous record came through its lane, the core is idle).
        let (mut next, wait) = {
            let mut f = self.lock_fast();
            let now = Instant::now();
            f.step_started = now;
            let tell_core = f.lanes.processed();
            if tell_core || !f.lanes.core_idle() {
                drop(f);
                if let Some(r) = self.prelude_core(py, check_progress, tell_core) {
                    return Ok(r);
                }
                f = self.lock_fast();
            }
            if now >= f.housekeeping_at {
                return Ok(code(py, 2));
            }
            let wait = (f.housekeeping_at - now).as_secs_f64().min(timeout);
            (f.pending.pop_front(), wait)
        };
        let mut offered = false;
        loop {
            let msg = match next.take() {
                Some(m) => m.into_bound(py),
                None if offered => return Ok(code(py, 3)),
                None => {
                    // Unlocked: the client's calls run the rebalance callbacks, which drive
                    // this core (and purge what was fetched of their partitions).
                    let queued = client
                        .getattr(intern!(py, "consume"))?
                        .call1((batch, 0.0))?;
                    let queued = queued.downcast::<PyList>()?;
                    if queued.is_empty() {
                        let msg = client.getattr(intern!(py, "poll"))?.call1((wait,))?;
                        if msg.is_none() {
                            return Ok(msg.unbind());
                        }
                        msg
                    } else {
                        let mut f = self.lock_fast();
                        f.pending.extend(queued.iter().map(Bound::unbind));
                        next = f.pending.pop_front();
                        continue;
                    }
                }
            };
            let reader = self.reader_of(&msg);
            if !read(reader, &msg, Field::Error)?.is_none() || self.offer_with(&msg, reader)? {
                return Ok(msg.unbind());
            }
            offered = true;
            // A record that was not handed out can make progress due (C4, C7) first.
            if check_progress && self.lock().core.has_progress_due() {
                return Ok(code(py, 1));
            }
            next = self.lock_fast().pending.pop_front();
        }
    }

    /// Seconds since the last `next` began.
    #[getter]
    fn step_elapsed(&self) -> f64 {
        self.lock_fast().step_started.elapsed().as_secs_f64()
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
            if let Some(reader) = self.reader.get()
                && self.take_quiet_pending(out, max, reader)? > 0
            {
                continue;
            }
            let next = self.lock_fast().pending.pop_front();
            let Some(msg) = next.map(|m| m.into_bound(py)) else {
                break;
            };
            let reader = self.reader_of(&msg);
            if !read(reader, &msg, Field::Error)?.is_none() {
                out.append(msg)?;
                break;
            }
            if self.offer_with(&msg, reader)? {
                out.append(msg)?;
            }
        }
        Ok(false)
    }

    /// One `DkgConsumer.consume` step: `push(fetched)` (when given) then `batch` into a new list
    /// of at most `max` records, returned; `None` when a progress commit is due (with
    /// `check_progress`) before any record could be added (commit, then call again without
    /// `fetched`). When nothing was pending or released, the previous record came through a
    /// lane, and every fetched record is of a quiet partition ([`Lanes::take`]), the result is
    /// `fetched` itself: no list built, the core not asked.
    #[pyo3(signature = (fetched, max, check_progress))]
    fn released<'py>(
        &self,
        py: Python<'py>,
        fetched: Option<Bound<'py, PyList>>,
        max: usize,
        check_progress: bool,
    ) -> PyResult<Option<Bound<'py, PyList>>> {
        let max = max.max(1);
        let out = match fetched {
            None => PyList::empty(py),
            Some(list) => {
                let quiet = list.len() <= max && self.lock_fast().pending.is_empty();
                let reader = match list.get_item(0) {
                    Ok(first) if quiet => self.reader_of(&first),
                    _ => None,
                };
                match reader {
                    None => {
                        self.push(&list);
                        PyList::empty(py)
                    }
                    Some(reader) => match self.prelude(py, check_progress) {
                        Some(r) => {
                            self.push(&list);
                            if r.bind(py).is_exact_instance_of::<pyo3::types::PyInt>() {
                                return Ok(None);
                            }
                            PyList::new(py, [r])?
                        }
                        None => {
                            let taken = self.take_quiet(&list, reader)?;
                            if taken == list.len() {
                                return Ok(Some(list));
                            }
                            let rest = list.get_slice(taken, list.len());
                            self.lock_fast()
                                .pending
                                .extend(rest.iter().map(Bound::unbind));
                            list.get_slice(0, taken)
                        }
                    },
                }
            }
        };
        let due = self.batch(&out, max, check_progress)?;
        Ok(if due && out.is_empty() {
            None
        } else {
            Some(out)
        })
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
        self.offer_with(msg, self.reader_of(msg))
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
    /// on being done). A snapshot whose metadata leaves out its skip window is counted (see
    /// `take_anomalies`) once per call: build one per commit.
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
    /// clamped_leases, {marker reject reason: count}, windows_left_out)` (the last: commit
    /// snapshots whose metadata left out the skip window, C7).
    fn take_anomalies(&self) -> (u64, u64, BTreeMap<&'static str, u64>, u64) {
        let a = self.lock().core.take_anomalies();
        let rejected = MarkerReject::ALL
            .iter()
            .map(|r| (r.as_str(), a.rejected_markers[r.index()]))
            .collect();
        (
            a.unknown_epoch_records,
            a.clamped_leases,
            rejected,
            a.windows_left_out,
        )
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

    /// The handoff keys to tombstone (spec 9.1, "Lease garbage collection"; the Rust driver's
    /// `collect_garbage`): each lease whose expiry lies long past, closed ones only once their
    /// closing epoch is settled (`Core::collectable_leases`), after its producer's marker; then
    /// the history records below the epochs every member keeps (`Core::history_gc_floor`).
    fn garbage(&self) -> Vec<String> {
        let s = self.lock();
        let now_ms = s.clock.now_ms();
        let floor = s.core.history_gc_floor();
        s.core
            .collectable_leases(now_ms)
            .flat_map(|l| {
                let marker = HandoffKey::Marker {
                    topic: l.topic.clone(),
                    producer: l.producer.clone(),
                };
                [marker.encode(), HandoffKey::of_lease(l).encode()]
            })
            .chain(s.history_keys.range(..floor).map(|&epoch| {
                HandoffKey::Assignment {
                    topic: self.topic.clone(),
                    epoch,
                }
                .encode()
            }))
            .collect()
    }
}

/// What the lanes need of a fetched record, read without the lock.
struct Fields<'py> {
    partition: u32,
    offset: i64,
    epoch: Option<u64>,
    /// Read only when some epoch kept splits a key ([`Lanes::labels_keys`]).
    key: Option<Bound<'py, PyAny>>,
}

/// `msg`'s fields through `reader`; `None` for an error event or a message `reader` does not
/// read (the per-record path takes it).
fn read_fields<'py>(
    msg: &Bound<'py, PyAny>,
    reader: &Reader,
    with_key: bool,
) -> PyResult<Option<Fields<'py>>> {
    if !reader.reads(msg) || !reader.call(msg, Field::Error)?.is_none() {
        return Ok(None);
    }
    Ok(Some(Fields {
        partition: reader.call(msg, Field::Partition)?.extract()?,
        offset: reader.call(msg, Field::Offset)?.extract()?,
        epoch: epoch_of_headers(&reader.call(msg, Field::Headers)?),
        key: if with_key {
            Some(reader.call(msg, Field::Key)?)
        } else {
            None
        },
    }))
}

/// Hand a record read by [`read_fields`] out through its partition's lane if the gate admits it
/// (the fast lock held): `false` if not, or if its key is needed and was not read (nothing changed
/// then but, with `after_lane`, the previous record, taken through a lane, now processed, as the
/// next prelude would do).
fn take_fields(f: &mut State, r: &Fields<'_>, with_key: bool, after_lane: bool) -> PyResult<bool> {
    let labels = f.lanes.labels_keys();
    if labels && !with_key {
        return Ok(false);
    }
    if after_lane {
        // The previous record, taken through its lane (the core has nothing to hear).
        f.lanes.processed();
    }
    if !f.lanes.take(r.partition, r.offset, r.epoch) {
        return Ok(false);
    }
    let split = match (&r.key, labels) {
        (Some(key), true) => f.lanes.split_label(r.partition, key_bytes(key)?, r.epoch),
        _ => None,
    };
    count(f, r.partition, split);
    f.last_outcome = "deliver";
    Ok(true)
}

/// A record's key as bytes (`str` keys as their UTF-8; anything else: none).
fn key_bytes<'a>(key: &'a Bound<'_, PyAny>) -> PyResult<Option<&'a [u8]>> {
    Ok(if key.is_none() {
        None
    } else if let Ok(b) = key.downcast::<PyBytes>() {
        Some(b.as_bytes())
    } else if let Ok(s) = key.downcast::<PyString>() {
        Some(s.to_str()?.as_bytes())
    } else {
        None
    })
}

impl ConsumerCore {
    /// The direct reader of `msg`'s accessors, resolved from the first message that has one
    /// (`None`: `msg` is read through its methods).
    fn reader_of(&self, msg: &Bound<'_, PyAny>) -> Option<&Reader> {
        if let Some(r) = self.reader.get() {
            return Some(r);
        }
        let r = Reader::resolve(msg)?;
        Some(self.reader.get_or_init(|| r))
    }

    /// [`ConsumerCore::offer`] with `msg`'s reader.
    fn offer_with(&self, msg: &Bound<'_, PyAny>, reader: Option<&Reader>) -> PyResult<bool> {
        let partition: u32 = read(reader, msg, Field::Partition)?.extract()?;
        let offset: i64 = read(reader, msg, Field::Offset)?.extract()?;
        let key_obj = read(reader, msg, Field::Key)?;
        let epoch = epoch_of_headers(&read(reader, msg, Field::Headers)?);
        let key = key_bytes(&key_obj)?;
        Ok(self.offer_record(partition, offset, key, epoch, msg))
    }

    /// How many of `list`'s first records the lanes hand out without the core (quiet partitions,
    /// [`Lanes::take`]), each earlier one processed when the next is taken, as `batch` would:
    /// stops at the first error event, record a gate does not admit, or message the reader does
    /// not read. The caller has run the prelude of the first record (nothing released or due).
    ///
    /// The records are read first, without the lock (confluent-kafka's `headers()` allocates
    /// objects the garbage collector tracks, so a collection, and whatever finalizers it runs, can
    /// start there), then decided under one lock.
    fn take_quiet(&self, list: &Bound<'_, PyList>, reader: &Reader) -> PyResult<usize> {
        let with_key = self.lock_fast().lanes.labels_keys();
        let n = list.len();
        let mut fields = Vec::with_capacity(n);
        for i in 0..n {
            match read_fields(&list.get_item(i)?, reader, with_key)? {
                Some(r) => fields.push(r),
                None => break,
            }
        }
        let mut f = self.lock_fast();
        for (i, r) in fields.iter().enumerate() {
            if !take_fields(&mut f, r, with_key, i > 0)? {
                return Ok(i);
            }
        }
        Ok(fields.len())
    }

    /// After a prelude that found nothing to ask the core: move the fetched records at the head of
    /// `pending` that their lanes admit to `out` (up to `max` in all), as `batch`'s per-record
    /// loop would (each read without the lock, as in `take_quiet`). Returns how many.
    fn take_quiet_pending(
        &self,
        out: &Bound<'_, PyList>,
        max: usize,
        reader: &Reader,
    ) -> PyResult<usize> {
        let py = out.py();
        let mut taken = 0;
        while out.len() < max {
            let (front, with_key) = {
                let mut f = self.lock_fast();
                let with_key = f.lanes.labels_keys();
                (f.pending.front().map(|m| m.clone_ref(py)), with_key)
            };
            let Some(front) = front else {
                break;
            };
            let msg = front.bind(py);
            let Some(r) = read_fields(msg, reader, with_key)? else {
                break;
            };
            {
                let mut f = self.lock_fast();
                if !f.pending.front().is_some_and(|m| m.is(&front))
                    || !take_fields(&mut f, &r, with_key, taken > 0)?
                {
                    break;
                }
                f.pending.pop_front()
            };
            out.append(msg)?;
            taken += 1;
        }
        Ok(taken)
    }

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
        self.prelude_core(py, check_progress, tell_core)
    }

    /// The prelude's part in the core: tell it the application's record is processed (when it
    /// handed it out), then `1` if a progress commit is due, or the next released record.
    fn prelude_core(
        &self,
        py: Python<'_>,
        check_progress: bool,
        tell_core: bool,
    ) -> Option<Py<PyAny>> {
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

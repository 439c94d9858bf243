//! `dkg_kafka._native`: the DKG pure core for Python (PyO3).
//!
//! What a Python producer needs to place keys exactly where the Rust and Java producers do, taken
//! from the Rust core itself rather than rewritten: the assignment document's decoder and
//! validation ([`Assignment::from_json`]), its lookup, Kafka's murmur2 placement
//! ([`kafka_partition`]), and the per-topic [`Placement`] the Python `Router` swaps in and out
//! (lookup or fallback plus the route and partition counters, in one call per record).
//!
//! The wire rules are those of `docs/spec.md` (format `dkg.assignment`, version 1); PyO3's guide
//! (<https://pyo3.rs>) for the binding conventions. The lookup keeps the GIL: it takes tens of
//! nanoseconds, less than releasing and re-taking the GIL would; decoding a document (up to 8 MiB)
//! releases it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use dkg_kafka_core::{Assignment, BucketHash, Error, Route, kafka_partition, murmur2};
use pyo3::create_exception;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

create_exception!(
    _native,
    AssignmentError,
    PyValueError,
    "An assignment document was rejected. `.reason` is the reject reason label of the spec \
     (`oversize`, `malformed_json`, `unsupported_version`, `out_of_range`, `invalid`), the `reason` \
     label of `dkg_producer_assignments_rejected_total`."
);

mod book;
mod consumer;
mod consumer_intake;
mod consumer_results;
mod fastcall;
mod msgread;
mod produce;
mod table;

/// `AssignmentError(message)` with `.reason` = the label the control topic's book gives `data`
/// (`invalid` for a valid retraction or generation document: not an assignment).
fn assignment_error(py: Python<'_>, e: &Error, data: &[u8]) -> PyErr {
    let err = AssignmentError::new_err(e.to_string());
    let reason = py.detach(|| book::decode_reason(data));
    match err.value(py).setattr("reason", reason) {
        Ok(()) => err,
        Err(set_failed) => set_failed,
    }
}

const fn route_label(route: Route) -> &'static str {
    match route {
        Route::Heavy => "heavy",
        Route::Bucket => "bucket",
        Route::Split => "split",
    }
}

/// The bytes of every item of `keys` (an iterable of `bytes`), or `TypeError` naming the first
/// item that is not `bytes`.
fn for_each_key(keys: &Bound<'_, PyAny>, mut f: impl FnMut(&[u8])) -> PyResult<()> {
    for (i, item) in keys.try_iter()?.enumerate() {
        let item = item?;
        let bytes = item.downcast::<PyBytes>().map_err(|_| {
            PyTypeError::new_err(format!(
                "keys[{i}] must be bytes, not {}",
                item.get_type()
                    .name()
                    .map_or_else(|_| "?".to_owned(), |n| n.to_string())
            ))
        })?;
        f(bytes.as_bytes());
    }
    Ok(())
}

/// A validated, immutable DKG assignment (format `dkg.assignment` v1) and its O(1) lookup.
#[pyclass(name = "Assignment", module = "dkg_kafka._native", frozen)]
#[derive(Debug)]
struct PyAssignment {
    inner: Arc<Assignment>,
}

#[pymethods]
impl PyAssignment {
    /// Decode and validate a document; raises `AssignmentError` (with `.reason`) if it is invalid.
    #[staticmethod]
    fn from_json(py: Python<'_>, data: &[u8]) -> PyResult<Self> {
        match py.detach(|| Assignment::from_json(data)) {
            Ok(a) => Ok(Self { inner: Arc::new(a) }),
            Err(e) => Err(assignment_error(py, &e, data)),
        }
    }

    /// The compact JSON document (what the sampler publishes).
    fn to_json<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_json())
    }

    /// The partition of `key`. Never raises for `bytes`; `TypeError` for anything else.
    fn partition_for(&self, key: &[u8]) -> u32 {
        self.inner.partition_for(key)
    }

    /// `(partition, route)` of `key`, route `"heavy"`, `"bucket"` or `"split"` (a split key: each
    /// call, like `partition_for`, takes the next partition of its schedule, spec 4.6).
    fn route(&self, key: &[u8]) -> (u32, &'static str) {
        let (partition, route) = self.inner.route(key);
        (partition, route_label(route))
    }

    /// The partitions of many keys at once (one call instead of one per key).
    fn partition_many(&self, keys: &Bound<'_, PyAny>) -> PyResult<Vec<u32>> {
        let mut out = Vec::new();
        for_each_key(keys, |k| out.push(self.inner.partition_for(k)))?;
        Ok(out)
    }

    /// The parts of `key` as `[(partition, weight), ...]` if it is a split key of this document,
    /// else `None`. Does not advance the key's schedule.
    fn split_of(&self, key: &[u8]) -> Option<Vec<(u32, u32)>> {
        self.inner
            .split_of(key)
            .map(|parts| parts.iter().map(|p| (p.partition, p.weight)).collect())
    }

    /// Whether any heavy key is split (the document is then format version 2).
    #[getter]
    fn has_split_keys(&self) -> bool {
        self.inner.has_split_keys()
    }

    /// The bucket of `key` (`to_positive(murmur2_seeded(key, seed)) % buckets`).
    fn bucket(&self, key: &[u8]) -> u32 {
        self.inner.bucket(key)
    }

    #[getter]
    fn topic(&self) -> &str {
        self.inner.topic()
    }

    #[getter]
    fn partitions(&self) -> u32 {
        self.inner.partitions()
    }

    #[getter]
    fn epoch(&self) -> u64 {
        self.inner.epoch()
    }

    #[getter]
    fn buckets(&self) -> u32 {
        self.inner.buckets()
    }

    /// The bucket table: bucket -> partition.
    #[getter]
    fn table(&self) -> Vec<u32> {
        self.inner.table().to_vec()
    }

    /// The bucket hash as `(function, seed)`, e.g. `("murmur2", 625341585)`.
    #[getter]
    fn bucket_hash(&self) -> (&'static str, u32) {
        match self.inner.bucket_hash() {
            BucketHash::Murmur2 { seed } => ("murmur2", seed),
        }
    }

    /// The heavy keys as `(key, partition, weight)` tuples (a split key's partition is its first
    /// part's; see `split_of`).
    #[getter]
    fn heavy<'py>(&self, py: Python<'py>) -> Vec<(Bound<'py, PyBytes>, u32, u64)> {
        self.inner
            .heavy()
            .iter()
            .map(|h| (PyBytes::new(py, &h.key), h.partition, h.weight))
            .collect()
    }

    #[getter]
    fn created_at_ms(&self) -> u64 {
        self.inner.created_at_ms()
    }

    #[getter]
    fn predicted_load(&self) -> Vec<f64> {
        self.inner.predicted_load().to_vec()
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .downcast::<Self>()
            .is_ok_and(|o| *o.get().inner == *self.inner)
    }

    fn __hash__(&self) -> u64 {
        // Equal documents have equal (topic, epoch); collisions only cost a comparison.
        u64::from(murmur2(self.inner.topic().as_bytes())) ^ self.inner.epoch()
    }

    fn __repr__(&self) -> String {
        format!(
            "Assignment(topic={:?}, epoch={}, partitions={}, buckets={}, heavy={})",
            self.inner.topic(),
            self.inner.epoch(),
            self.inner.partitions(),
            self.inner.buckets(),
            self.inner.heavy().len()
        )
    }
}

/// Records routed for one topic, by route and by partition; read by the metrics at scrape time.
///
/// Atomics, so concurrent `produce()` calls count without a Python lock. The per-partition
/// counts live in arrays that only ever get added: a [`Placement`] takes the newest (long enough
/// for its partition count) once, so counting a record takes no lock; a partition count increase
/// adds a longer array and a scrape sums them all (Kafka partition counts only grow, so there are
/// few).
#[pyclass(module = "dkg_kafka._native", frozen)]
#[derive(Debug, Default)]
struct RouteCounters {
    heavy: AtomicU64,
    bucket: AtomicU64,
    split: AtomicU64,
    fallback: AtomicU64,
    /// Fallback records whose partition the client chose (the topic's partition count was not known
    /// yet); also counted in `fallback`.
    unplaced: AtomicU64,
    /// Per partition, index = partition; the last array is the longest.
    partitions: RwLock<Vec<Arc<[AtomicU64]>>>,
}

impl RouteCounters {
    fn count(&self, route: Option<Route>) {
        let by_route = match route {
            Some(Route::Heavy) => &self.heavy,
            Some(Route::Bucket) => &self.bucket,
            Some(Route::Split) => &self.split,
            None => &self.fallback,
        };
        by_route.fetch_add(1, Ordering::Relaxed);
    }

    /// A per-partition array with at least `partitions` counters.
    fn partition_counters(&self, partitions: u32) -> Arc<[AtomicU64]> {
        let want = partitions as usize;
        {
            let arrays = self.partitions.read().unwrap_or_else(|p| p.into_inner());
            if let Some(last) = arrays.last().filter(|a| a.len() >= want) {
                return Arc::clone(last);
            }
        }
        let mut arrays = self.partitions.write().unwrap_or_else(|p| p.into_inner());
        match arrays.last().filter(|a| a.len() >= want) {
            Some(last) => Arc::clone(last),
            None => {
                let array: Arc<[AtomicU64]> = (0..want).map(|_| AtomicU64::new(0)).collect();
                arrays.push(Arc::clone(&array));
                array
            }
        }
    }
}

#[pymethods]
impl RouteCounters {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    /// Count one keyed record left to the client's partitioner (partition count unknown).
    fn count_unplaced(&self) {
        self.fallback.fetch_add(1, Ordering::Relaxed);
        self.unplaced.fetch_add(1, Ordering::Relaxed);
    }

    /// `{"heavy": n, "bucket": n, "split": n, "fallback": n}`.
    fn routes(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("heavy", self.heavy.load(Ordering::Relaxed)),
            ("bucket", self.bucket.load(Ordering::Relaxed)),
            ("split", self.split.load(Ordering::Relaxed)),
            ("fallback", self.fallback.load(Ordering::Relaxed)),
        ]
    }

    /// Records per partition (index = partition).
    fn per_partition(&self) -> Vec<u64> {
        let arrays = self.partitions.read().unwrap_or_else(|p| p.into_inner());
        let mut out = vec![0; arrays.last().map_or(0, |a| a.len())];
        for array in arrays.iter() {
            for (total, c) in out.iter_mut().zip(array.iter()) {
                *total += c.load(Ordering::Relaxed);
            }
        }
        out
    }

    /// Fallback records placed by the client because the partition count was not known.
    #[getter]
    fn unplaced(&self) -> u64 {
        self.unplaced.load(Ordering::Relaxed)
    }
}

/// Which records carry the `dkg-epoch` header (spec section 8; the Rust producer's `EpochHeader`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stamp {
    /// Records of keys whose partition changed in the topic's latest epoch transition.
    Moved,
    /// Every record placed by the heavy or bucket route.
    All,
    /// None.
    Off,
}

/// Where keys lived before the current assignment was adopted (for [`Stamp::Moved`]).
#[derive(Debug)]
enum Before {
    /// Not known (the first assignment read at start-up): nothing counts as moved.
    Unknown,
    /// Kafka's default placement (no assignment was in effect).
    Hash,
    /// The previous assignment.
    Assignment(Arc<Assignment>),
}

/// How one topic's keyed records are placed right now: the topic's partition count, its current
/// assignment, if any, and where keys lived before it. Immutable: the router swaps in a new one
/// when any of them changes, so a concurrent `produce()` sees one consistent state (a record is
/// placed, and its move judged, by one whole assignment, never a mix).
///
/// The assignment is in effect only while its `partitions` equals the topic's; otherwise (and
/// without an assignment) keys go to Kafka's default murmur2 placement over the topic's partitions.
#[pyclass(module = "dkg_kafka._native", frozen)]
#[derive(Debug)]
pub(crate) struct Placement {
    assignment: Option<Py<PyAssignment>>,
    effective: Option<Arc<Assignment>>,
    partitions: u32,
    counters: Py<RouteCounters>,
    /// The counters' per-partition array for this placement (at least `partitions` long).
    partition_counts: Arc<[AtomicU64]>,
    stamp: Stamp,
    before: Before,
    /// The `dkg-epoch` header value: the assignment's epoch in decimal.
    epoch_header: Option<Py<PyBytes>>,
}

impl Placement {
    #[inline]
    fn locate(&self, key: &[u8]) -> (u32, Option<Route>) {
        match &self.effective {
            Some(a) => {
                let (partition, route) = a.route(key);
                (partition, Some(route))
            }
            None => (kafka_partition(key, self.partitions), None),
        }
    }

    /// The partition of `key`, counted by route and partition, and its `dkg-epoch` header value
    /// if the record carries one (only records placed by the assignment can).
    #[inline]
    pub(crate) fn place_counted(&self, key: &[u8]) -> (u32, Option<&Py<PyBytes>>) {
        let (partition, route) = self.locate(key);
        self.count(partition, route);
        let header = match &self.epoch_header {
            Some(h) if route.is_some() && self.stamped(key, partition) => Some(h),
            _ => None,
        };
        (partition, header)
    }

    #[inline]
    fn count(&self, partition: u32, route: Option<Route>) {
        self.counters.get().count(route);
        if let Some(c) = self.partition_counts.get(partition as usize) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Whether a record of `key` placed on `partition` by the assignment carries `dkg-epoch`.
    #[inline]
    fn stamped(&self, key: &[u8], partition: u32) -> bool {
        match self.stamp {
            Stamp::Off => false,
            Stamp::All => true,
            Stamp::Moved => match &self.before {
                Before::Unknown => false,
                Before::Assignment(b) if b.partitions() == self.partitions => {
                    b.partition_for(key) != partition
                }
                Before::Hash | Before::Assignment(_) => {
                    kafka_partition(key, self.partitions) != partition
                }
            },
        }
    }
}

#[pymethods]
impl Placement {
    /// `previous` is the assignment in effect before `assignment` was adopted; `previous_known`
    /// false means the predecessor is unknown (the first assignment read at start-up);
    /// `epoch_header` is `"moved"` (default), `"all"` or `"off"`.
    #[new]
    #[pyo3(signature = (partitions, assignment, counters, *, previous = None, previous_known = false, epoch_header = "moved"))]
    fn new(
        py: Python<'_>,
        partitions: u32,
        assignment: Option<Bound<'_, PyAssignment>>,
        counters: Bound<'_, RouteCounters>,
        previous: Option<Bound<'_, PyAssignment>>,
        previous_known: bool,
        epoch_header: &str,
    ) -> PyResult<Self> {
        if partitions == 0 {
            return Err(PyValueError::new_err("partitions must be at least 1"));
        }
        let stamp = match epoch_header {
            "moved" => Stamp::Moved,
            "all" => Stamp::All,
            "off" => Stamp::Off,
            other => {
                return Err(PyValueError::new_err(format!(
                    "epoch_header must be \"moved\", \"all\" or \"off\", not {other:?}"
                )));
            }
        };
        let before = match previous {
            Some(b) => Before::Assignment(Arc::clone(&b.get().inner)),
            None if previous_known => Before::Hash,
            None => Before::Unknown,
        };
        let partition_counts = counters.get().partition_counters(partitions);
        let effective = assignment
            .as_ref()
            .map(|a| Arc::clone(&a.get().inner))
            .filter(|a| a.partitions() == partitions);
        let epoch_header = effective
            .as_ref()
            .map(|a| PyBytes::new(py, a.epoch().to_string().as_bytes()).unbind());
        Ok(Self {
            assignment: assignment.map(Bound::unbind),
            effective,
            partitions,
            counters: counters.unbind(),
            partition_counts,
            stamp,
            before,
            epoch_header,
        })
    }

    /// The partition of `key`, counted by route and partition. Never raises for `bytes`.
    fn place(&self, key: &[u8]) -> u32 {
        let (partition, route) = self.locate(key);
        self.count(partition, route);
        partition
    }

    /// `(partition, dkg-epoch header value or None)` of `key`, counted like [`Placement::place`].
    /// Only records placed by the assignment (heavy or bucket route) can carry the header.
    fn place_stamped(&self, py: Python<'_>, key: &[u8]) -> (u32, Option<Py<PyBytes>>) {
        let (partition, header) = self.place_counted(key);
        (partition, header.map(|h| h.clone_ref(py)))
    }

    /// `(partition, route)` of `key` without counting it; route `"heavy"`, `"bucket"` or
    /// `"fallback"`.
    fn route(&self, key: &[u8]) -> (u32, &'static str) {
        let (partition, route) = self.locate(key);
        (partition, route.map_or("fallback", route_label))
    }

    /// The partitions of many keys (not counted).
    fn place_many(&self, keys: &Bound<'_, PyAny>) -> PyResult<Vec<u32>> {
        let mut out = Vec::new();
        for_each_key(keys, |k| out.push(self.locate(k).0))?;
        Ok(out)
    }

    /// The topic's partition count.
    #[getter]
    fn partitions(&self) -> u32 {
        self.partitions
    }

    /// The topic's current assignment (in effect or waiting for the partition counts to match).
    #[getter]
    fn assignment(&self, py: Python<'_>) -> Option<Py<PyAssignment>> {
        self.assignment.as_ref().map(|a| a.clone_ref(py))
    }

    /// Whether the assignment routes records (it exists and its partition count is the topic's).
    #[getter]
    fn in_effect(&self) -> bool {
        self.effective.is_some()
    }

    #[getter]
    fn counters(&self, py: Python<'_>) -> Py<RouteCounters> {
        self.counters.clone_ref(py)
    }
}

/// Kafka's murmur2 of `data` as Java's `Utils.murmur2` returns it (a signed 32-bit int).
#[pyfunction(name = "murmur2")]
fn py_murmur2(data: &[u8]) -> i32 {
    // Java's int carries the same bits.
    i32::from_ne_bytes(murmur2(data).to_ne_bytes())
}

/// Whether a librdkafka setting is connection-level, so the control topic's reader inherits it
/// (`dkg_kafka_protocol::connection`: the one list, shared with the Rust glue).
#[pyfunction]
fn is_connection_setting(key: &str) -> bool {
    dkg_kafka_protocol::connection::is_connection_setting(key)
}

/// Kafka's default placement of a keyed record: `to_positive(murmur2(key)) % partitions`.
#[pyfunction(name = "kafka_partition")]
fn py_kafka_partition(key: &[u8], partitions: u32) -> PyResult<u32> {
    if partitions == 0 {
        return Err(PyValueError::new_err("partitions must be at least 1"));
    }
    Ok(kafka_partition(key, partitions))
}

/// FNV-1a 64 over each partition as 4 bytes little-endian, in order, as 16 hex digits (the
/// digest of `spec/vectors/random.json`).
#[pyfunction]
fn fnv1a64_partitions(partitions: Vec<u32>) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in partitions {
        for byte in p.to_le_bytes() {
            h ^= u64::from(byte);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

/// The first `count` keys of the spec's splitmix64 key stream for `seed`
/// (`spec/vectors/README.md`): the keys of the random cross-language cases.
#[pyfunction]
fn spec_random_keys<'py>(py: Python<'py>, seed: u64, count: usize) -> PyResult<Bound<'py, PyList>> {
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut key = Vec::with_capacity(72);
    let keys = (0..count).map(|_| {
        let len = (next() % 65) as usize;
        key.clear();
        for _ in 0..len.div_ceil(8) {
            key.extend_from_slice(&next().to_le_bytes());
        }
        key.truncate(len);
        PyBytes::new(py, &key)
    });
    PyList::new(py, keys.collect::<Vec<_>>())
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("AssignmentError", m.py().get_type::<AssignmentError>())?;
    m.add_class::<PyAssignment>()?;
    m.add_class::<RouteCounters>()?;
    m.add_class::<Placement>()?;
    m.add_class::<produce::ProducerCore>()?;
    consumer::register(m)?;
    fastcall::install(m.py())?;
    m.add_class::<table::PlacementTable>()?;
    m.add_class::<book::PyAssignmentBook>()?;
    m.add_class::<book::PyControlUpdate>()?;
    m.add(
        "REJECT_REASONS",
        PyTuple::new(m.py(), book::reject_reasons())?,
    )?;
    m.add_function(wrap_pyfunction!(py_murmur2, m)?)?;
    m.add_function(wrap_pyfunction!(py_kafka_partition, m)?)?;
    m.add_function(wrap_pyfunction!(is_connection_setting, m)?)?;
    m.add_function(wrap_pyfunction!(fnv1a64_partitions, m)?)?;
    m.add_function(wrap_pyfunction!(spec_random_keys, m)?)?;
    Ok(())
}

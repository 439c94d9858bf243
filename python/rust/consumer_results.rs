//! The values the consumer core hands to Python: commits to make, drained epochs (the `on_epoch`
//! hook's argument) and split changes (the `on_split_change` hook's argument).

use std::sync::Arc;

use dkg_kafka_core::Assignment;
use dkg_kafka_protocol::consumer::core::Snapshot;
use dkg_kafka_protocol::consumer::history::{partition_under, split_under};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::PyAssignment;

/// A commit to make: offset (lowest unprocessed) and metadata (the passed map) of one partition;
/// after it succeeded, [`ConsumerCore::committed`] gives the progress record to announce.
#[pyclass(module = "dkg_kafka._native", frozen)]
#[derive(Debug)]
pub(crate) struct CommitSnapshot {
    pub(crate) inner: Snapshot,
}

#[pymethods]
impl CommitSnapshot {
    #[getter]
    fn partition(&self) -> u32 {
        self.inner.partition
    }

    /// The offset to commit: the lowest offset not processed yet.
    #[getter]
    fn offset(&self) -> i64 {
        self.inner.offset
    }

    /// The commit metadata (the passed map, `docs/spec.md` 9.3 C7).
    #[getter]
    fn metadata(&self) -> &str {
        &self.inner.metadata
    }

    /// The drained epoch this commit makes durable.
    #[getter]
    fn drained(&self) -> u64 {
        self.inner.drained
    }

    /// `None`, or the metadata leaves out its skip window because it did not fit the metadata
    /// limit, and this many unprocessed offsets were in it: a next owner would re-process the
    /// records processed above `offset` (C7; counted by `take_anomalies`).
    #[getter]
    fn window_left_out(&self) -> Option<usize> {
        self.inner.window_left_out
    }

    fn __repr__(&self) -> String {
        format!(
            "CommitSnapshot(partition={}, offset={}, drained={})",
            self.inner.partition, self.inner.offset, self.inner.drained
        )
    }
}

/// An epoch drained on one partition of this member (the `on_epoch` hook's argument; the Rust
/// consumer's `EpochChange`).
#[pyclass(module = "dkg_kafka._native", frozen)]
#[derive(Debug)]
pub(crate) struct EpochChange {
    pub(crate) prev: Option<Arc<Assignment>>,
    pub(crate) next: Arc<Assignment>,
    pub(crate) partition: u32,
    pub(crate) owned: Vec<u32>,
    pub(crate) partitions: u32,
}

#[pymethods]
impl EpochChange {
    /// The assignment before (`None`: Kafka's default placement, or unknown).
    #[getter]
    fn prev(&self) -> Option<PyAssignment> {
        self.prev.as_ref().map(|a| PyAssignment {
            inner: Arc::clone(a),
        })
    }

    /// The assignment now drained.
    #[getter]
    fn next(&self) -> PyAssignment {
        PyAssignment {
            inner: Arc::clone(&self.next),
        }
    }

    /// The epoch now drained.
    #[getter]
    fn epoch(&self) -> u64 {
        self.next.epoch()
    }

    /// The partition that drained it.
    #[getter]
    fn partition(&self) -> u32 {
        self.partition
    }

    /// The partitions this member owns.
    #[getter]
    fn owned(&self) -> Vec<u32> {
        self.owned.clone()
    }

    /// The key's partition before the change.
    fn partition_before(&self, key: &[u8]) -> u32 {
        partition_under(self.prev.as_deref(), key, self.partitions)
    }

    /// The key's partition after the change.
    fn partition_after(&self, key: &[u8]) -> u32 {
        partition_under(Some(&self.next), key, self.partitions)
    }

    /// The key changed partition.
    fn moved(&self, key: &[u8]) -> bool {
        self.partition_before(key) != self.partition_after(key)
    }

    /// The key lived on `partition` and now lives on a partition this member does not own:
    /// flush and drop its state now.
    fn moved_out(&self, key: &[u8]) -> bool {
        self.partition_before(key) == self.partition
            && !self.owned.contains(&self.partition_after(key))
    }

    /// The key lived on a partition of another member and now lives on one of this member's.
    fn moved_in(&self, key: &[u8]) -> bool {
        !self.owned.contains(&self.partition_before(key))
            && self.owned.contains(&self.partition_after(key))
    }

    /// The key's partitions before the change if it was split then.
    fn split_before(&self, key: &[u8]) -> Option<Vec<u32>> {
        split_under(self.prev.as_deref(), key, self.partitions)
    }

    /// The key's partitions after the change if it is split now.
    fn split_after(&self, key: &[u8]) -> Option<Vec<u32>> {
        split_under(Some(&self.next), key, self.partitions)
    }

    fn __repr__(&self) -> String {
        format!(
            "EpochChange(prev={:?}, next={}, partition={}, owned={:?})",
            self.prev.as_ref().map(|a| a.epoch()),
            self.next.epoch(),
            self.partition,
            self.owned
        )
    }
}

/// A key that became split (`parts` non-empty), was split differently, or became whole again
/// (`parts` empty, `partition` its partition) from `epoch` on (the `on_split_change` hook's
/// argument).
#[pyclass(module = "dkg_kafka._native", frozen, get_all)]
#[derive(Debug)]
pub(crate) struct SplitChange {
    pub(crate) key: Py<PyBytes>,
    pub(crate) epoch: u64,
    pub(crate) parts: Vec<u32>,
    pub(crate) partition: Option<u32>,
}

#[pymethods]
impl SplitChange {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "SplitChange(key={:?}, epoch={}, parts={:?}, partition={:?})",
            String::from_utf8_lossy(self.key.as_bytes(py)),
            self.epoch,
            self.parts,
            self.partition
        )
    }
}

//! The control topic's state rules for Python: `dkg_protocol::book::AssignmentBook` itself.
//!
//! The Python `Router` feeds every control-topic record (key, value; `None` = tombstone) through
//! [`PyAssignmentBook::apply`], so the epoch floor, the topic match, tombstones and the reject
//! reasons are the Rust producer's rules (`docs/spec.md`, "Control topic"), not a copy.

use std::sync::{Arc, Mutex};

use dkg_core::assignment::ControlDocument;
use dkg_protocol::book::{AssignmentBook, ControlUpdate, RejectReason};
use pyo3::prelude::*;

use crate::PyAssignment;

/// Every reject reason label, in the order of the spec (one metric series each).
pub(crate) fn reject_reasons() -> Vec<&'static str> {
    RejectReason::ALL.iter().map(|r| r.as_str()).collect()
}

/// The label the book gives a document that fails to decode. The book checks the key and then
/// decodes before it looks at the topic, so any valid key yields the decoding's own reason. A
/// valid control value of another kind (a retraction or generation record) is not an assignment:
/// `invalid`, as in Java and Go; the book would go on to compare its topic with the key and
/// say `topic_mismatch` (spec/corpus/ found it).
pub(crate) fn decode_reason(data: &[u8]) -> &'static str {
    if ControlDocument::from_json(data).is_ok() {
        return "invalid";
    }
    match AssignmentBook::new().apply(Some(b"-"), Some(data)) {
        ControlUpdate::Rejected { reason, .. } => reason.as_str(),
        _ => "invalid",
    }
}

/// What one control-topic record did (`AssignmentBook.apply`).
#[pyclass(name = "ControlUpdate", module = "dkg_kafka._native", frozen, get_all)]
#[derive(Debug)]
pub(crate) struct PyControlUpdate {
    /// `"accepted"`, `"unchanged"`, `"retracted"` or `"rejected"`.
    outcome: &'static str,
    /// The data topic (the record key; for a rejected non-UTF-8 key, its lossy text; `None`
    /// without a key).
    topic: Option<String>,
    /// The reject reason label, when rejected.
    reason: Option<&'static str>,
    /// Why it was rejected, for the log.
    detail: Option<String>,
    /// The adopted assignment, when accepted.
    assignment: Option<Py<PyAssignment>>,
}

#[pymethods]
impl PyControlUpdate {
    fn __repr__(&self) -> String {
        let text = |s: Option<&str>| s.map_or_else(|| "None".to_owned(), |s| format!("{s:?}"));
        format!(
            "ControlUpdate(outcome={:?}, topic={}, reason={})",
            self.outcome,
            text(self.topic.as_deref()),
            text(self.reason)
        )
    }
}

/// The validated state of the control topic: the current assignment per data topic.
///
/// Feed it the records in log order; rejected records leave the last good assignment in place.
#[pyclass(name = "AssignmentBook", module = "dkg_kafka._native", frozen)]
#[derive(Debug)]
pub(crate) struct PyAssignmentBook {
    // Frozen class, mutable state: `apply` runs without the GIL while it decodes.
    inner: Mutex<AssignmentBook>,
}

impl PyAssignmentBook {
    fn book(&self) -> std::sync::MutexGuard<'_, AssignmentBook> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[pymethods]
impl PyAssignmentBook {
    /// An empty book; `max_value_bytes` can lower the size limit (never raise it).
    #[new]
    #[pyo3(signature = (max_value_bytes = None))]
    fn new(max_value_bytes: Option<usize>) -> Self {
        let book = AssignmentBook::new();
        let book = match max_value_bytes {
            Some(max) => book.with_max_value_bytes(max),
            None => book,
        };
        Self {
            inner: Mutex::new(book),
        }
    }

    /// Apply one control-topic record (`value=None` is a tombstone).
    #[pyo3(signature = (key, value))]
    fn apply(
        &self,
        py: Python<'_>,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> PyResult<PyControlUpdate> {
        let update = py.detach(|| self.book().apply(key, value));
        let empty = |outcome, topic| PyControlUpdate {
            outcome,
            topic,
            reason: None,
            detail: None,
            assignment: None,
        };
        Ok(match update {
            ControlUpdate::Adopted(a) => PyControlUpdate {
                topic: Some(a.topic().to_owned()),
                assignment: Some(Py::new(py, PyAssignment { inner: a })?),
                ..empty("accepted", None)
            },
            ControlUpdate::Retracted { topic } => empty("retracted", Some(topic)),
            ControlUpdate::Unchanged { topic } => empty("unchanged", Some(topic)),
            // Every topic dropped (spec 6.4); `reread`: read the control topic again from the start.
            ControlUpdate::Reset { reread, .. } => {
                empty(if reread { "reread" } else { "reset" }, None)
            }
            ControlUpdate::Rejected {
                topic,
                reason,
                detail,
            } => PyControlUpdate {
                reason: Some(reason.as_str()),
                detail: Some(detail),
                ..empty("rejected", topic)
            },
        })
    }

    /// The current assignment of `topic`, if any.
    fn get(&self, topic: &str) -> Option<PyAssignment> {
        self.book().get(topic).map(|a| PyAssignment {
            inner: Arc::clone(a),
        })
    }

    /// The topics with a current assignment (sorted).
    fn topics(&self) -> Vec<String> {
        let mut topics: Vec<String> = self.book().iter().map(|a| a.topic().to_owned()).collect();
        topics.sort_unstable();
        topics
    }

    /// The value size limit in force, in bytes.
    #[getter]
    fn max_value_bytes(&self) -> usize {
        self.book().max_value_bytes()
    }

    fn __len__(&self) -> usize {
        self.book().len()
    }
}

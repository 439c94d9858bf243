//! Record intake from confluent-kafka: the interned names of a `Message`'s accessors and the
//! epoch read from its headers.

use dkg_kafka_protocol::headers::{EPOCH_HEADER, parse_decimal};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

/// Interned accessor names of a `Message` (looked up once per interpreter), in
/// [`crate::msgread::Field`]'s order.
static NAMES: PyOnceLock<[Py<PyString>; 5]> = PyOnceLock::new();

pub(crate) fn names(py: Python<'_>) -> &[Py<PyString>; 5] {
    NAMES.get_or_init(py, || {
        ["partition", "offset", "key", "headers", "error"].map(|n| PyString::intern(py, n).unbind())
    })
}

/// The `dkg-epoch` of a confluent-kafka `headers()` value (`None` or a list of `(name, value)`):
/// the last well-formed one (`docs/spec.md` section 8, C1).
pub(crate) fn epoch_of_headers(headers: &Bound<'_, PyAny>) -> Option<u64> {
    if headers.is_none() {
        return None;
    }
    let list = headers.downcast::<PyList>().ok()?;
    let mut epoch = None;
    for item in list.iter() {
        let Ok(pair) = item.downcast::<PyTuple>() else {
            continue;
        };
        let (Ok(name), Ok(value)) = (pair.get_item(0), pair.get_item(1)) else {
            continue;
        };
        let is_epoch = name
            .downcast::<PyString>()
            .ok()
            .and_then(|s| s.to_str().ok())
            .is_some_and(|s| s == EPOCH_HEADER);
        if !is_epoch {
            continue;
        }
        let parsed = match value.downcast::<PyBytes>() {
            Ok(b) => parse_decimal(Some(b.as_bytes())),
            Err(_) => value
                .downcast::<PyString>()
                .ok()
                .and_then(|s| s.to_str().ok())
                .and_then(|s| parse_decimal(Some(s.as_bytes()))),
        };
        if parsed.is_some() {
            epoch = parsed;
        }
    }
    epoch
}

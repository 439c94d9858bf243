//! `ProducerCore`: `DkgProducer.produce` as one native call per record.
//!
//! confluent-kafka cannot take a Python partitioner, so `DkgProducer` places keyed records itself
//! and passes `partition=` to the client's `Producer.produce`. Written in Python, that placing cost
//! a frame, a dict lookup and a Rust call per record, about half a plain `produce()`; here the
//! argument handling, the topic's [`Placement`] lookup, the `dkg-epoch` header and the client call
//! are one method of the class `DkgProducer` derives from.
//!
//! The client's `produce` is `METH_VARARGS | METH_KEYWORDS`, parsed with `"s|z#z#iOOLO"` over
//! `(topic, value, key, partition, callback, on_delivery, timestamp, headers)`
//! (confluent-kafka-python, `src/confluent_kafka/src/Producer.c`, `Producer_produce`), so it gets
//! one positional tuple and no keywords: four items for a plain record, all eight otherwise. What
//! this method does not look at (value, callbacks, timestamp, a keyless record's key, an explicit
//! partition) reaches the client as given, so its checks and exceptions (`TypeError`,
//! `BufferError`, `KafkaException`) are the client's own.

use std::sync::OnceLock;

use pyo3::exceptions::PyRuntimeError;
use pyo3::gc::PyVisit;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyMapping, PyString, PyTuple};
use pyo3::{PyTraverseError, intern};

use crate::Placement;

/// librdkafka's `RD_KAFKA_PARTITION_UA`: the client's partitioner picks the partition.
const PARTITION_UNASSIGNED: i32 = -1;

/// The record header naming the epoch that placed a moved key (spec section 8).
const EPOCH_HEADER: &str = "dkg-epoch";

/// What [`ProducerCore::produce`] calls, set once by `DkgProducer.__init__`.
#[derive(Debug)]
struct Target {
    /// The client's bound `Producer.produce`.
    produce: Py<PyAny>,
    /// The router's topic -> `Placement` dict (the router swaps entries, never the dict).
    placements: Py<PyDict>,
    /// The router's `_unplaced(topic)`: counts a record whose topic has no partition count yet and
    /// asks for the count.
    unplaced: Py<PyAny>,
}

/// The per-record path of `DkgProducer`: `produce` with the client's signature.
///
/// Frozen (shared by every thread that produces); the target is set once, so reading it is one
/// atomic load.
#[pyclass(module = "dkg_kafka._native", subclass, frozen)]
#[derive(Debug, Default)]
pub(crate) struct ProducerCore {
    target: OnceLock<Target>,
}

#[pymethods]
impl ProducerCore {
    /// Takes (and ignores) the arguments of the subclass's `__init__`; `bind` sets the target.
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn new(_args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>) -> Self {
        Self::default()
    }

    /// Route `produce` through `produce` (the client's bound `Producer.produce`), placing keyed
    /// records by `placements` (topic -> `Placement`) and reporting records of topics without
    /// one to `unplaced(topic)`. Once only: `RuntimeError` the second time.
    fn bind(
        &self,
        produce: Py<PyAny>,
        placements: Py<PyDict>,
        unplaced: Py<PyAny>,
    ) -> PyResult<()> {
        self.target
            .set(Target {
                produce,
                placements,
                unplaced,
            })
            .map_err(|_| PyRuntimeError::new_err("ProducerCore.bind: already bound"))
    }

    /// Enqueue a record, as `confluent_kafka.Producer.produce` does: same arguments (`callback`
    /// is the client's alias of `on_delivery` and wins when both are given), same exceptions
    /// (`BufferError` when the queue is full, `KafkaException` otherwise).
    ///
    /// A keyed record (`bytes`, or `str`, encoded as UTF-8 as the client would) without an
    /// explicit partition gets its topic's current placement, and a `dkg-epoch` header after its
    /// own headers when the epoch header rule says so; before the topic's partition count is
    /// known the client's partitioner places it. Keyless records and explicit partitions pass
    /// through untouched.
    #[pyo3(signature = (
        topic, value = None, key = None, partition = -1, on_delivery = None, timestamp = 0,
        headers = None, *, callback = None
    ))]
    // PyO3 renders a negative default as `...`.
    #[pyo3(
        text_signature = "($self, topic, value=None, key=None, partition=-1, on_delivery=None, timestamp=0, headers=None, *, callback=None)"
    )]
    #[allow(clippy::too_many_arguments)] // the client's signature
    fn produce<'py>(
        &self,
        py: Python<'py>,
        topic: &Bound<'py, PyAny>,
        value: Option<&Bound<'py, PyAny>>,
        key: Option<&Bound<'py, PyAny>>,
        partition: i32,
        on_delivery: Option<&Bound<'py, PyAny>>,
        timestamp: i64,
        headers: Option<&Bound<'py, PyAny>>,
        callback: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<()> {
        let target = self.target.get().ok_or_else(|| {
            PyRuntimeError::new_err("ProducerCore.produce before bind (DkgProducer.__init__)")
        })?;
        let mut key = key.cloned();
        let mut placed = None;
        let mut headers = headers.cloned();
        if partition == PARTITION_UNASSIGNED {
            if let Some(k) = &key {
                // Exact types only, as before: subclasses and buffers go to the client as given.
                if let Ok(s) = k.downcast_exact::<PyString>() {
                    key = Some(s.encode_utf8()?.into_any());
                }
            }
            // A non-str topic skips placing: the client raises its TypeError for it.
            if let (Some(k), Ok(topic)) = (&key, topic.downcast::<PyString>()) {
                if let Ok(k) = k.downcast_exact::<PyBytes>() {
                    match target.placements.bind(py).get_item(topic)? {
                        Some(placement) => {
                            let (p, epoch) = placement
                                .downcast::<Placement>()?
                                .get()
                                .place_counted(k.as_bytes());
                            if let Some(epoch) = epoch {
                                headers = Some(with_epoch(py, headers, epoch)?);
                            }
                            placed = Some(p);
                        }
                        None => {
                            target.unplaced.bind(py).call1((topic,))?;
                        }
                    }
                }
            }
        }
        let partition = match placed {
            Some(p) => p.into_pyobject(py)?.into_any(),
            None => partition.into_pyobject(py)?.into_any(),
        };
        let produce = target.produce.bind(py);
        // The client takes `callback` over `on_delivery`; only one slot is filled, since a None
        // in `callback` would hide `on_delivery` from it.
        let delivery = callback.or(on_delivery);
        if delivery.is_none() && timestamp == 0 && headers.is_none() {
            produce.call1((topic, value, key, partition))?;
        } else {
            let none: Option<&Bound<'py, PyAny>> = None;
            produce.call1((
                topic, value, key, partition, delivery, none, timestamp, headers,
            ))?;
        }
        Ok(())
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        if let Some(t) = self.target.get() {
            visit.call(&t.produce)?;
            visit.call(&t.placements)?;
            visit.call(&t.unplaced)?;
        }
        Ok(())
    }
}

/// The record's headers with `("dkg-epoch", epoch)` appended after them (spec section 8): a new
/// list of the mapping's items or the sequence's items, as the client accepts either.
fn with_epoch<'py>(
    py: Python<'py>,
    headers: Option<Bound<'py, PyAny>>,
    epoch: &Py<PyBytes>,
) -> PyResult<Bound<'py, PyAny>> {
    let list = match headers {
        None => PyList::empty(py),
        Some(h) => match h.downcast::<PyMapping>() {
            Ok(m) => m.items()?,
            Err(_) => py
                .get_type::<PyList>()
                .call1((h,))?
                .downcast_into::<PyList>()?,
        },
    };
    let header = (intern!(py, EPOCH_HEADER), epoch.bind(py)).into_pyobject(py)?;
    list.append(header)?;
    Ok(list.into_any())
}

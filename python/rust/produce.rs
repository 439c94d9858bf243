//! `ProducerCore`: `DkgProducer.produce` as one native call per record.
//!
//! confluent-kafka cannot take a Python partitioner, so `DkgProducer` places keyed records itself
//! and passes `partition=` to the client's `Producer.produce`. Written in Python, that placing cost
//! a frame, a dict lookup and a Rust call per record, about half a plain `produce()`; here the
//! argument handling, the topic's [`Placement`] lookup, the `dkg-epoch` header and the client call
//! are one method of the class `DkgProducer` derives from. The method CPython calls is the raw
//! entry of [`crate::fastcall`], which runs [`ProducerCore::produce_record`] without PyO3's
//! argument handling; the PyO3 method below stays as its reference for the calls it does not take.
//!
//! The client's `produce` is `METH_VARARGS | METH_KEYWORDS`, parsed with `"s|z#z#iOOLO"` over
//! `(topic, value, key, partition, callback, on_delivery, timestamp, headers)`
//! (confluent-kafka-python, `src/confluent_kafka/src/Producer.c`, `Producer_produce`), so it gets
//! one positional tuple and no keywords: four items for a plain record, all eight otherwise. What
//! this method does not look at (value, callbacks, timestamp, a keyless record's key, an explicit
//! partition) reaches the client as given, so its checks and exceptions (`TypeError`,
//! `BufferError`, `KafkaException`) are the client's own.

use std::sync::OnceLock;

use pyo3::exceptions::{PyBufferError, PyRuntimeError};
use pyo3::gc::PyVisit;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyMapping, PyString, PyTuple};
use pyo3::{PyTraverseError, intern};

use crate::Placement;
use crate::table::PlacementTable;

/// librdkafka's `RD_KAFKA_PARTITION_UA`: the client's partitioner picks the partition.
const PARTITION_UNASSIGNED: i32 = -1;

/// The record header naming the epoch that placed a moved key (spec section 8).
const EPOCH_HEADER: &str = "dkg-epoch";

/// What [`ProducerCore::produce`] calls, set once by `DkgProducer.__init__`.
#[derive(Debug)]
pub(crate) struct Target {
    /// The client's bound `Producer.produce`.
    pub(crate) produce: Py<PyAny>,
    /// The router's topic -> `Placement` table (the router swaps entries, never the table).
    pub(crate) placements: Py<PlacementTable>,
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
        placements: Py<PlacementTable>,
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
        self.produce_record(
            py,
            topic,
            value,
            key,
            partition,
            on_delivery,
            timestamp,
            headers,
            callback,
        )
    }

    /// Enqueue many records of one topic: `records` yields `(value, key)` pairs, placed as
    /// [`produce`](Self::produce) places them but by the topic's placement at the start of the
    /// call, each sent with the client's `produce` (`on_delivery` for every one). Returns how many
    /// were enqueued: all of them, or fewer when the client's queue is full (`BufferError`: poll
    /// and pass the rest again). Any other error of the client is raised, the records before it
    /// being enqueued.
    #[pyo3(signature = (topic, records, on_delivery = None))]
    fn produce_many<'py>(
        &self,
        py: Python<'py>,
        topic: &Bound<'py, PyString>,
        records: &Bound<'py, PyAny>,
        on_delivery: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<usize> {
        let target = self.target()?;
        let placement = target.placement(topic)?;
        let mut sent = 0;
        for record in records.try_iter()? {
            let (value, key): (Bound<'py, PyAny>, Option<Bound<'py, PyAny>>) = record?.extract()?;
            let (key, bytes) = placeable(key)?;
            let mut headers = None;
            let placed = match bytes {
                Some(bytes) => target.place(topic, placement.as_ref(), &bytes, &mut headers)?,
                None => None,
            };
            let partition = partition_arg(py, placed, PARTITION_UNASSIGNED)?;
            match target.send(topic, Some(&value), key, partition, on_delivery, 0, headers) {
                Ok(()) => sent += 1,
                Err(e) if e.is_instance_of::<PyBufferError>(py) => return Ok(sent),
                Err(e) => return Err(e),
            }
        }
        Ok(sent)
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

impl ProducerCore {
    /// [`produce`](Self::produce) on extracted arguments; also the body of the fast entry
    /// ([`crate::fastcall`]), which extracts them without PyO3.
    #[allow(clippy::too_many_arguments)] // the client's signature
    #[inline]
    pub(crate) fn produce_record<'py>(
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
        let target = self.target()?;
        let mut headers = headers.cloned();
        let (key, mut placed) = (key.cloned(), None);
        let key = if partition == PARTITION_UNASSIGNED {
            let (key, bytes) = placeable(key)?;
            // A non-str topic skips placing: the client raises its TypeError for it.
            if let (Some(bytes), Ok(topic)) = (bytes, topic.downcast::<PyString>()) {
                let placement = target.placement(topic)?;
                placed = target.place(topic, placement.as_ref(), &bytes, &mut headers)?;
            }
            key
        } else {
            key
        };
        let partition = partition_arg(py, placed, partition)?;
        // The client takes `callback` over `on_delivery`.
        let delivery = callback.or(on_delivery);
        target.send(topic, value, key, partition, delivery, timestamp, headers)
    }

    pub(crate) fn target(&self) -> PyResult<&Target> {
        self.target.get().ok_or_else(|| {
            PyRuntimeError::new_err("ProducerCore used before bind (DkgProducer.__init__)")
        })
    }
}

impl Target {
    /// The topic's current placement (`None` while its partition count is unknown).
    fn placement<'py>(
        &self,
        topic: &Bound<'py, PyString>,
    ) -> PyResult<Option<Bound<'py, Placement>>> {
        self.placements.get().lookup(topic)
    }

    /// The partition of a keyed record by `placement`, counted, with the `dkg-epoch` header
    /// appended to `headers` when due; `None` (reported to the router) without a placement.
    pub(crate) fn place<'py>(
        &self,
        topic: &Bound<'py, PyString>,
        placement: Option<&Bound<'py, Placement>>,
        key: &Bound<'py, PyBytes>,
        headers: &mut Option<Bound<'py, PyAny>>,
    ) -> PyResult<Option<u32>> {
        let py = topic.py();
        let Some(placement) = placement else {
            self.unplaced.bind(py).call1((topic,))?;
            return Ok(None);
        };
        let (partition, epoch) = placement.get().place_counted(key.as_bytes());
        if let Some(epoch) = epoch {
            *headers = Some(with_epoch(py, headers.take(), epoch)?);
        }
        Ok(Some(partition))
    }

    /// One call of the client's `produce`: four positional arguments for a plain record, all
    /// eight (its order: `callback` before `on_delivery`, which stays None) otherwise.
    #[allow(clippy::too_many_arguments)] // the client's arguments
    pub(crate) fn send<'py>(
        &self,
        topic: &Bound<'py, PyAny>,
        value: Option<&Bound<'py, PyAny>>,
        key: Option<Bound<'py, PyAny>>,
        partition: Bound<'py, PyAny>,
        delivery: Option<&Bound<'py, PyAny>>,
        timestamp: i64,
        headers: Option<Bound<'py, PyAny>>,
    ) -> PyResult<()> {
        let produce = self.produce.bind(topic.py());
        let plain = delivery.is_none() && headers.is_none() && timestamp == 0;
        if plain {
            produce.call1((topic, value, key, partition))?;
        } else {
            let none: Option<&Bound<'py, PyAny>> = None;
            produce.call1((
                topic, value, key, partition, delivery, none, timestamp, headers,
            ))?;
        }
        Ok(())
    }
}

/// The key to send and the bytes DKG places it by (see [`placeable`]).
type Keys<'py> = (Option<Bound<'py, PyAny>>, Option<Bound<'py, PyBytes>>);

/// The partition argument for the client: the placed one, else the one given.
fn partition_arg(py: Python<'_>, placed: Option<u32>, given: i32) -> PyResult<Bound<'_, PyAny>> {
    Ok(match placed {
        Some(p) => p.into_pyobject(py)?.into_any(),
        None => given.into_pyobject(py)?.into_any(),
    })
}

/// The key to send and, if the record is placed by DKG, its bytes: a `str` key is encoded as
/// UTF-8 as the client would; exact `bytes` and `str` only, as before (subclasses and buffers go
/// to the client as given, placed by its partitioner).
fn placeable<'py>(key: Option<Bound<'py, PyAny>>) -> PyResult<Keys<'py>> {
    let Some(key) = key else {
        return Ok((None, None));
    };
    // bytes first: the common key.
    if let Ok(bytes) = key.downcast_exact::<PyBytes>() {
        let bytes = bytes.clone();
        return Ok((Some(key), Some(bytes)));
    }
    if let Ok(s) = key.downcast_exact::<PyString>() {
        let bytes = s.encode_utf8()?;
        return Ok((Some(bytes.clone().into_any()), Some(bytes)));
    }
    Ok((Some(key), None))
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

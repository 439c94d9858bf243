//! `PlacementTable`: the router's topic -> [`Placement`] map, with a one-entry cache for the
//! per-record lookup.
//!
//! A producer sends most records to one topic, usually passing the same `str` object each time
//! (a literal or a variable). [`PlacementTable::lookup`] answers a repeat of the last topic by
//! comparing that object's identity and the table's generation, bumped by every write, instead
//! of hashing into the dict (measured: about 135 instructions less per `DkgProducer.produce`,
//! BENCHMARKS.md). Any other topic, a `str` subclass, or a write since, takes the dict.
//!
//! Sound without relying on when the GIL switches threads: a lookup reads the generation before
//! the dict and tags what it caches with it, and a write bumps it after changing the dict, so an
//! entry read across a write carries an old generation and is never answered from.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use pyo3::PyTraverseError;
use pyo3::gc::PyVisit;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::Placement;

/// The last topic looked up: its `str` object, the generation then, and its placement.
#[derive(Debug)]
struct Last {
    topic: Py<PyString>,
    generation: u64,
    placement: Option<Py<Placement>>,
}

/// Topic -> current [`Placement`], written by the router's threads, read by every `produce()`.
#[pyclass(module = "dkg_kafka._native", frozen)]
#[derive(Debug)]
pub(crate) struct PlacementTable {
    placements: Py<PyDict>,
    /// Bumped after every write (set or removal).
    generation: AtomicU64,
    /// Held only for pointer compares and reference counts, never across a Python call, so no
    /// thread waits on it (only the GIL holder reaches it).
    last: Mutex<Option<Last>>,
}

#[pymethods]
impl PlacementTable {
    #[new]
    fn new(py: Python<'_>) -> Self {
        Self {
            placements: PyDict::new(py).unbind(),
            generation: AtomicU64::new(0),
            last: Mutex::new(None),
        }
    }

    /// The topic's placement, `None` if it has none.
    fn get<'py>(&self, topic: &Bound<'py, PyString>) -> PyResult<Option<Bound<'py, Placement>>> {
        self.lookup(topic)
    }

    fn __setitem__(
        &self,
        topic: &Bound<'_, PyString>,
        placement: &Bound<'_, Placement>,
    ) -> PyResult<()> {
        self.placements
            .bind(topic.py())
            .set_item(topic, placement)?;
        self.bump();
        Ok(())
    }

    /// Remove the topic's placement; returns it (`None` if it had none).
    fn pop<'py>(&self, topic: &Bound<'py, PyString>) -> PyResult<Option<Bound<'py, Placement>>> {
        let removed = self.dict_get(topic)?;
        if removed.is_some() {
            self.placements.bind(topic.py()).del_item(topic)?;
            self.bump();
        }
        Ok(removed)
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.placements.bind(py).len()
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.placements)?;
        let last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(last) = last.as_ref() {
            visit.call(&last.topic)?;
            visit.call(&last.placement)?;
        }
        Ok(())
    }
}

impl PlacementTable {
    /// The topic's placement: from the cache when `topic` is the last topic's own `str` object
    /// and nothing was written since, else from the dict (then cached if `topic` is an exact
    /// `str`: a subclass's `__eq__` could make equal objects differ).
    pub(crate) fn lookup<'py>(
        &self,
        topic: &Bound<'py, PyString>,
    ) -> PyResult<Option<Bound<'py, Placement>>> {
        let py = topic.py();
        let generation = self.generation.load(Ordering::Acquire);
        if let Some(hit) = self.hit(topic, generation) {
            return Ok(hit);
        }
        let placement = self.dict_get(topic)?;
        if topic.is_exact_instance_of::<PyString>() {
            let entry = Last {
                topic: topic.clone().unbind(),
                generation,
                placement: placement.as_ref().map(|p| p.clone().unbind()),
            };
            // The old entry's references are dropped after the lock is released, as `Bound`s:
            // released at once even where PyO3 does not count the thread as attached (the raw
            // `produce` entry, `fastcall.rs`), where a `Py` would wait in PyO3's pool.
            let old = self
                .last
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .replace(entry);
            if let Some(old) = old {
                drop(old.topic.into_bound(py));
                drop(old.placement.map(|p| p.into_bound(py)));
            }
        }
        Ok(placement)
    }

    /// The cache's answer for `topic` at `generation`, `None` on a miss.
    fn hit<'py>(
        &self,
        topic: &Bound<'py, PyString>,
        generation: u64,
    ) -> Option<Option<Bound<'py, Placement>>> {
        let last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let last = last.as_ref()?;
        (last.generation == generation && last.topic.as_ptr() == topic.as_ptr())
            .then(|| last.placement.as_ref().map(|p| p.bind(topic.py()).clone()))
    }

    fn dict_get<'py>(
        &self,
        topic: &Bound<'py, PyString>,
    ) -> PyResult<Option<Bound<'py, Placement>>> {
        match self.placements.bind(topic.py()).get_item(topic)? {
            Some(p) => Ok(Some(p.downcast_into::<Placement>()?)),
            None => Ok(None),
        }
    }

    fn bump(&self) {
        self.generation.fetch_add(1, Ordering::Release);
    }
}

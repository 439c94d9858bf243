//! `ProducerCore.produce` without PyO3's method trampoline: a `METH_FASTCALL | METH_KEYWORDS`
//! method that CPython calls with the caller's argument array.
//!
//! `produce()` runs once per record. Of the ~890 instructions `DkgProducer` added to a plain
//! client call, PyO3's generated entry (the attach count, the nine-parameter description walk,
//! the `self` check) took ~225 and building the client's tuple item by item ~215 (callgrind,
//! BENCHMARKS.md). This entry takes the common call, `produce(topic, value, key)` with an exact
//! `str` topic that has a placement and an exact `bytes` key, in a short path
//! that packs the client's tuple in one call ([`plain`]); any other call has its arguments read
//! from the array and runs the same body as before, [`ProducerCore::produce_record`]. A call
//! neither takes as it stands (an unknown or repeated keyword, too many arguments, an argument
//! whose conversion fails) goes to the PyO3-generated method, kept aside at import, so such
//! calls behave, and fail, exactly as before: same exceptions, same messages.
//!
//! The one module with `unsafe`: the raw entry point and its installation.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;

use pyo3::ffi;
use pyo3::panic::PanicException;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple};

use crate::produce::ProducerCore;

/// The PyO3-generated `ProducerCore.produce` (a method descriptor): the fallback.
static GENERATED: OnceLock<Py<PyAny>> = OnceLock::new();

/// `produce`'s parameters in the client's order; `callback` (the last) is keyword-only.
const PARAMS: [&str; 8] = [
    "topic",
    "value",
    "key",
    "partition",
    "on_delivery",
    "timestamp",
    "headers",
    "callback",
];
const POSITIONAL: usize = PARAMS.len() - 1;

/// Replace `ProducerCore.produce` (PyO3's) by [`produce`], with the same name, docstring and
/// text signature; PyO3's method is kept as the fallback.
pub(crate) fn install(py: Python<'_>) -> PyResult<()> {
    let class = py.get_type::<ProducerCore>();
    let generated = class.getattr("produce")?;
    let doc = format!(
        "produce{}\n--\n\n{}",
        generated
            .getattr("__text_signature__")?
            .extract::<String>()?,
        generated.getattr("__doc__")?.extract::<String>()?
    );
    let doc = CString::new(doc)?;
    if GENERATED.set(generated.unbind()).is_err() {
        return Ok(()); // installed by an earlier import of the module
    }
    // CPython keeps a pointer to the definition for the descriptor's lifetime: leaked once.
    let def = Box::leak(Box::new(ffi::PyMethodDef {
        ml_name: c"produce".as_ptr(),
        ml_meth: ffi::PyMethodDefPointer {
            PyCFunctionFastWithKeywords: produce,
        },
        ml_flags: ffi::METH_FASTCALL | ffi::METH_KEYWORDS,
        ml_doc: doc.into_raw(),
    }));
    // SAFETY: the type object is alive (`class` holds it) and `def` is 'static and well formed
    // (its function matches `ml_flags`).
    let descriptor = unsafe {
        Bound::from_owned_ptr_or_err(py, ffi::PyDescr_NewMethod(class.as_type_ptr(), def))
    }?;
    class.setattr("produce", descriptor)
}

/// The method: `self`, the positional arguments then the keyword arguments' values in `args`,
/// their names in `kwnames` (NULL without keywords).
///
/// PyO3 does not count the thread as attached here (`Python::assume_attached`), so a `Py` dropped
/// on this path would wait in PyO3's pool until its next method call: the per-record code drops
/// `Bound`s only (the lookup cache's old entry included, `table.rs`); an error path's `PyErr`
/// goes to the generated method, whose entry empties the pool.
///
/// # Safety
/// Called by CPython only, as a `METH_FASTCALL | METH_KEYWORDS` method of `ProducerCore`: the
/// GIL is held, `slf` is an instance of `ProducerCore` (the method descriptor checks it), `args`
/// holds `nargs` + `len(kwnames)` valid references borrowed for the call.
unsafe extern "C" fn produce(
    slf: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: CPython holds the GIL while it calls a method.
    let py = unsafe { Python::assume_attached() };
    // A panic must not unwind into CPython: it becomes PanicException, as in PyO3's methods.
    let result = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the caller's guarantees, above.
        unsafe { call(py, slf, args, nargs, kwnames) }
    }))
    .unwrap_or_else(|_| Err(PanicException::new_err("panic in ProducerCore.produce")));
    match result {
        Ok(()) => {
            // SAFETY: a new reference to None is the return value.
            unsafe {
                let none = ffi::Py_None();
                ffi::Py_IncRef(none);
                none
            }
        }
        Err(e) => {
            e.restore(py);
            std::ptr::null_mut()
        }
    }
}

/// # Safety
/// As [`produce`].
unsafe fn call(
    py: Python<'_>,
    slf: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> PyResult<()> {
    // SAFETY: the method descriptor let only instances of ProducerCore (or subclasses) through.
    let this = unsafe { Borrowed::from_ptr(py, slf) };
    // SAFETY: as above.
    let core = unsafe { this.downcast_unchecked::<ProducerCore>() }.get();
    if kwnames.is_null() && nargs == 3 {
        // SAFETY: three valid references borrowed for the call.
        let (topic, value, key) = unsafe { (*args, *args.add(1), *args.add(2)) };
        // SAFETY: as above.
        if let Some(done) = unsafe { plain(py, core, topic, value, key) } {
            return done;
        }
    }
    // SAFETY: as above.
    unsafe { general(py, &this, core, args, nargs, kwnames) }
}

/// Any call but [`plain`]'s: the arguments by parameter, then the record's body, or the
/// generated method when they do not fit.
///
/// # Safety
/// As [`produce`].
unsafe fn general(
    py: Python<'_>,
    this: &Bound<'_, PyAny>,
    core: &ProducerCore,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> PyResult<()> {
    // SAFETY: `kwnames` is NULL or a tuple borrowed for the call.
    let kwnames = match unsafe { Borrowed::from_ptr_or_opt(py, kwnames) } {
        Some(names) => Some(names.downcast::<PyTuple>()?.clone()),
        None => None,
    };
    let given = usize::try_from(nargs).unwrap_or(0);
    let total = given + kwnames.as_ref().map_or(0, |n| n.len());
    let args = if total == 0 {
        &[][..]
    } else {
        // SAFETY: `args` holds `total` valid references borrowed for the call.
        unsafe { std::slice::from_raw_parts(args, total) }
    };
    let result = slots(&args[..given], kwnames.as_ref(), &args[given..])
        // SAFETY: the slots hold references of `args`.
        .and_then(|slots| unsafe { record(py, core, &slots) });
    match result {
        Some(result) => result,
        // SAFETY: as above.
        None => unsafe { fallback(py, this, args, given, kwnames.as_ref()) },
    }
}

/// `produce(topic, value, key)` of an exact `str` topic that has a placement and an exact
/// `bytes` key, the common call: placed and passed to the client as one 4-tuple built in one
/// call. `None` (nothing done) for anything else.
///
/// # Safety
/// The GIL is held; the pointers are valid references borrowed for the call.
unsafe fn plain(
    py: Python<'_>,
    core: &ProducerCore,
    topic: *mut ffi::PyObject,
    value: *mut ffi::PyObject,
    key: *mut ffi::PyObject,
) -> Option<PyResult<()>> {
    // SAFETY: valid references (caller); exact type checks, no conversion.
    let (topic, key) = unsafe { (Borrowed::from_ptr(py, topic), Borrowed::from_ptr(py, key)) };
    let topic = topic.downcast_exact::<PyString>().ok()?;
    let key = key.downcast_exact::<PyBytes>().ok()?;
    let target = core.target().ok()?;
    let placement = match target.placements.get().lookup(topic) {
        Ok(Some(placement)) => placement,
        Ok(None) => return None, // no partition count yet: the general path reports it
        Err(e) => return Some(Err(e)),
    };
    let mut headers = None;
    let partition = match target.place(topic, Some(&placement), key, &mut headers) {
        Ok(Some(p)) => p,
        Ok(None) => return None, // not reached: a placement places
        Err(e) => return Some(Err(e)),
    };
    if headers.is_some() {
        // A `dkg-epoch` header: the client's eight-argument form.
        // SAFETY: a valid reference (caller).
        let value = unsafe { Borrowed::from_ptr(py, value) };
        let value = Some(&*value).filter(|v| !v.is_none());
        let partition = match partition.into_pyobject(py) {
            Ok(p) => p.into_any(),
            Err(e) => return Some(Err(e.into())),
        };
        let key = Some(key.clone().into_any());
        return Some(target.send(topic, value, key, partition, None, 0, headers));
    }
    // SAFETY: valid references (caller).
    Some(unsafe {
        send4(
            py,
            target.produce.bind(py),
            topic.as_ptr(),
            value,
            key.as_ptr(),
            partition,
        )
    })
}

/// `produce(topic, value, key, partition)`: the tuple packed by CPython in one call.
///
/// # Safety
/// The GIL is held; `topic`, `value` and `key` are valid references for the call.
unsafe fn send4(
    py: Python<'_>,
    produce: &Bound<'_, PyAny>,
    topic: *mut ffi::PyObject,
    value: *mut ffi::PyObject,
    key: *mut ffi::PyObject,
    partition: u32,
) -> PyResult<()> {
    // SAFETY: PyLong_FromLongLong returns a new reference or NULL with an exception set.
    let partition = unsafe {
        Bound::from_owned_ptr_or_err(py, ffi::PyLong_FromLongLong(i64::from(partition)))
    }?;
    // SAFETY: four valid references (PyTuple_Pack takes its own); a new reference or NULL.
    let args = unsafe {
        Bound::from_owned_ptr_or_err(
            py,
            ffi::PyTuple_Pack(4, topic, value, key, partition.as_ptr()),
        )
    }?;
    // SAFETY: valid callable and tuple; a new reference or NULL with an exception set.
    unsafe {
        Bound::from_owned_ptr_or_err(
            py,
            ffi::PyObject_Call(produce.as_ptr(), args.as_ptr(), std::ptr::null_mut()),
        )
    }
    .map(drop)
}

/// The arguments by parameter (NULL: not given), or `None` for a call the generated method
/// must judge.
fn slots(
    positional: &[*mut ffi::PyObject],
    kwnames: Option<&Bound<'_, PyTuple>>,
    keywords: &[*mut ffi::PyObject],
) -> Option<[*mut ffi::PyObject; 8]> {
    if positional.len() > POSITIONAL {
        return None;
    }
    let mut slots = [std::ptr::null_mut(); 8];
    slots[..positional.len()].copy_from_slice(positional);
    if let Some(names) = kwnames {
        for (name, value) in names.iter().zip(keywords) {
            let name = name.downcast_into::<PyString>().ok()?;
            let name = name.to_str().ok()?;
            let i = PARAMS.iter().position(|p| *p == name)?;
            if !slots[i].is_null() {
                return None;
            }
            slots[i] = *value;
        }
    }
    Some(slots)
}

/// The record's `produce_record`, or `None` when an argument does not convert (the generated
/// method then raises its own error; nothing has been done yet).
///
/// # Safety
/// The GIL is held; every non-NULL slot is a valid reference borrowed for the call.
unsafe fn record(
    py: Python<'_>,
    core: &ProducerCore,
    slots: &[*mut ffi::PyObject; 8],
) -> Option<PyResult<()>> {
    // SAFETY: the caller's guarantee.
    let arg = |i: usize| unsafe { Borrowed::from_ptr_or_opt(py, slots[i]) };
    let topic = arg(0)?;
    // PyO3's `Option` parameters: None and absent are alike.
    let optional = |i: usize| arg(i).filter(|v| !v.is_none());
    let partition = match arg(3) {
        Some(p) => p.extract::<i32>().ok()?,
        None => -1,
    };
    let timestamp = match arg(5) {
        Some(t) => t.extract::<i64>().ok()?,
        None => 0,
    };
    let (value, key, on_delivery, headers, callback) = (
        optional(1),
        optional(2),
        optional(4),
        optional(6),
        optional(7),
    );
    Some(core.produce_record(
        py,
        &topic,
        value.as_deref(),
        key.as_deref(),
        partition,
        on_delivery.as_deref(),
        timestamp,
        headers.as_deref(),
        callback.as_deref(),
    ))
}

/// The call as the generated method takes it: `(self, *positional)` and a keyword dict.
///
/// # Safety
/// The GIL is held; `args` are valid references for the call.
unsafe fn fallback(
    py: Python<'_>,
    slf: &Bound<'_, PyAny>,
    args: &[*mut ffi::PyObject],
    given: usize,
    kwnames: Option<&Bound<'_, PyTuple>>,
) -> PyResult<()> {
    let generated = GENERATED
        .get()
        .ok_or_else(|| PanicException::new_err("ProducerCore.produce not installed"))?;
    let positional: Vec<Bound<'_, PyAny>> = std::iter::once(slf.clone())
        // SAFETY: valid references borrowed for the call; each gets its own reference.
        .chain(
            args[..given]
                .iter()
                .map(|a| unsafe { Bound::from_borrowed_ptr(py, *a) }),
        )
        .collect();
    let positional = PyTuple::new(py, positional)?;
    let keywords = match kwnames {
        Some(names) => {
            let dict = PyDict::new(py);
            for (name, value) in names.iter().zip(&args[given..]) {
                // SAFETY: as above.
                dict.set_item(name, unsafe { Borrowed::from_ptr(py, *value) })?;
            }
            Some(dict)
        }
        None => None,
    };
    generated
        .bind(py)
        .call(positional, keywords.as_ref())
        .map(drop)
}

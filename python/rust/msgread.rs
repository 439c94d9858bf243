//! Reading a confluent-kafka `Message`'s `error()`, `partition()`, `offset()`, `key()` and
//! `headers()` without a Python-level method call each.
//!
//! The consumer reads those five accessors for every record. `msg.call_method0(name)` under the
//! stable ABI (abi3 from 3.10 has no `PyObject_VectorcallMethod`) looks the attribute up, allocates
//! a bound method object and calls it through the call protocol: about 40 ns an accessor, most of
//! what the binding crossing cost per record (BENCHMARKS.md). confluent-kafka's accessors are C
//! functions (`METH_NOARGS` methods of its `cimpl.Message` type), so a [`Reader`], resolved once from
//! one message through the stable ABI (`PyCFunction_GetFunction`, `PyCFunction_GetFlags`,
//! `PyCFunction_GetSelf`), keeps their function pointers and calls them directly, as CPython's own
//! `METH_NOARGS` call does: `f(msg, NULL)`, for messages of exactly the type it was resolved from.
//! Any other object (a subclass, a test's Python class, a client whose accessors are not C
//! functions taking no arguments) is read by the method calls, [`read`]'s fallback: same values,
//! same exceptions.
//!
//! The one module besides `fastcall.rs` with `unsafe`: the direct calls.
#![allow(unsafe_code)]

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::consumer_intake::names;

/// The accessors, in [`names`]'s order.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Field {
    Partition = 0,
    Offset = 1,
    Key = 2,
    Headers = 3,
    Error = 4,
}

/// The accessors' C functions of one message type.
#[derive(Debug)]
pub(crate) struct Reader {
    /// The exact type they were resolved from (kept alive: its methods are the functions).
    ty: Py<PyType>,
    functions: [ffi::PyCFunction; 5],
}

impl Reader {
    /// The accessors of `msg`'s type, if each of the five is a C function taking no arguments
    /// (`METH_NOARGS`) bound to `msg`; `None` otherwise (then [`read`] calls the methods).
    pub(crate) fn resolve(msg: &Bound<'_, PyAny>) -> Option<Self> {
        let py = msg.py();
        let mut functions: [Option<ffi::PyCFunction>; 5] = [None; 5];
        for (slot, name) in functions.iter_mut().zip(names(py)) {
            let method = msg.getattr(name.bind(py)).ok()?;
            let m = method.as_ptr();
            // SAFETY: `m` is a live object (held by `method`); the checks and getters are the
            // stable ABI's and only read it.
            unsafe {
                if ffi::PyCFunction_Check(m) == 0
                    || ffi::PyCFunction_GetFlags(m) != ffi::METH_NOARGS
                    || ffi::PyCFunction_GetSelf(m) != msg.as_ptr()
                {
                    return None;
                }
                *slot = Some(ffi::PyCFunction_GetFunction(m)?);
            }
        }
        let [a, b, c, d, e] = functions;
        Some(Self {
            ty: msg.get_type().unbind(),
            functions: [a?, b?, c?, d?, e?],
        })
    }

    /// Whether `msg` is of exactly the type the functions belong to.
    #[inline(always)]
    pub(crate) fn reads(&self, msg: &Bound<'_, PyAny>) -> bool {
        // SAFETY: `msg` is a live object.
        unsafe { ffi::Py_TYPE(msg.as_ptr()).cast::<ffi::PyObject>() == self.ty.as_ptr() }
    }

    /// `field`'s accessor of `msg`, which [`Reader::reads`].
    #[inline(always)]
    pub(crate) fn call<'py>(
        &self,
        msg: &Bound<'py, PyAny>,
        field: Field,
    ) -> PyResult<Bound<'py, PyAny>> {
        let f = self.functions[field as usize];
        // SAFETY: `f` is a `METH_NOARGS` method of `msg`'s exact type (checked by `resolve` on a
        // bound method of that type and by `reads`), called as CPython calls one: the instance and
        // NULL, with the GIL held (`msg`'s token). It returns a new reference or NULL with an
        // exception set.
        unsafe { Bound::from_owned_ptr_or_err(msg.py(), f(msg.as_ptr(), std::ptr::null_mut())) }
    }
}

/// `msg.<field>()`: through `reader` when it reads `msg`'s type, else the method call.
#[inline]
pub(crate) fn read<'py>(
    reader: Option<&Reader>,
    msg: &Bound<'py, PyAny>,
    field: Field,
) -> PyResult<Bound<'py, PyAny>> {
    match reader {
        Some(r) if r.reads(msg) => r.call(msg, field),
        _ => {
            let py = msg.py();
            msg.call_method0(names(py)[field as usize].bind(py))
        }
    }
}

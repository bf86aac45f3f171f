//! Bindings of `kvwire_core::quant`: numpy arrays in (borrowed, not copied), numpy arrays out (the core's
//! vectors, moved), the GIL released around every kernel. Argument checking that needs Python types
//! (dtype names, contiguity) happens in `python/kvwire/quant.py`; sizes are checked by the core.

use kvwire_core::quant::{self, Options, QuantizedView, ScaleRule, Scales, ScalesView, Source};
use kvwire_core::Error;
use numpy::{
    Element, IntoPyArray, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn, PyReadwriteArrayDyn, PyUntypedArrayMethods,
};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::to_py;

fn qerr(path: &str, reason: impl Into<String>) -> PyErr {
    to_py(Error::Quant { path: path.into(), reason: reason.into() })
}

/// Borrow an output array for writing through numpy's borrow checker: a read-only array, or one that is
/// also an input, is refused with a clear error instead of a panic.
fn writable<'py, T: Element>(a: &Bound<'py, PyArrayDyn<T>>) -> PyResult<PyReadwriteArrayDyn<'py, T>> {
    a.try_readwrite()
        .map_err(|e| qerr("out", format!("cannot be written ({e}): pass a writeable array that is not an input")))
}

/// Borrow an input array for reading (refused while it is borrowed for writing).
fn readable<'py, T: Element>(a: &Bound<'py, PyAny>, name: &str) -> PyResult<PyReadonlyArrayDyn<'py, T>> {
    let a: Bound<'py, PyArrayDyn<T>> = a.extract()?;
    a.try_readonly().map_err(|e| qerr(name, format!("cannot be read ({e})")))
}

fn format(name: &str) -> PyResult<&'static quant::Format> {
    quant::format(name).ok_or_else(|| {
        let known: Vec<_> = quant::FORMATS.iter().map(|f| f.name).collect();
        qerr("format", format!("unknown format {name:?} (known: {})", known.join(", ")))
    })
}

fn element(name: &str) -> PyResult<quant::MiniFloat> {
    quant::element_format(name).ok_or_else(|| {
        qerr(
            "element",
            format!("unknown element format {name:?} (known: e4m3fn, e5m2, e4m3fnuz, e5m2fnuz, e2m3, e3m2, e2m1)"),
        )
    })
}

fn options(
    threads: Option<usize>,
    scale_rule: &str,
    group: Option<usize>,
    tensor_scale: Option<f32>,
) -> PyResult<Options> {
    let scale_rule = match scale_rule {
        "floor" => ScaleRule::Floor,
        "rceil" => ScaleRule::Rceil,
        other => return Err(qerr("scale_rule", format!("expected \"floor\" or \"rceil\", got {other:?}"))),
    };
    if threads == Some(0) {
        return Err(qerr("threads", "must be ≥ 1"));
    }
    Ok(Options { threads, isa: None, scale_rule, group, tensor_scale })
}

/// Borrowed input values: `x` is float32 (`dtype="f32"`) or the uint16 bits of bfloat16/float16.
enum Input<'py> {
    F32(PyReadonlyArrayDyn<'py, f32>),
    U16(PyReadonlyArrayDyn<'py, u16>, bool),
}

impl<'py> Input<'py> {
    fn new(x: &Bound<'py, PyAny>, dtype: &str) -> PyResult<Self> {
        match dtype {
            "f32" => Ok(Input::F32(readable(x, "x")?)),
            "bf16" => Ok(Input::U16(readable(x, "x")?, true)),
            "f16" => Ok(Input::U16(readable(x, "x")?, false)),
            other => Err(qerr("x", format!("unsupported dtype {other:?}"))),
        }
    }

    fn source(&self) -> PyResult<Source<'_>> {
        let not_contiguous = |_| qerr("x", "must be a C-contiguous array");
        Ok(match self {
            Input::F32(a) => Source::F32(a.as_slice().map_err(not_contiguous)?),
            Input::U16(a, true) => Source::Bf16(a.as_slice().map_err(not_contiguous)?),
            Input::U16(a, false) => Source::F16(a.as_slice().map_err(not_contiguous)?),
        })
    }
}

/// Quantise `x` (shape `shape`) along `axis`. Returns `{"codes", "scales", "zeros", "tensor_scale",
/// "group"}` with numpy arrays (scales: uint8 bytes, float32, or uint16 fp16 bits).
#[pyfunction]
#[pyo3(signature = (x, dtype, shape, axis, fmt, group=None, scale_rule="floor", threads=None, tensor_scale=None))]
#[allow(clippy::too_many_arguments)]
pub fn quantize<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    dtype: &str,
    shape: Vec<usize>,
    axis: usize,
    fmt: &str,
    group: Option<usize>,
    scale_rule: &str,
    threads: Option<usize>,
    tensor_scale: Option<f32>,
) -> PyResult<Bound<'py, PyDict>> {
    let fmt = format(fmt)?;
    let opts = options(threads, scale_rule, group, tensor_scale)?;
    let input = Input::new(x, dtype)?;
    let src = input.source()?;
    let q = py.detach(|| quant::quantize(src, &shape, axis, fmt, &opts)).map_err(to_py)?;
    let d = PyDict::new(py);
    d.set_item("codes", q.codes.into_pyarray(py))?;
    match q.scales {
        Scales::None => d.set_item("scales", py.None())?,
        Scales::Bytes(v) => d.set_item("scales", v.into_pyarray(py))?,
        Scales::F32(v) => d.set_item("scales", v.into_pyarray(py))?,
        Scales::F16(v) => d.set_item("scales", v.into_pyarray(py))?,
    }
    match q.zeros {
        Some(z) => d.set_item("zeros", z.into_pyarray(py))?,
        None => d.set_item("zeros", py.None())?,
    }
    d.set_item("tensor_scale", q.tensor_scale)?;
    d.set_item("group", q.group)?;
    Ok(d)
}

/// Decode a quantised tensor into `out` (float32, C-contiguous, `shape`).
#[pyfunction]
#[pyo3(signature = (codes, scales, zeros, tensor_scale, group, shape, axis, fmt, out, scale_rule="floor", threads=None))]
#[allow(clippy::too_many_arguments)]
pub fn dequantize<'py>(
    py: Python<'py>,
    codes: PyReadonlyArrayDyn<'py, u8>,
    scales: Option<&Bound<'py, PyAny>>,
    zeros: Option<PyReadonlyArrayDyn<'py, u16>>,
    tensor_scale: Option<f32>,
    group: usize,
    shape: Vec<usize>,
    axis: usize,
    fmt: &str,
    out: Bound<'py, PyArrayDyn<f32>>,
    scale_rule: &str,
    threads: Option<usize>,
) -> PyResult<()> {
    let format = format(fmt)?;
    let opts = options(threads, scale_rule, None, None)?;
    let contiguous = |name: &'static str| move |_| qerr(name, "must be a C-contiguous array");
    let codes = codes.as_slice().map_err(contiguous("codes"))?;
    // Scales arrive as uint8 (E8M0/E4M3 bytes), float32, or uint16 (fp16 bits).
    let scales_u8: Option<PyReadonlyArrayDyn<u8>> = scales.and_then(|s| s.extract().ok());
    let scales_f32: Option<PyReadonlyArrayDyn<f32>> = scales.and_then(|s| s.extract().ok());
    let scales_u16: Option<PyReadonlyArrayDyn<u16>> = scales.and_then(|s| s.extract().ok());
    let scales = match (&scales_u8, &scales_f32, &scales_u16, scales) {
        (Some(s), _, _, _) => ScalesView::Bytes(s.as_slice().map_err(contiguous("scales"))?),
        (_, Some(s), _, _) => ScalesView::F32(s.as_slice().map_err(contiguous("scales"))?),
        (_, _, Some(s), _) => ScalesView::F16(s.as_slice().map_err(contiguous("scales"))?),
        (_, _, _, None) => ScalesView::None,
        _ => return Err(qerr("scales", "expected a uint8, float32 or uint16 (fp16 bits) array")),
    };
    let zeros = match &zeros {
        Some(z) => Some(z.as_slice().map_err(contiguous("zeros"))?),
        None => None,
    };
    let view = QuantizedView { codes, scales, zeros, tensor_scale, group };
    let mut out = writable(&out)?;
    let out = out.as_slice_mut().map_err(contiguous("out"))?;
    py.detach(|| quant::dequantize(&view, &shape, axis, format, &opts, out)).map_err(to_py)
}

/// Element-wise cast of `x` to `element` codes into `out` (uint8, packed).
#[pyfunction]
#[pyo3(signature = (x, dtype, element, saturate, out, threads=None))]
pub fn cast<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    dtype: &str,
    element: &str,
    saturate: bool,
    out: Bound<'py, PyArrayDyn<u8>>,
    threads: Option<usize>,
) -> PyResult<()> {
    let elem = self::element(element)?;
    let opts = options(threads, "floor", None, None)?;
    let input = Input::new(x, dtype)?;
    let src = input.source()?;
    let mut out = writable(&out)?;
    let out = out.as_slice_mut().map_err(|_| qerr("out", "must be a C-contiguous array"))?;
    py.detach(|| quant::cast(src, &elem, saturate, &opts, out)).map_err(to_py)
}

/// Element-wise decode of packed `element` codes into `out` (float32).
#[pyfunction]
#[pyo3(signature = (codes, element, out, threads=None))]
pub fn decode<'py>(
    py: Python<'py>,
    codes: PyReadonlyArrayDyn<'py, u8>,
    element: &str,
    out: Bound<'py, PyArrayDyn<f32>>,
    threads: Option<usize>,
) -> PyResult<()> {
    let elem = self::element(element)?;
    let opts = options(threads, "floor", None, None)?;
    let codes = codes.as_slice().map_err(|_| qerr("codes", "must be a C-contiguous array"))?;
    let mut out = writable(&out)?;
    let out = out.as_slice_mut().map_err(|_| qerr("out", "must be a C-contiguous array"))?;
    py.detach(|| quant::decode(codes, &elem, &opts, out)).map_err(to_py)
}

/// SQNR, cosine, MSE and max abs error of `x_hat` against `x` (float32 arrays of equal size).
#[pyfunction]
pub fn error<'py>(
    py: Python<'py>,
    x: PyReadonlyArrayDyn<'py, f32>,
    x_hat: PyReadonlyArrayDyn<'py, f32>,
) -> PyResult<Bound<'py, PyDict>> {
    if x.len() != x_hat.len() {
        return Err(qerr("x_hat", format!("has {} values, x has {}", x_hat.len(), x.len())));
    }
    let a = x.as_slice().map_err(|_| qerr("x", "must be a C-contiguous array"))?;
    let b = x_hat.as_slice().map_err(|_| qerr("x_hat", "must be a C-contiguous array"))?;
    let e = py.detach(|| quant::accuracy::error(a, b));
    let d = PyDict::new(py);
    d.set_item("sqnr_db", e.sqnr_db)?;
    d.set_item("cosine", e.cosine)?;
    d.set_item("mse", e.mse)?;
    d.set_item("max_abs", e.max_abs)?;
    d.set_item("count", e.count)?;
    d.set_item("nonfinite", e.nonfinite)?;
    Ok(d)
}

/// The instruction-set level the kernels use on this machine.
#[pyfunction]
pub fn isa() -> &'static str {
    quant::simd::detect().name()
}

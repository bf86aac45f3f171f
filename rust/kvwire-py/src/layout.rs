//! Bindings of `kvwire_core::layout`: cache buffers arrive as flat uint8 views of the caller's numpy arrays
//! (borrowed, never copied), the conversion runs with the GIL released and writes into the caller's output
//! arrays. Shapes and dtypes are checked in `python/kvwire/layout.py`; byte sizes, tables and heads by the core.

use kvwire_core::layout::{self, ConvertOptions, Geometry, Layout, Side, Tokens};
use kvwire_core::Error;
use numpy::{PyArrayDyn, PyArrayMethods, PyReadonlyArray1, PyReadonlyArrayDyn, PyReadwriteArrayDyn};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::errors::to_py;

fn lerr(path: &str, reason: impl Into<String>) -> PyErr {
    to_py(Error::Layout { path: path.into(), reason: reason.into() })
}

/// (name, dtype, block_size, layers, heads, head_dim) of one side, as Python passes it.
type Spec = (String, String, usize, usize, usize, usize);

fn resolve(path: &str, s: &Spec) -> PyResult<Layout> {
    let g = Geometry { layers: s.3, heads: s.4, head_dim: s.5 };
    Layout::new(path, &s.0, &s.1, s.2, g).map_err(to_py)
}

/// Everything about one resolved layout: buffer shapes per block (paged) or token (contiguous), bytes,
/// numpy dtype, packing, scale placement, version.
#[pyfunction]
pub fn layout_describe<'py>(py: Python<'py>, spec: Spec) -> PyResult<Bound<'py, PyDict>> {
    let l = resolve("layout", &spec)?;
    let d = PyDict::new(py);
    d.set_item("name", l.def.name)?;
    d.set_item("engine", l.def.engine)?;
    d.set_item("version", l.def.version)?;
    d.set_item("description", l.def.description)?;
    d.set_item("mla", l.def.mla)?;
    d.set_item("paged", l.def.paged())?;
    d.set_item("kv_packing", l.def.kv_packing)?;
    d.set_item("dtype", l.dtype.name())?;
    d.set_item("numpy_dtype", l.dtype.numpy())?;
    d.set_item("scale_placement", l.dtype.scale_placement())?;
    d.set_item("block_size", l.block_size)?;
    d.set_item("tokens_per_count", l.tokens_per_count())?;
    d.set_item("bytes_per_count", l.bytes_per_count())?;
    d.set_item("separate_scale_bytes", l.separate_scale_bytes())?;
    d.set_item("vector_bytes", l.dtype.vector_bytes(l.geometry.head_dim))?;
    let shapes = PyList::empty(py);
    for p in 0..l.planes() {
        shapes.append(l.shape(p, 1))?;
    }
    d.set_item("plane_shapes", shapes)?;
    d.set_item("count_dims", (0..l.planes()).map(|p| l.count_dim(p)).collect::<Vec<_>>())?;
    Ok(d)
}

/// Exact bytes a request of `tokens` tokens occupies in the layout.
#[pyfunction]
pub fn layout_request_bytes(spec: Spec, tokens: u64) -> PyResult<u64> {
    resolve("layout", &spec)?.request_bytes(tokens).ok_or_else(|| {
        to_py(kvwire_core::Error::Layout {
            path: "tokens".into(),
            reason: format!("{tokens} tokens of this layout take more than 2^64 bytes"),
        })
    })
}

/// The factor an fp8 flavour change (fn ↔ fnuz) multiplies the scales by, or `None` when `src → dst` is not
/// one (or a name is unknown: `kvwire.layout.scale_factor` checks the names first).
#[pyfunction]
pub fn layout_scale_factor(src: &str, dst: &str) -> Option<f32> {
    layout::dtype::scale_factor(layout::dtype::Dtype::parse(src)?, layout::dtype::Dtype::parse(dst)?)
}

/// The catalog: one dict per layout (name, engine, version, mla, paged, kv_packing, description).
#[pyfunction]
pub fn layout_catalog<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for l in layout::LAYOUTS {
        let d = PyDict::new(py);
        d.set_item("name", l.name)?;
        d.set_item("engine", l.engine)?;
        d.set_item("version", l.version)?;
        d.set_item("mla", l.mla)?;
        d.set_item("paged", l.paged())?;
        d.set_item("kv_packing", l.kv_packing)?;
        d.set_item("buffers", l.planes.len())?;
        d.set_item("description", l.description)?;
        out.append(d)?;
    }
    Ok(out)
}

fn tokens_of<'a>(
    side: &str,
    table: &'a Option<PyReadonlyArray1<'_, i32>>,
    slots: &'a Option<PyReadonlyArray1<'_, i64>>,
) -> PyResult<Tokens<'a>> {
    let contiguous = |what: &str| lerr(&format!("{side}_{what}"), "must be a C-contiguous 1-D array");
    Ok(match (table, slots) {
        (None, None) => Tokens::InOrder,
        (Some(t), None) => Tokens::BlockTable(t.as_slice().map_err(|_| contiguous("block_table"))?),
        (None, Some(s)) => Tokens::SlotMapping(s.as_slice().map_err(|_| contiguous("slot_mapping"))?),
        (Some(_), Some(_)) => {
            return Err(lerr(&format!("{side}_slot_mapping"), "give a block table or a slot mapping, not both"))
        }
    })
}

/// Convert `src` buffers (flat uint8 views) into `dst` buffers. Returns the number of tokens converted.
#[pyfunction]
#[pyo3(signature = (src, src_spec, dst, dst_spec, tokens=None, src_block_table=None, src_slot_mapping=None,
    dst_block_table=None, dst_slot_mapping=None, src_heads=None, dst_heads=None, scales=None, threads=None))]
#[allow(clippy::too_many_arguments)]
pub fn layout_convert<'py>(
    py: Python<'py>,
    src: Vec<Bound<'py, PyArrayDyn<u8>>>,
    src_spec: Spec,
    dst: Vec<Bound<'py, PyArrayDyn<u8>>>,
    dst_spec: Spec,
    tokens: Option<usize>,
    src_block_table: Option<PyReadonlyArray1<'py, i32>>,
    src_slot_mapping: Option<PyReadonlyArray1<'py, i64>>,
    dst_block_table: Option<PyReadonlyArray1<'py, i32>>,
    dst_slot_mapping: Option<PyReadonlyArray1<'py, i64>>,
    src_heads: Option<(usize, usize)>,
    dst_heads: Option<(usize, usize)>,
    scales: Option<PyReadonlyArray1<'py, f32>>,
    threads: Option<usize>,
) -> PyResult<usize> {
    let a = resolve("src_layout", &src_spec)?;
    let b = resolve("dst_layout", &dst_spec)?;
    if threads == Some(0) {
        return Err(lerr("threads", "must be ≥ 1"));
    }
    // Borrow every buffer through numpy's borrow checker: a read-only output, or an output that is also an
    // input, is refused here instead of aliasing.
    let src: Vec<PyReadonlyArrayDyn<'py, u8>> = src
        .iter()
        .enumerate()
        .map(|(i, a)| a.try_readonly().map_err(|e| lerr(&format!("src[{i}]"), format!("cannot be read: {e}"))))
        .collect::<PyResult<_>>()?;
    let mut dst: Vec<PyReadwriteArrayDyn<'py, u8>> = dst
        .iter()
        .enumerate()
        .map(|(i, a)| {
            a.try_readwrite().map_err(|e| {
                lerr(
                    &format!("out[{i}]"),
                    format!("cannot be written ({e}): pass a writeable array that is not an input"),
                )
            })
        })
        .collect::<PyResult<_>>()?;
    let src_planes = src
        .iter()
        .enumerate()
        .map(|(i, p)| p.as_slice().map_err(|_| lerr(&format!("src[{i}]"), "must be a C-contiguous array")))
        .collect::<PyResult<Vec<&[u8]>>>()?;
    let mut dst_planes = Vec::with_capacity(dst.len());
    for (i, p) in dst.iter_mut().enumerate() {
        dst_planes.push(p.as_slice_mut().map_err(|_| lerr(&format!("dst[{i}]"), "must be a C-contiguous array"))?);
    }
    let scales = match &scales {
        Some(s) => s.as_slice().map_err(|_| lerr("scales", "must be a C-contiguous 1-D array"))?,
        None => &[],
    };
    let s = Side {
        layout: &a,
        planes: src_planes,
        tokens: tokens_of("src", &src_block_table, &src_slot_mapping)?,
        heads: src_heads,
    };
    let mut d = Side {
        layout: &b,
        planes: dst_planes,
        tokens: tokens_of("dst", &dst_block_table, &dst_slot_mapping)?,
        heads: dst_heads,
    };
    let opts = ConvertOptions { tokens, scales, threads };
    py.detach(|| layout::convert(&s, &mut d, &opts)).map_err(to_py)
}

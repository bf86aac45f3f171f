"""KV-cache layouts of real engines, and conversion between them with Rust kernels.

Every engine stores the KV cache differently: dimension order (NHD vs HND), K and V packed in one
dimension or kept in separate tensors, block size and block table, dtype and where the quantisation scales
live, and MLA caches have no head dimension at all. :func:`layouts` lists the layouts kvwire knows (with the
engine version each describes); a :class:`Layout` is one of them with a model geometry, a dtype and a block
size; :func:`convert` moves one request's KV from one layout to another: gathering through a block table or
slot mapping (``-1`` entries are padding and skipped), scattering through the destination's table, changing
the block size, slicing or merging heads for tensor-parallel resharding, and quantising on the way (fp8 per
tensor, fp8 per token-head with inline scales, the 656-byte ``fp8_ds_mla`` record) or back, and changing the
fp8 flavour between OCP's fn and AMD's fnuz with vLLM's scale adjustment (:func:`scale_factor`).

>>> import numpy as np
>>> from kvwire import layout
>>> nhd = layout.Layout("vllm_nhd", layers=2, heads=8, head_dim=128, block_size=16, dtype="float16")
>>> hnd = nhd.with_(name="vllm_hnd")
>>> nhd.shape(blocks=4)                       # vLLM: per layer (blocks, block_size, heads, 2·head_dim)
(2, 4, 16, 8, 256)
>>> cache = np.random.default_rng(0).standard_normal(nhd.shape(4)).astype(np.float16)
>>> table = np.array([2, 0, 3], dtype=np.int32)  # the request's blocks, in token order
>>> out = layout.convert(cache, nhd, hnd, tokens=40, src_block_table=table)
>>> out.shape                                 # contiguous destination blocks 0, 1, 2
(2, 3, 8, 16, 256)
>>> bool((out[:, 1, 5, 3, :] == cache[:, 0, 3, 5, :]).all())  # block 1 of the output = block 0 of the cache
True
>>> hnd.nbytes(tokens=40)                     # 3 blocks · 16 tokens · 2 layers · 8 heads · 256 values · 2 B
393216

Inputs are numpy arrays, C-contiguous, of the layout's dtype (``bfloat16`` arrays from ``ml_dtypes``, or
their ``uint16`` bits; fp8 and record layouts are ``uint8``). Layouts with separate K and V tensors
(``vllm_legacy``, ``sglang``) take and return a ``(k, v)`` tuple. Engines that keep one tensor per layer are
described with the layers stacked on the first axis: pass ``layers=1`` to convert a single layer's tensor.
The buffers are handed to Rust without copying and the GIL is released while the kernel runs; large
conversions use every core, with output identical to one thread.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

import kvwire._core as _core
from kvwire.errors import LayoutError, ResourceError
from kvwire.kernels import _args

#: Buffer dtype names each layout dtype accepts (``uint16`` holds bfloat16 bits).
_ACCEPTED = {
    "bfloat16": ("bfloat16", "uint16"),
    "float16": ("float16",),
    "float32": ("float32",),
    "fp8_e4m3": ("uint8", "float8_e4m3fn"),
    "fp8_e4m3fnuz": ("uint8", "float8_e4m3fnuz"),
    "fp8_e5m2": ("uint8", "float8_e5m2"),
    "fp8_e5m2fnuz": ("uint8", "float8_e5m2fnuz"),
    "fp8_per_token_head": ("uint8",),
    "fp8_per_token_head_fnuz": ("uint8",),
    "fp8_ds_mla": ("uint8",),
}

#: Layout dtypes whose fp8 scales are one per (layer, K/V), kept outside the cache.
_SEPARATE_SCALES = ("fp8_e4m3", "fp8_e4m3fnuz", "fp8_e5m2", "fp8_e5m2fnuz")

#: Largest token count :meth:`Layout.nbytes` accepts (byte counts stay far below 2^64), and the largest
#: block (or token) count of :meth:`Layout.shape` and :meth:`Layout.empty`.
_MAX_TOKENS = 2**40

#: Largest layers, heads, head_dim and block_size of a :class:`Layout` (the core's limit).
_MAX_DIM = 2**20

Array = npt.NDArray[Any]
Buffers = Array | tuple[Array, Array]


def layouts() -> pl.DataFrame:
    """Every layout kvwire knows: name, engine, version tag, MLA or not, paged or contiguous, K/V packing,
    number of buffers, and a description of its shape.

    >>> from kvwire import layout
    >>> df = layout.layouts()
    >>> "vllm_hnd" in df["name"].to_list() and "fp8_ds_mla" not in df["name"].to_list()
    True
    """
    return pl.DataFrame(_core.layout_catalog())


def dtypes() -> list[str]:
    """Layout dtypes: ``bfloat16``, ``float16``, ``float32``, ``fp8_e4m3`` (per-tensor scales kept outside
    the cache) and its AMD flavour ``fp8_e4m3fnuz`` (MI300, gfx942), ``fp8_e5m2`` and ``fp8_e5m2fnuz`` (also
    with separate scales), ``fp8_per_token_head`` (an fp32 scale after every head vector) and
    ``fp8_per_token_head_fnuz``, and ``fp8_ds_mla`` (the 656-byte DeepSeek MLA record)."""
    return list(_ACCEPTED)


def scale_factor(src_dtype: str, dst_dtype: str) -> float:
    """What an fp8 flavour change (OCP fn ↔ AMD fnuz) multiplies the scales by: destination scale = source
    scale x this. :func:`convert` changes the codes (and inline per token-head scales) itself; scales kept
    outside the cache (``k_scale``/``v_scale``) are the caller's to multiply.

    E4M3FN → E4M3FNUZ doubles the scale and keeps the bits (vLLM's ``normalize_e4m3fn_to_e4m3fnuz``), so it is
    exact; back, the scale is halved and every value up to 224·scale is exact (vLLM on gfx942 scales by
    amax/224) while ±240·scale saturates to ±224·scale. E5M2 ↔ E5M2FNUZ keeps the scale: E5M2 → E5M2FNUZ is
    exact, and E5M2FNUZ → E5M2 rounds values below 2^-14·scale to nearest even. NaN stays NaN; E5M2's ±Inf
    saturates to ±max. ``docs/reference/layouts.md`` ("fp8 flavours") has the table.

    >>> scale_factor("fp8_e4m3", "fp8_e4m3fnuz"), scale_factor("fp8_e5m2fnuz", "fp8_e5m2")
    (2.0, 1.0)
    """
    for name, v in (("src_dtype", src_dtype), ("dst_dtype", dst_dtype)):
        if _args.text(v, name, LayoutError) not in _ACCEPTED:
            raise LayoutError(f"{name}: unknown dtype {v!r} (known: {', '.join(_ACCEPTED)})", name)
    factor = _core.layout_scale_factor(src_dtype, dst_dtype)
    if factor is None:
        raise LayoutError(
            f"dst_dtype: {src_dtype} → {dst_dtype} is not an fp8 flavour change (fn ↔ fnuz of the same element "
            "and scale placement)",
            "dst_dtype",
        )
    return float(factor)


@dataclasses.dataclass(frozen=True)
class Layout:
    """One engine layout with a geometry, a dtype and a block size.

    Attributes:
        name: a row of :func:`layouts` (``"vllm_hnd"``, ``"sglang"``, ``"mla"``, ...).
        layers: transformer layers in the buffer (1 for one layer's tensor).
        heads: KV heads this cache holds (this tensor-parallel rank's share; 1 for MLA).
        head_dim: values per head vector (576 for DeepSeek MLA: 512 latent + 64 RoPE).
        block_size: tokens per block of a paged layout (SGLang's page size; ignored by contiguous ones).
        dtype: one of :func:`dtypes`.
    """

    name: str
    layers: int
    heads: int
    head_dim: int
    block_size: int = 16
    dtype: str = "bfloat16"

    def __post_init__(self) -> None:
        _args.text(self.name, "layout.name", LayoutError)
        _args.text(self.dtype, "layout.dtype", LayoutError)
        for f in ("layers", "heads", "head_dim", "block_size"):
            v = getattr(self, f)
            if not isinstance(v, int | np.integer) or isinstance(v, bool):
                raise LayoutError(f"layout.{f}: expected an integer, got {v!r}", f"layout.{f}")
            if v < 1:
                raise LayoutError(f"layout.{f}: must be ≥ 1, got {v}", f"layout.{f}")
            if v > _MAX_DIM:
                shown = f"{v:,}" if v < 10**20 else "a number of more than 20 digits"
                raise LayoutError(f"layout.{f}: {shown} is implausibly large (limit 2^20)", f"layout.{f}")
        _ = self._info  # validates name, dtype and the geometry (and caches the description)

    def _spec(self) -> tuple[str, str, int, int, int, int]:
        return (self.name, self.dtype, int(self.block_size), int(self.layers), int(self.heads), int(self.head_dim))

    def with_(self, **changes: Any) -> Layout:
        """A copy with some fields changed: ``nhd.with_(name="vllm_hnd", dtype="fp8_e4m3")``.

        Raises:
            LayoutError: a field that is not one of the layout's (``path`` names it), or a value it refuses.
        """
        fields = [f.name for f in dataclasses.fields(self)]
        for k in changes:
            if k not in fields:
                raise LayoutError(f"{k}: not a field of a Layout (fields: {', '.join(fields)})", k)
        return dataclasses.replace(self, **changes)

    @functools.cached_property
    def _info(self) -> dict[str, Any]:
        # Computed once per Layout (the dataclass is frozen, so it cannot go stale).
        return dict(_core.layout_describe(self._spec()))

    def describe(self) -> dict[str, Any]:
        """Engine, version tag, packing, scale placement, numpy dtype, bytes per block (or token) and the
        shape of each buffer per block (or token)."""
        return dict(self._info)

    @property
    def paged(self) -> bool:
        """Whether tokens live in blocks addressed through a block table or slot mapping."""
        return bool(self._info["paged"])

    @property
    def buffers(self) -> int:
        """1, or 2 for layouts with separate K and V tensors."""
        return len(self._info["plane_shapes"])

    def shape(self, blocks: int) -> tuple[int, ...]:
        """Shape of the (K) buffer holding ``blocks`` blocks, or ``blocks`` tokens for a contiguous layout.
        For layouts with separate K and V, :meth:`shapes` gives both."""
        return self.shapes(blocks)[0]

    def shapes(self, blocks: int) -> list[tuple[int, ...]]:
        """Shapes of every buffer holding ``blocks`` blocks (or tokens, for a contiguous layout).

        Raises:
            LayoutError: ``blocks`` is not a whole number from 0 to 2^40.
        """
        blocks = _args.whole(blocks, "blocks", 0, _MAX_TOKENS, LayoutError)
        d = self._info
        out = []
        for shape, axis in zip(d["plane_shapes"], d["count_dims"], strict=True):
            s = [int(v) for v in shape]
            s[axis] *= blocks
            out.append(tuple(s))
        return out

    def nbytes(self, tokens: int) -> int:
        """Exact bytes a request of ``tokens`` tokens occupies: whole blocks for paged layouts (the last one
        partly filled) plus per-tensor scales kept outside the cache (``fp8_e4m3``)."""
        if not isinstance(tokens, int | np.integer) or isinstance(tokens, bool) or not 0 <= tokens <= _MAX_TOKENS:
            raise LayoutError(f"tokens: expected an integer in 0..={_MAX_TOKENS}, got {tokens!r}", "tokens")
        return int(_core.layout_request_bytes(self._spec(), int(tokens)))

    def empty(self, blocks: int) -> Buffers:
        """Zero-filled buffers for ``blocks`` blocks (or tokens): one array, or ``(k, v)``.

        Raises:
            LayoutError: ``blocks`` is not a whole number from 0 to 2^40.
            ResourceError: the buffers would not fit in the memory available (refused before allocating).

        >>> Layout("vllm_nhd", layers=1, heads=1, head_dim=8, block_size=4, dtype="float32").empty(2).shape
        (1, 2, 4, 1, 16)
        """
        return self._empty(blocks, "blocks")

    def _empty(self, blocks: int, path: str) -> Buffers:
        """:meth:`empty`, with the memory check naming ``path`` (the argument that set the size)."""
        dt = _numpy_dtype(self.dtype)
        unit = "blocks" if self.paged else "tokens"
        if isinstance(blocks, int | np.integer) and not isinstance(blocks, bool) and blocks > 0:
            # Checked before the shapes: a count from a destination table entry may exceed their bound too.
            per = sum(_args.size(s) for s in self.shapes(1)) * dt.itemsize
            _args.check_memory(per * int(blocks), path, f"{int(blocks):,} {unit} of {self.name}")
            if blocks > _MAX_TOKENS and path != "blocks":  # where the memory available cannot be read
                raise ResourceError(f"{path}: a buffer of {int(blocks):,} {unit} is beyond the limit of 2^40", path)
        shapes = self.shapes(blocks)
        arrays = [_args.allocate(s, dt, path, f"{int(blocks):,} {unit} of {self.name}", zero=True) for s in shapes]
        return arrays[0] if len(arrays) == 1 else (arrays[0], arrays[1])


def _count_axis(layout: Layout) -> int:
    """The engine dimension that grows with the number of blocks (or tokens)."""
    return int(layout._info["count_dims"][0])


def _numpy_dtype(dtype: str) -> np.dtype[Any]:
    if dtype == "bfloat16":
        try:
            import ml_dtypes

            bf16: np.dtype[Any] = np.dtype(ml_dtypes.bfloat16)
            return bf16
        except ImportError:  # pragma: no cover - ml_dtypes is optional
            return np.dtype(np.uint16)
    return np.dtype({"float16": np.float16, "float32": np.float32}.get(dtype, np.uint8))


def _buffers(x: Any, layout: Layout, what: str) -> list[Array]:
    arrays = list(x) if isinstance(x, tuple | list) else [x]
    if len(arrays) != layout.buffers:
        want = "a (k, v) tuple" if layout.buffers == 2 else "one array"
        raise LayoutError(f"{what}: layout {layout.name} takes {want}, got {len(arrays)}", what)
    for i, a in enumerate(arrays):
        p = f"{what}[{i}]" if len(arrays) > 1 else what
        if not isinstance(a, np.ndarray):
            raise LayoutError(f"{p}: expected a numpy array, got {type(a).__name__}", p)
        if a.dtype.name not in _ACCEPTED[layout.dtype]:
            raise LayoutError(
                f"{p}: layout dtype {layout.dtype} needs a {' or '.join(_ACCEPTED[layout.dtype])} array, got {a.dtype}",
                p,
            )
        if not a.dtype.isnative:
            # The kernels read raw bytes: a big-endian array would be converted as garbage.
            raise LayoutError(
                f"{p}: byte order {a.dtype.byteorder!r} is not this machine's; convert with "
                f"a.astype(a.dtype.newbyteorder('='))",
                p,
            )
        if not a.flags.c_contiguous:
            raise LayoutError(f"{p}: must be C-contiguous (np.ascontiguousarray copies it)", p)
        per = layout.shapes(1)[i]
        axis = _count_axis(layout)
        count = a.shape[axis] // per[axis] if a.ndim == len(per) and per[axis] else 0
        if count < 1 or a.shape != layout.shapes(count)[i]:
            unit = "blocks" if layout.paged else "tokens"
            expect = tuple("n" if j == axis else s for j, s in enumerate(per))
            raise LayoutError(
                f"{p}: shape {a.shape} is not a {layout.name} buffer {expect} (n = {unit}) for layers="
                f"{layout.layers}, heads={layout.heads}, head_dim={layout.head_dim}, block_size={layout.block_size}, "
                f"dtype={layout.dtype}",
                p,
            )
    return arrays


def _int_array(x: Any, dtype: type, what: str) -> Array | None:
    if x is None:
        return None
    a = np.asarray(x)
    if a.size == 0 and a.ndim == 1:
        return np.zeros(0, dtype=dtype)  # [] is an empty table, whatever dtype numpy gives it
    if a.ndim != 1 or not (np.issubdtype(a.dtype, np.integer)):
        what_is = f"a {a.ndim}-D array" if a.ndim != 1 else f"{a.dtype} values"
        raise LayoutError(f"{what}: expected a 1-D list or array of whole numbers, got {what_is}", what)
    info = np.iinfo(dtype)
    if a.size and (a.min() < info.min or a.max() > info.max):
        raise LayoutError(f"{what}: values must fit in {np.dtype(dtype).name}", what)
    return np.ascontiguousarray(a, dtype=dtype)


def _heads(x: Any, what: str) -> tuple[int, int] | None:
    if x is None:
        return None
    if isinstance(x, slice):
        if x.step not in (None, 1) or x.start is None or x.stop is None:
            raise LayoutError(f"{what}: expected slice(start, stop) with both ends, got {x}", what)
        x = (x.start, x.stop)
    ends = tuple(x) if isinstance(x, tuple | list | np.ndarray) else None
    if (
        ends is None
        or len(ends) != 2
        or not all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in ends)
    ):
        raise LayoutError(f"{what}: expected (start, stop), two whole numbers, got {x!r}", what)
    start, stop = (int(v) for v in ends)
    if start < 0 or stop <= start:
        raise LayoutError(f"{what}: ({start}, {stop}) is not a non-empty range", what)
    if stop > 2**20:
        raise LayoutError(f"{what}: heads end at most at 2^20 (a layout's head limit), got a range to {stop:.3g}", what)
    return (start, stop)


def _scales(layout: Layout, k_scale: Any, v_scale: Any) -> Array:
    per_layer = []
    for name, given in (("k_scale", k_scale), ("v_scale", v_scale)):
        try:
            raw = np.asarray(given)
            if raw.dtype.kind not in "fiu":  # "1", True and None are not scales
                raise TypeError
            a = raw.astype(np.float64)
        except (TypeError, ValueError):
            raise LayoutError(f"{name}: expected a number or one number per layer, got {given!r}", name) from None
        if a.ndim > 1 or (a.ndim == 1 and a.shape[0] != layout.layers):
            raise LayoutError(
                f"{name}: expected a number or {layout.layers} numbers (one per layer), got shape {a.shape}", name
            )
        f32 = a.astype(np.float32)
        # Checked as the float32 the kernels use: 1e-46 is > 0 but becomes 0 there.
        if not (np.isfinite(f32).all() and (f32 >= np.finfo(np.float32).tiny).all()):
            raise LayoutError(
                f"{name}: scales must be finite float32 numbers ≥ {np.finfo(np.float32).tiny:.3g}, got {given!r}",
                name,
            )
        per_layer.append(np.broadcast_to(f32, (layout.layers,)))
    return np.ascontiguousarray(np.stack(per_layer, axis=1).reshape(-1))


def convert(
    src: Buffers,
    src_layout: Layout,
    dst_layout: Layout,
    *,
    tokens: int | None = None,
    src_block_table: Sequence[int] | Array | None = None,
    src_slot_mapping: Sequence[int] | Array | None = None,
    dst_block_table: Sequence[int] | Array | None = None,
    dst_slot_mapping: Sequence[int] | Array | None = None,
    src_heads: tuple[int, int] | slice | None = None,
    dst_heads: tuple[int, int] | slice | None = None,
    k_scale: float | Sequence[float] = 1.0,
    v_scale: float | Sequence[float] = 1.0,
    out: Buffers | None = None,
    threads: int | None = None,
) -> Buffers:
    """Convert one request's KV cache from ``src_layout`` to ``dst_layout``.

    Args:
        src: the source cache: one array, or ``(k, v)`` for layouts with separate K and V.
        src_layout, dst_layout: the two :class:`Layout` s (same layers and head_dim; MLA only to MLA).
        tokens: tokens to convert (required with ``src_block_table``; default: all the source addresses).
        src_block_table: physical block of each of the request's logical blocks, in token order (int32).
        src_slot_mapping: ``block * block_size + offset`` of each token (int64); ``-1`` entries are padding
            and skipped.
        dst_block_table, dst_slot_mapping: where the tokens go in a paged destination (default: blocks
            0, 1, 2, ... in order). Destination blocks and slots must be distinct.
        src_heads, dst_heads: ``(start, stop)`` head ranges, for tensor-parallel resharding: read heads
            ``src_heads`` of the source and write them as heads ``dst_heads`` of the destination (TP8 → TP2:
            four conversions into ``dst_heads=(0, 2)``, ``(2, 4)``, ...).
        k_scale, v_scale: fp8 per-tensor scales (a number, or one per layer) when quantising to or from
            a separate-scale fp8 dtype (``fp8_e4m3``, ``fp8_e4m3fnuz``, ``fp8_e5m2``, ``fp8_e5m2fnuz``):
            stored byte = fp8(x / scale), RNE and saturating, as vLLM's CUDA path. A flavour change between
            two of them (fn ↔ fnuz) does not use them: the destination's scales are these x
            :func:`scale_factor`.
        out: the destination buffers to write into (only the converted tokens' slots are written); default:
            new zeroed arrays just large enough.
        threads: threads to use (default: every core for conversions of 1 MiB and more).

    Returns:
        ``out``, or the new destination array (a ``(k, v)`` tuple for separate-K/V layouts).

    Raises:
        LayoutError: naming the argument that does not fit (shape, dtype, table entry, head range, ...).
    """
    for name, given in (("src_layout", src_layout), ("dst_layout", dst_layout)):
        if not isinstance(given, Layout):
            raise LayoutError(f"{name}: expected a kvwire.layout.Layout, got {type(given).__name__}", name)
    srcs = _buffers(src, src_layout, "src")
    sbt = _int_array(src_block_table, np.int32, "src_block_table")
    ssm = _int_array(src_slot_mapping, np.int64, "src_slot_mapping")
    dbt = _int_array(dst_block_table, np.int32, "dst_block_table")
    dsm = _int_array(dst_slot_mapping, np.int64, "dst_slot_mapping")
    if tokens is not None:
        tokens = _args.whole(tokens, "tokens", 0, _MAX_TOKENS, LayoutError)
    threads = _args.threads(threads, LayoutError)
    n = _tokens_needed(srcs, src_layout, tokens, sbt, ssm)
    if out is None:
        count, path = _count_needed(dst_layout, n, dbt, dsm)
        out = dst_layout._empty(count, path)
    dsts = _buffers(out, dst_layout, "out")
    for i, d in enumerate(dsts):
        for j, s in enumerate(srcs):
            # Through any base object (a view of a view, a frombuffer of the same memory): the buffers'
            # address ranges, which for C-contiguous arrays is exactly whether they overlap.
            if np.may_share_memory(d, s):
                where = f"out[{i}]" if len(dsts) > 1 else "out"
                whom = f"src[{j}]" if len(srcs) > 1 else "src"
                raise LayoutError(f"{where}: shares memory with {whom}; the output must be a separate buffer", where)
    scales = None
    if src_layout.dtype in _SEPARATE_SCALES or dst_layout.dtype in _SEPARATE_SCALES:
        scales = _scales(src_layout, k_scale, v_scale)
    _core.layout_convert(
        [a.reshape(-1).view(np.uint8) for a in srcs],
        src_layout._spec(),
        [a.reshape(-1).view(np.uint8) for a in dsts],
        dst_layout._spec(),
        tokens=None if tokens is None else int(tokens),
        src_block_table=sbt,
        src_slot_mapping=ssm,
        dst_block_table=dbt,
        dst_slot_mapping=dsm,
        src_heads=_heads(src_heads, "src_heads"),
        dst_heads=_heads(dst_heads, "dst_heads"),
        scales=scales,
        threads=threads,
    )
    return out


def _tokens_needed(
    srcs: list[Array], layout: Layout, tokens: int | None, table: Array | None, slots: Array | None
) -> int:
    """The tokens the conversion moves, checked against the source before anything is allocated: a token
    count beyond the source buffer (or beyond what its block table covers) is refused here, not turned into
    a destination of that size."""
    per = layout.block_size if layout.paged else 1
    for name, given in (("src_block_table", table), ("src_slot_mapping", slots)):
        if given is not None and not layout.paged:
            raise LayoutError(f"{name}: layout {layout.name} is not paged", name)
    if slots is not None:
        return int((slots != -1).sum())
    if table is not None:
        if tokens is None:
            raise LayoutError("tokens: give the number of tokens with a source block table", "tokens")
        needed = -(-tokens // per)
        if table.size < needed:
            raise LayoutError(
                f"src_block_table: {tokens:,} tokens need {needed:,} blocks of {per}, the table has {table.size:,}",
                "src_block_table",
            )
        return int(tokens)
    axis = _count_axis(layout)
    count = int(srcs[0].shape[axis]) // layout.shapes(1)[0][axis]
    if tokens is not None and tokens > count * per:
        raise LayoutError(f"tokens: {tokens:,} tokens exceed the cache: src holds {count:,}·{per} slots", "tokens")
    return count * per if tokens is None else int(tokens)


def _count_needed(layout: Layout, tokens: int, table: Array | None, slots: Array | None) -> tuple[int, str]:
    """Blocks (or tokens) of a new destination just large enough for ``tokens`` tokens written through
    ``table`` or ``slots``, and the argument that sets that size (for the memory check's error). The
    lengths and signs of the destination's table and mapping are checked here, before the allocation; the
    remaining checks (distinct entries) are the core's."""
    for name, given in (("dst_block_table", table), ("dst_slot_mapping", slots)):
        if given is not None and not layout.paged:
            raise LayoutError(f"{name}: layout {layout.name} is not paged", name)
    if not layout.paged:
        return max(tokens, 1), "tokens"
    bs = layout.block_size
    if slots is not None:
        bad = np.flatnonzero(slots < -1)
        if bad.size:
            i = int(bad[0])
            raise LayoutError(
                f"dst_slot_mapping[{i}]: slot {int(slots[i])} is negative (-1 marks padding)", f"dst_slot_mapping[{i}]"
            )
        valid = int((slots != -1).sum())
        if valid != tokens:
            raise LayoutError(
                f"dst_slot_mapping: has {valid:,} slots that are not padding, expected {tokens:,} tokens",
                "dst_slot_mapping",
            )
        if not valid:
            return 1, "dst_slot_mapping"
        i = int(np.argmax(slots))
        return int(slots[i]) // bs + 1, f"dst_slot_mapping[{i}]"
    blocks = -(-tokens // bs)
    if table is not None:
        if table.size < blocks:
            raise LayoutError(
                f"dst_block_table: {tokens:,} tokens need {blocks:,} blocks of {bs}, the table has {table.size:,}",
                "dst_block_table",
            )
        used = table[:blocks]
        bad = np.flatnonzero(used < 0)
        if bad.size:
            j = int(bad[0])
            raise LayoutError(f"dst_block_table[{j}]: block {int(used[j])} is negative", f"dst_block_table[{j}]")
        if not used.size:
            return 1, "dst_block_table"
        j = int(np.argmax(used))
        return int(used[j]) + 1, f"dst_block_table[{j}]"
    return max(blocks, 1), "tokens"


def gather(
    cache: Buffers,
    layout: Layout,
    *,
    block_table: Sequence[int] | Array | None = None,
    slot_mapping: Sequence[int] | Array | None = None,
    tokens: int | None = None,
    heads: tuple[int, int] | slice | None = None,
    threads: int | None = None,
) -> Array:
    """One request's KV out of a paged cache, in the neutral form ``(layers, 2, tokens, heads, head_dim)``
    (MLA: ``(layers, tokens, 576)``), same dtype. Equivalent to :func:`convert` to ``neutral``.

    >>> import numpy as np
    >>> from kvwire import layout
    >>> l = layout.Layout("sglang", layers=1, heads=2, head_dim=4, block_size=1, dtype="float32")
    >>> k, v = l.empty(8)
    >>> k.shape                                   # (layers, slots, heads, head_dim)
    (1, 8, 2, 4)
    >>> k[0, 5] = 1.0
    >>> layout.gather((k, v), l, slot_mapping=[5, -1, 2])[0, 0, :, 0, 0].tolist()  # K of head 0, 2 tokens
    [1.0, 0.0]
    """
    name = "mla_neutral" if bool(layout._info["mla"]) else "neutral"
    hs = _heads(heads, "heads")
    dst = layout.with_(name=name, heads=(hs[1] - hs[0]) if hs else layout.heads)
    out = convert(
        cache,
        layout,
        dst,
        tokens=tokens,
        src_block_table=block_table,
        src_slot_mapping=slot_mapping,
        src_heads=hs,
        threads=threads,
    )
    assert isinstance(out, np.ndarray)
    return out


__all__ = ["Layout", "convert", "dtypes", "gather", "layouts", "scale_factor"]

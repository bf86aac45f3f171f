//! KV-cache number formats: bit-exact element codecs (`minifloat`), block-scaled formats (`schemes`), the
//! format table the simulator uses for byte ratios (`formats`), and the public entry points below, which
//! validate sizes once and then run the kernels on every core with identical output for any thread count.
//!
//! ```
//! use kvwire_core::quant::{quantize, dequantize, format, Options, Source};
//! let x: Vec<f32> = (0..64).map(|i| (i as f32 - 32.0) / 8.0).collect();
//! let fmt = format("mxfp4").unwrap();
//! let q = quantize(Source::F32(&x), &[2, 32], 1, fmt, &Options::default()).unwrap();
//! assert_eq!(q.codes.len(), 32); // 64 FP4 codes, two per byte
//! let mut back = vec![0f32; 64];
//! dequantize(&q.view(), &[2, 32], 1, fmt, &Options::default(), &mut back).unwrap();
//! assert_eq!(back[0], -4.0);
//! ```

pub mod accuracy;
pub mod alloc;
pub mod block;
pub mod codec;
pub mod formats;
pub mod minifloat;
pub mod nvfp4;
pub mod schemes;
pub mod simd;

pub use block::Layout;
pub use formats::{format, Format, Scheme, FORMATS};
pub use minifloat::{element_format, Element, MiniFloat};
pub use schemes::ScaleRule;
pub use simd::Isa;

use block::{par_units, thread_count, BlockScheme};
use codec::{packed_len, Bf16, Input, F16};
use schemes::{Fp8Scaled, IntGroup, Mx, Nvfp4};

use std::marker::PhantomData;

use crate::error::{Error, Result};

/// Input values.
#[derive(Clone, Copy, Debug)]
pub enum Source<'a> {
    F32(&'a [f32]),
    /// `bfloat16` bit patterns.
    Bf16(&'a [u16]),
    /// IEEE `float16` bit patterns.
    F16(&'a [u16]),
}

impl Source<'_> {
    pub fn len(&self) -> usize {
        match self {
            Source::F32(s) => s.len(),
            Source::Bf16(s) | Source::F16(s) => s.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Call `$body` with `$x` bound to the source slice as `&[impl Input]`.
macro_rules! with_input {
    ($src:expr, $x:ident => $body:expr) => {
        match $src {
            Source::F32(s) => {
                let $x: &[f32] = s;
                $body
            }
            Source::Bf16(s) => {
                // SAFETY: Bf16 is repr(transparent) over u16.
                let $x: &[Bf16] = unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<Bf16>(), s.len()) };
                $body
            }
            Source::F16(s) => {
                // SAFETY: F16 is repr(transparent) over u16.
                let $x: &[F16] = unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<F16>(), s.len()) };
                $body
            }
        }
    };
}

/// Run-time options.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Worker threads (`None`: all cores for ≥ 1 Mi values, else 1). Output never depends on it.
    pub threads: Option<usize>,
    /// Instruction-set level (`None`: the best available).
    pub isa: Option<Isa>,
    /// MX scale rule.
    pub scale_rule: ScaleRule,
    /// Override the format's group size (fp8 and integer groups only).
    pub group: Option<usize>,
    /// A given fp32 tensor scale for the formats that have one (NVFP4's g, per-tensor fp8's scale) — a
    /// calibrated (static) scale, as engines quantise with — instead of one from the tensor's largest
    /// magnitude; the quantisation is then one pass over the input. Values beyond the range it covers
    /// saturate.
    pub tensor_scale: Option<f32>,
}

impl Default for Options {
    fn default() -> Self {
        Options { threads: None, isa: None, scale_rule: ScaleRule::Floor, group: None, tensor_scale: None }
    }
}

impl Options {
    fn isa(&self) -> Isa {
        self.isa.unwrap_or_else(simd::detect)
    }
}

/// Per-block scales.
#[derive(Clone, Debug, PartialEq)]
pub enum Scales {
    None,
    /// E8M0 bytes (MX) or E4M3 bytes (NVFP4).
    Bytes(Vec<u8>),
    F32(Vec<f32>),
    /// fp16 bit patterns.
    F16(Vec<u16>),
}

/// A quantised tensor: packed codes plus scales, in the layout of `quant/block.rs`.
#[derive(Clone, Debug, PartialEq)]
pub struct Quantized {
    pub codes: Vec<u8>,
    pub scales: Scales,
    /// fp16 zero points (asymmetric integer groups).
    pub zeros: Option<Vec<u16>>,
    /// fp32 tensor scale (per-tensor fp8, NVFP4).
    pub tensor_scale: Option<f32>,
    /// Values per block scale along the axis (0: per tensor or none).
    pub group: usize,
}

/// Borrowed parts of a quantised tensor, for decoding.
#[derive(Clone, Copy, Debug)]
pub struct QuantizedView<'a> {
    pub codes: &'a [u8],
    pub scales: ScalesView<'a>,
    pub zeros: Option<&'a [u16]>,
    pub tensor_scale: Option<f32>,
    pub group: usize,
}

/// Borrowed scales.
#[derive(Clone, Copy, Debug)]
pub enum ScalesView<'a> {
    None,
    Bytes(&'a [u8]),
    F32(&'a [f32]),
    F16(&'a [u16]),
}

impl Quantized {
    pub fn view(&self) -> QuantizedView<'_> {
        QuantizedView {
            codes: &self.codes,
            scales: match &self.scales {
                Scales::None => ScalesView::None,
                Scales::Bytes(v) => ScalesView::Bytes(v),
                Scales::F32(v) => ScalesView::F32(v),
                Scales::F16(v) => ScalesView::F16(v),
            },
            zeros: self.zeros.as_deref(),
            tensor_scale: self.tensor_scale,
            group: self.group,
        }
    }
}

/// Values per MX block.
const MX_BLOCK: usize = 32;

/// Evaluate `$body` with `$s` the integer-group scheme of `bits` (8 or 4) and `symmetric`, as a type.
macro_rules! with_int {
    ($bits:expr, $sym:expr, $s:ident => $body:expr) => {
        match ($bits, $sym) {
            (8, true) => {
                #[allow(non_upper_case_globals)]
                const $s: IntGroup<8, true> = IntGroup;
                $body
            }
            (8, false) => {
                #[allow(non_upper_case_globals)]
                const $s: IntGroup<8, false> = IntGroup;
                $body
            }
            (_, true) => {
                #[allow(non_upper_case_globals)]
                const $s: IntGroup<4, true> = IntGroup;
                $body
            }
            (_, false) => {
                #[allow(non_upper_case_globals)]
                const $s: IntGroup<4, false> = IntGroup;
                $body
            }
        }
    };
}

fn qerr(path: &str, reason: impl Into<String>) -> Error {
    Error::Quant { path: path.to_string(), reason: reason.into() }
}

/// The given tensor scale, checked: only for the formats with one tensor scale; finite and positive (a
/// normal `f32` for NVFP4, whose block scales multiply it by as little as 2⁻⁶).
fn tensor_scale_of(fmt: &Format, group: Option<usize>, opts: &Options) -> Result<Option<f32>> {
    let Some(g) = opts.tensor_scale else { return Ok(None) };
    let normal = match fmt.scheme {
        Scheme::Nvfp4 => true,
        Scheme::Fp8 { .. } if group.is_none() => false,
        _ => {
            return Err(qerr(
                "tensor_scale",
                format!("{} has no tensor scale (only nvfp4 and the per-tensor fp8 formats do)", fmt.name),
            ))
        }
    };
    let least = if normal { f32::MIN_POSITIVE } else { f32::from_bits(1) };
    if !(g.is_finite() && g >= least) {
        return Err(qerr("tensor_scale", format!("must be a finite number ≥ {least:e}, got {g}")));
    }
    Ok(Some(g))
}

/// Check shape/axis and return the layout.
fn layout_of(n: usize, shape: &[usize], axis: usize) -> Result<Layout> {
    if shape.is_empty() {
        return Err(qerr("x", "needs at least one dimension"));
    }
    if axis >= shape.len() {
        return Err(qerr("axis", format!("axis {axis} is out of range for {} dimensions", shape.len())));
    }
    let count: usize = shape.iter().product();
    if count != n {
        return Err(qerr("x", format!("shape {shape:?} holds {count} values but {n} were given")));
    }
    Ok(Layout::around(shape, axis))
}

/// The group size a format uses with `opts` (an override only where the format allows one).
fn group_of(fmt: &Format, opts: &Options) -> Result<Option<usize>> {
    match (fmt.scheme, opts.group) {
        (Scheme::Fp8 { group, .. }, g) => Ok(g.or(group)),
        (Scheme::Int { group, .. }, g) => Ok(Some(g.unwrap_or(group))),
        (_, Some(g)) if Some(g) != fmt.block() => Err(qerr(
            "group_size",
            format!("{} has a fixed block of {:?}; group_size cannot change it", fmt.name, fmt.block()),
        )),
        _ => Ok(fmt.block()),
    }
}

/// Check that `block` divides the axis and that packed codes stay byte-aligned.
fn check_blocks(layout: Layout, block: usize, bits: u32, fmt: &Format) -> Result<()> {
    if block == 0 {
        return Err(qerr("group_size", "must be ≥ 1"));
    }
    if layout.len % block != 0 {
        return Err(qerr(
            "axis",
            format!(
                "{} needs the quantisation axis to be a multiple of {block}, but it has length {}",
                fmt.name, layout.len
            ),
        ));
    }
    let unit = codec::pack_unit(bits).0;
    let aligned = if layout.inner == 1 { block % unit == 0 } else { layout.inner % unit == 0 };
    if !aligned {
        return Err(qerr(
            "x",
            format!(
                "{}-bit codes are packed {unit} per unit: the block ({block}) or the dimensions after the axis \
                 ({}) must be a multiple of {unit}",
                bits, layout.inner
            ),
        ));
    }
    Ok(())
}

/// Largest finite magnitude of the input (per-tensor scales). Exact, so thread-count independent.
fn finite_amax(src: Source, threads: usize, isa: Isa) -> f32 {
    const UNIT: usize = 1 << 16;
    let n = src.len();
    let units = n.div_ceil(UNIT);
    let mut maxima = vec![0u32; units];
    let mut none: [u8; 0] = [];
    with_input!(src, x => par_units(units, threads, &mut maxima, 1, &mut none, 0, |first, k, out, _| {
        crate::kernel!(isa, <I: Input> { x: &'k [I] = x, out: &'k mut [u32] = out, first: usize = first, k: usize = k }
            -> () => {
            for (u, m) in out.iter_mut().enumerate().take(k) {
                let lo = (first + u) * UNIT;
                let chunk = &x[lo..(lo + UNIT).min(x.len())];
                // Branch-free (select, then max) into 16 lanes so that the reduction vectorises, with the
                // input asked for 4096 values ahead, a block at a time (the hardware prefetcher stops at
                // page boundaries; a prefetch never faults, so the address may point past the end).
                let keep = |a: &mut u32, v: &I| {
                    let b = v.to_f32().to_bits() & 0x7FFF_FFFF;
                    *a = (*a).max(if b < 0x7F80_0000 { b } else { 0 });
                };
                let mut acc = [0u32; 16];
                let blocks = chunk.chunks_exact(16);
                let tail = blocks.remainder();
                for (i, blk) in blocks.enumerate() {
                    simd::prefetch(chunk.as_ptr().wrapping_add(i * 16 + 4096));
                    let blk: &[I; 16] = blk.try_into().expect("chunks_exact(16) yields 16 values");
                    acc.iter_mut().zip(blk).for_each(|(a, v)| keep(a, v));
                }
                acc.iter_mut().zip(tail).for_each(|(a, v)| keep(a, v));
                *m = acc.into_iter().max().unwrap_or(0);
            }
        })
    }));
    f32::from_bits(maxima.into_iter().max().unwrap_or(0))
}

/// Quantise `src` (C-contiguous, `shape`) along `axis` in format `fmt`.
pub fn quantize(src: Source, shape: &[usize], axis: usize, fmt: &Format, opts: &Options) -> Result<Quantized> {
    let layout = layout_of(src.len(), shape, axis)?;
    let n = layout.elements();
    let threads = thread_count(opts.threads, n);
    let isa = opts.isa();
    let bits = fmt.element_bits();
    let group = group_of(fmt, opts)?;
    let given = tensor_scale_of(fmt, group, opts)?;
    match fmt.scheme {
        Scheme::None => Err(qerr("format", "\"none\" is not a quantisation format")),
        Scheme::DsMla => Err(qerr("format", "fp8_ds_mla is a cache record; build it with kvwire.layout")),
        Scheme::Fp8 { elem, group: _ } => match group {
            None => {
                let mut codes = alloc::zeroed_u8(n);
                let scale = crate::with_element!(elem, E => {
                    let scale = given.unwrap_or_else(|| Fp8Scaled::<E>::new(None).scale_for(finite_amax(src, threads, isa)));
                    let scheme = Fp8Scaled::<E>::new(Some(scale));
                    with_input!(src, x => scaled_cast(&scheme, x, &mut codes, threads, isa));
                    scheme.tensor
                });
                Ok(Quantized { codes, scales: Scales::None, zeros: None, tensor_scale: scale, group: 0 })
            }
            Some(g) => {
                check_blocks(layout, g, bits, fmt)?;
                let (codes, stored) = crate::with_element!(elem, E => {
                    run_blocks(&Fp8Scaled::<E>::new(None), src, layout, g, threads, isa)
                });
                Ok(Quantized { codes, scales: Scales::F32(stored), zeros: None, tensor_scale: None, group: g })
            }
        },
        Scheme::Mx { elem } => {
            check_blocks(layout, MX_BLOCK, bits, fmt)?;
            let (codes, stored) = crate::with_element!(elem, E => {
                run_blocks(&Mx::<E>::new(opts.scale_rule), src, layout, MX_BLOCK, threads, isa)
            });
            Ok(Quantized { codes, scales: Scales::Bytes(stored), zeros: None, tensor_scale: None, group: MX_BLOCK })
        }
        Scheme::Nvfp4 => {
            check_blocks(layout, Nvfp4::BLOCK, bits, fmt)?;
            let global = given.unwrap_or_else(|| Nvfp4::global_from_amax(finite_amax(src, threads, isa)));
            let scheme = Nvfp4 { global };
            let (codes, stored) = if layout.inner == 1 {
                // Blocks along the last axis: the fused kernel (same output as the generic blocks).
                let mut codes = alloc::zeroed_u8(n / 2);
                let mut stored = alloc::zeroed_u8(n / Nvfp4::BLOCK);
                with_input!(src, x => nvfp4::quantize_rows(&scheme, x, &mut codes, &mut stored, threads, isa));
                (codes, stored)
            } else {
                run_blocks(&scheme, src, layout, Nvfp4::BLOCK, threads, isa)
            };
            Ok(Quantized {
                codes,
                scales: Scales::Bytes(stored),
                zeros: None,
                tensor_scale: Some(scheme.global),
                group: Nvfp4::BLOCK,
            })
        }
        Scheme::Int { bits, symmetric, .. } => {
            let g = group.unwrap_or(32);
            check_blocks(layout, g, bits, fmt)?;
            let (codes, stored) = with_int!(bits, symmetric, S => run_blocks(&S, src, layout, g, threads, isa));
            let (scales, zeros): (Vec<u16>, Vec<u16>) = stored.into_iter().unzip();
            Ok(Quantized {
                codes,
                scales: Scales::F16(scales),
                zeros: (!symmetric).then_some(zeros),
                tensor_scale: None,
                group: g,
            })
        }
    }
}

fn run_blocks<S: BlockScheme>(
    scheme: &S,
    src: Source,
    layout: Layout,
    block: usize,
    threads: usize,
    isa: Isa,
) -> (Vec<u8>, Vec<S::Stored>) {
    let n = layout.elements();
    let mut codes = alloc::zeroed_u8(packed_len(n, scheme.bits()));
    let mut stored = vec![S::Stored::default(); n / block];
    with_input!(src, x => block::quantize(scheme, x, layout, block, &mut codes, &mut stored, threads, isa));
    (codes, stored)
}

/// Element-wise `scheme.encode(tensor scale, x)` in parallel chunks.
fn scaled_cast<E: Element, I: Input>(scheme: &Fp8Scaled<E>, x: &[I], codes: &mut [u8], threads: usize, isa: Isa) {
    const UNIT: usize = 1 << 16;
    let n = x.len();
    let scale = scheme.tensor.unwrap_or(1.0);
    let units = n.div_ceil(UNIT);
    let mut none: [u8; 0] = [];
    par_units(units, threads, codes, UNIT, &mut none, 0, |first, _, out, _| {
        let x = &x[first * UNIT..(first * UNIT + out.len()).min(n)];
        crate::kernel!(isa, <E: Element, I: Input> {
            scheme: &'k Fp8Scaled<E> = scheme, scale: f32 = scale, x: &'k [I] = x, out: &'k mut [u8] = out,
        } -> () => {
            for (c, &v) in out.iter_mut().zip(x) {
                *c = scheme.encode(&scale, v.to_f32());
            }
        })
    });
}

/// Decode a quantised tensor into `out` (`shape`'s element count of `f32`).
pub fn dequantize(
    q: &QuantizedView,
    shape: &[usize],
    axis: usize,
    fmt: &Format,
    opts: &Options,
    out: &mut [f32],
) -> Result<()> {
    let layout = layout_of(out.len(), shape, axis)?;
    let n = layout.elements();
    let threads = thread_count(opts.threads, n);
    let isa = opts.isa();
    let bits = fmt.element_bits();
    let want_codes = packed_len(n, bits);
    if q.codes.len() != want_codes {
        return Err(qerr(
            "codes",
            format!("{} codes of {n} values take {want_codes} bytes, got {}", fmt.name, q.codes.len()),
        ));
    }
    let blocks = |g: usize| -> Result<usize> {
        check_blocks(layout, g, bits, fmt)?;
        Ok(n / g)
    };
    let scales_len = |want: usize, got: usize| -> Result<()> {
        if want == got {
            Ok(())
        } else {
            Err(qerr("scales", format!("expected {want} block scales for {}, got {got}", fmt.name)))
        }
    };
    match (fmt.scheme, q.scales) {
        (Scheme::Fp8 { elem, .. }, ScalesView::None) if q.group == 0 => {
            let scale = q.tensor_scale.ok_or_else(|| qerr("tensor_scale", "per-tensor fp8 needs its tensor scale"))?;
            let codes = q.codes;
            const UNIT: usize = 1 << 16;
            let units = n.div_ceil(UNIT);
            let mut none: [u8; 0] = [];
            par_units(units, threads, out, UNIT, &mut none, 0, |first, _, out, _| {
                let c = &codes[first * UNIT..first * UNIT + out.len()];
                crate::with_element!(elem, E => crate::kernel!(isa, <E: Element> {
                    scheme: Fp8Scaled<E> = Fp8Scaled::<E>::new(Some(scale)), scale: f32 = scale,
                    c: &'k [u8] = c, out: &'k mut [f32] = out,
                } -> () => {
                    for (o, &code) in out.iter_mut().zip(c) {
                        *o = scheme.decode(&scale, code);
                    }
                }))
            });
            Ok(())
        }
        (Scheme::Fp8 { elem, .. }, ScalesView::F32(s)) => {
            scales_len(blocks(q.group)?, s.len())?;
            crate::with_element!(elem, E => {
                block::dequantize(&Fp8Scaled::<E>::new(None), q.codes, s, layout, q.group, out, threads, isa)
            });
            Ok(())
        }
        (Scheme::Mx { elem }, ScalesView::Bytes(s)) => {
            scales_len(blocks(MX_BLOCK)?, s.len())?;
            crate::with_element!(elem, E => {
                block::dequantize(&Mx::<E>::new(opts.scale_rule), q.codes, s, layout, MX_BLOCK, out, threads, isa)
            });
            Ok(())
        }
        (Scheme::Nvfp4, ScalesView::Bytes(s)) => {
            scales_len(blocks(Nvfp4::BLOCK)?, s.len())?;
            let global = q.tensor_scale.ok_or_else(|| qerr("tensor_scale", "nvfp4 needs its fp32 tensor scale"))?;
            block::dequantize(&Nvfp4 { global }, q.codes, s, layout, Nvfp4::BLOCK, out, threads, isa);
            Ok(())
        }
        (Scheme::Int { bits, symmetric, .. }, ScalesView::F16(s)) => {
            scales_len(blocks(q.group)?, s.len())?;
            let stored: Vec<(u16, u16)> = match (symmetric, q.zeros) {
                (true, _) => s.iter().map(|&v| (v, 0)).collect(),
                (false, Some(z)) => {
                    scales_len(s.len(), z.len())
                        .map_err(|_| qerr("zeros", format!("expected {} zero points, got {}", s.len(), z.len())))?;
                    s.iter().copied().zip(z.iter().copied()).collect()
                }
                (false, None) => return Err(qerr("zeros", format!("{} needs its zero points", fmt.name))),
            };
            with_int!(bits, symmetric, S => block::dequantize(&S, q.codes, &stored, layout, q.group, out, threads, isa));
            Ok(())
        }
        _ => Err(qerr("scales", format!("these scales do not belong to format {}", fmt.name))),
    }
}

/// Element-wise cast to `elem` codes (no scale), packed; `out` must hold `packed_len` bytes.
pub fn cast(src: Source, elem: &MiniFloat, saturate: bool, opts: &Options, out: &mut [u8]) -> Result<()> {
    let n = src.len();
    let bits = elem.bits();
    let unit = codec::pack_unit(bits).0;
    if n % unit != 0 {
        return Err(qerr("x", format!("{}-bit codes pack {unit} per unit: {n} values do not", bits)));
    }
    if out.len() != packed_len(n, bits) {
        return Err(qerr("out", format!("needs {} bytes, got {}", packed_len(n, bits), out.len())));
    }
    let threads = thread_count(opts.threads, n);
    let isa = opts.isa();
    const UNIT: usize = 1 << 16;
    let units = n.div_ceil(UNIT);
    let mut none: [u8; 0] = [];
    with_input!(src, x => par_units(units, threads, out, packed_len(UNIT, bits), &mut none, 0, |first, k, out, _| {
        let x = &x[first * UNIT..((first + k) * UNIT).min(n)];
        crate::with_element!(*elem, E => crate::kernel!(isa, <E: Element, I: Input> {
            saturate: bool = saturate, x: &'k [I] = x, out: &'k mut [u8] = out, _e: PhantomData<E> = PhantomData::<E>,
        } -> () => codec::cast_slice::<E, I>(saturate, x, out)))
    }));
    Ok(())
}

/// Element-wise decode of packed `elem` codes into `out`.
pub fn decode(codes: &[u8], elem: &MiniFloat, opts: &Options, out: &mut [f32]) -> Result<()> {
    let n = out.len();
    let bits = elem.bits();
    let unit = codec::pack_unit(bits).0;
    if n % unit != 0 || codes.len() != packed_len(n, bits) {
        return Err(qerr(
            "codes",
            format!("{n} {}-bit values take {} bytes, got {}", bits, packed_len(n, bits), codes.len()),
        ));
    }
    let threads = thread_count(opts.threads, n);
    let isa = opts.isa();
    const UNIT: usize = 1 << 16;
    let units = n.div_ceil(UNIT);
    let mut none: [u8; 0] = [];
    par_units(units, threads, out, UNIT, &mut none, 0, |first, k, out, _| {
        let c = &codes[packed_len(first * UNIT, bits)..packed_len(((first + k) * UNIT).min(n), bits)];
        crate::with_element!(*elem, E => crate::kernel!(isa, <E: Element> {
            c: &'k [u8] = c, out: &'k mut [f32] = out, _e: PhantomData<E> = PhantomData::<E>,
        } -> () => codec::decode_slice::<E>(c, out)))
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gaussian(n: usize, seed: u64) -> Vec<f32> {
        let mut rng = crate::workload::cpython_random::CpythonRandom::new(seed);
        (0..n).map(|_| rng.normalvariate(0.0, 1.0) as f32).collect()
    }

    /// Every format round-trips with its SQNR floor of spec/quant.md §5 on seeded Gaussian data, along the
    /// last axis and along the first (strided blocks).
    #[test]
    fn sqnr_floors_on_gaussian_data() {
        let x = gaussian(256 * 128, 7);
        let floors = [
            ("fp8_e4m3", 30.0),
            ("fp8_e4m3_g128", 30.0),
            ("mxfp8_e4m3", 28.0),
            ("mxfp6_e2m3", 28.0),
            ("nvfp4", 19.0),
            ("mxfp4", 17.0),
            ("int4_asym_g32", 20.0),
            ("int8_sym_g32", 40.0),
        ];
        for (name, floor) in floors {
            let fmt = format(name).unwrap();
            for axis in [1, 0] {
                let q = quantize(Source::F32(&x), &[256, 128], axis, fmt, &Options::default()).unwrap();
                let mut back = vec![0f32; x.len()];
                dequantize(&q.view(), &[256, 128], axis, fmt, &Options::default(), &mut back).unwrap();
                let e = accuracy::error(&x, &back);
                assert!(e.sqnr_db >= floor, "{name} axis {axis}: {} dB < {floor}", e.sqnr_db);
            }
        }
    }

    /// Thread counts and instruction-set levels never change the output.
    #[test]
    fn threads_and_isa_levels_give_identical_output() {
        let x = gaussian(64 * 1024 + 512, 3);
        let shape = [x.len() / 128, 128];
        for fmt in FORMATS.iter().filter(|f| !matches!(f.scheme, Scheme::None | Scheme::DsMla)) {
            let base = Options { threads: Some(1), isa: Some(Isa::Baseline), ..Options::default() };
            let want = quantize(Source::F32(&x), &shape, 1, fmt, &base).unwrap();
            for isa in simd::available() {
                for threads in [1, 2, 3] {
                    let o = Options { threads: Some(threads), isa: Some(isa), ..Options::default() };
                    let got = quantize(Source::F32(&x), &shape, 1, fmt, &o).unwrap();
                    assert_eq!(got, want, "{} {isa:?} {threads}", fmt.name);
                    let mut a = vec![0f32; x.len()];
                    let mut b = vec![0f32; x.len()];
                    dequantize(&want.view(), &shape, 1, fmt, &base, &mut a).unwrap();
                    dequantize(&got.view(), &shape, 1, fmt, &o, &mut b).unwrap();
                    assert!(a.iter().zip(&b).all(|(p, q)| p.to_bits() == q.to_bits()), "{}", fmt.name);
                }
            }
        }
    }

    /// bf16 and f16 inputs give the same codes as their exact f32 widening.
    #[test]
    fn half_inputs_equal_their_f32_widening() {
        let bf: Vec<u16> = (0..4096u32).map(|i| (0x3C00 + i * 7) as u16).collect();
        let hf: Vec<u16> = (0..4096u32).map(|i| (i * 13 % 0x7C00) as u16).collect();
        for fmt in ["mxfp4", "nvfp4", "fp8_e4m3", "int4_sym_g32"] {
            let fmt = format(fmt).unwrap();
            let o = Options::default();
            let w: Vec<f32> = bf.iter().map(|&h| minifloat::bf16_to_f32(h)).collect();
            assert_eq!(
                quantize(Source::Bf16(&bf), &[4096], 0, fmt, &o).unwrap(),
                quantize(Source::F32(&w), &[4096], 0, fmt, &o).unwrap()
            );
            let w: Vec<f32> = hf.iter().map(|&h| minifloat::f16_to_f32(h)).collect();
            assert_eq!(
                quantize(Source::F16(&hf), &[4096], 0, fmt, &o).unwrap(),
                quantize(Source::F32(&w), &[4096], 0, fmt, &o).unwrap()
            );
        }
    }

    #[test]
    fn clear_errors() {
        let x = vec![0f32; 100];
        let o = Options::default();
        let e = |fmt: &str, shape: &[usize], axis| {
            quantize(Source::F32(&x), shape, axis, format(fmt).unwrap(), &o).unwrap_err()
        };
        assert_eq!(e("mxfp4", &[100], 0).path(), "axis");
        assert_eq!(e("mxfp4", &[10, 10], 2).path(), "axis");
        assert_eq!(e("mxfp4", &[10, 11], 0).path(), "x");
        assert_eq!(e("none", &[100], 0).path(), "format");
        let q = quantize(Source::F32(&x[..64]), &[64], 0, format("mxfp4").unwrap(), &o).unwrap();
        let mut out = vec![0f32; 64];
        let mut bad = q.view();
        bad.scales = ScalesView::Bytes(&[0u8; 1]);
        let err = dequantize(&bad, &[64], 0, format("mxfp4").unwrap(), &o, &mut out).unwrap_err();
        assert_eq!(err.path(), "scales");
    }

    /// Element-wise cast and decode agree with the scalar codec over every thread count.
    #[test]
    fn cast_and_decode() {
        let x = gaussian(70_000, 5);
        for elem in minifloat::ELEMENT_FORMATS {
            let n = x.len();
            let mut a = vec![0u8; packed_len(n, elem.bits())];
            cast(Source::F32(&x), &elem, false, &Options { threads: Some(3), ..Options::default() }, &mut a).unwrap();
            let mut back = vec![0f32; n];
            decode(&a, &elem, &Options { threads: Some(2), ..Options::default() }, &mut back).unwrap();
            for (v, y) in x.iter().zip(&back) {
                let want = minifloat::decode(&elem, minifloat::encode(&elem, *v, false));
                assert_eq!(y.to_bits(), want.to_bits());
            }
        }
    }
}

//! Instruction-set dispatch without hand-written intrinsics: the kernels are portable Rust that the
//! compiler auto-vectorises, and [`run`] executes a kernel inside a function compiled for the widest
//! instruction set the CPU supports (detected once at run time). The baseline (SSE2 on x86-64, or the
//! target's default elsewhere) is always available, and tests run every kernel at every level this machine
//! supports and require identical output.

use std::sync::OnceLock;

/// An instruction-set level kernels can be compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Isa {
    /// The target's baseline (SSE2 on x86-64).
    Baseline,
    /// x86-64 AVX2 + FMA + BMI2.
    Avx2,
    /// x86-64 AVX-512 F/BW/VL/DQ.
    Avx512,
}

impl Isa {
    pub fn name(self) -> &'static str {
        match self {
            Isa::Baseline => "baseline",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }
}

/// The best level this CPU supports (cached). `KVWIRE_ISA=baseline|avx2|avx512` caps it (for testing and
/// for comparing levels in benchmarks).
pub fn detect() -> Isa {
    static BEST: OnceLock<Isa> = OnceLock::new();
    *BEST.get_or_init(|| {
        let hw = hardware();
        match std::env::var("KVWIRE_ISA").ok().as_deref() {
            Some("baseline") => Isa::Baseline,
            Some("avx2") => hw.min(Isa::Avx2),
            _ => hw,
        }
    })
}

/// Every level this CPU supports, lowest first.
pub fn available() -> Vec<Isa> {
    let hw = hardware();
    [Isa::Baseline, Isa::Avx2, Isa::Avx512].into_iter().filter(|&i| i <= hw).collect()
}

#[cfg(target_arch = "x86_64")]
fn hardware() -> Isa {
    if is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vl")
        && is_x86_feature_detected!("avx512dq")
        && is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("fma")
        && is_x86_feature_detected!("bmi2")
    {
        Isa::Avx512
    } else if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("bmi2") {
        Isa::Avx2
    } else {
        Isa::Baseline
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn hardware() -> Isa {
    Isa::Baseline
}

/// A kernel: work that [`run`] executes inside a function compiled for a chosen instruction set.
/// Implementations must mark `run` `#[inline(always)]` (and call `#[inline(always)]` code) so that the
/// whole body is compiled with the wider instruction set — a closure would stay a separate function
/// compiled for the baseline.
pub trait Kernel {
    type Output;
    fn run(self) -> Self::Output;
}

/// Run `k` compiled for `isa` (a level above the hardware's falls back to the best available).
#[inline(always)]
pub fn run<K: Kernel>(isa: Isa, k: K) -> K::Output {
    let isa = isa.min(hardware_cached());
    #[cfg(target_arch = "x86_64")]
    {
        match isa {
            // SAFETY: the CPU supports these features (checked by `hardware`).
            Isa::Avx512 => unsafe { run_avx512(k) },
            // SAFETY: as above.
            Isa::Avx2 => unsafe { run_avx2(k) },
            Isa::Baseline => k.run(),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = isa;
        k.run()
    }
}

/// Run `$body` compiled for `$isa`, with the listed fields in scope: defines a one-off [`Kernel`] struct
/// whose `run` is `#[inline(always)]`. Generic parameters of the enclosing function that the fields use
/// must be listed (with their bounds); reference fields use the lifetime `'k`.
///
/// `kernel!(isa, <I: Input> { x: &'k [I] = x, out: &'k mut [u8] = out } -> () => work(x, out))`
#[macro_export]
macro_rules! kernel {
    ($isa:expr, <$($g:ident $(: $b:path)?),*> { $($f:ident : $t:ty = $v:expr),+ $(,)? } -> $out:ty => $body:expr) => {{
        #[allow(non_camel_case_types)]
        struct K<'k, $($g $(: $b)?),*> {
            $($f: $t,)+
            _p: ::std::marker::PhantomData<&'k ($($g,)*)>,
        }
        impl<'k, $($g $(: $b)?),*> $crate::quant::simd::Kernel for K<'k, $($g),*> {
            type Output = $out;
            #[inline(always)]
            #[allow(unused_variables)]
            fn run(self) -> $out {
                let K { $($f,)+ .. } = self;
                $body
            }
        }
        $crate::quant::simd::run($isa, K { $($f: $v,)+ _p: ::std::marker::PhantomData })
    }};
}

/// Ask for the cache line holding `p` ahead of its use (a hint: no effect on results, nothing on targets
/// without a prefetch instruction). Kernels that walk their input in page-sized chunks use it for the next
/// chunk, where the hardware's streaming prefetcher stops at the page boundary.
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults, whatever the address; SSE is part of x86-64.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

fn hardware_cached() -> Isa {
    static HW: OnceLock<Isa> = OnceLock::new();
    *HW.get_or_init(hardware)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,bmi2")]
unsafe fn run_avx512<K: Kernel>(k: K) -> K::Output {
    k.run()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,bmi2")]
unsafe fn run_avx2<K: Kernel>(k: K) -> K::Output {
    k.run()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_ordered_and_baseline_always_available() {
        let a = available();
        assert_eq!(a[0], Isa::Baseline);
        assert!(a.windows(2).all(|w| w[0] < w[1]));
        assert!(a.contains(&detect()) || detect() == Isa::Baseline);
        struct Add(u32);
        impl Kernel for Add {
            type Output = u32;
            #[inline(always)]
            fn run(self) -> u32 {
                self.0 + 1
            }
        }
        assert_eq!(run(Isa::Avx512, Add(41)), 42);
    }
}

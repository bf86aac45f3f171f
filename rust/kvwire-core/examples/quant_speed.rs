//! Time the quantisation kernels on 256 MiB of f32: `cargo run --release --example quant_speed [threads]`.
use kvwire_core::quant::{self, codec::packed_len, minifloat, Options, Source};
use std::time::Instant;

fn best(reps: usize, mut f: impl FnMut()) -> f64 {
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let threads: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1);
    let n = 64 << 20;
    let x: Vec<f32> = (0..n).map(|i| ((i as u32).wrapping_mul(2654435761) as f32 / 4e9) - 0.5).collect();
    let o = Options { threads: Some(threads), ..Options::default() };
    let gb = (n * 4) as f64 / 1e9;
    let mut out = vec![0u8; n];
    let t = best(3, || quant::cast(Source::F32(&x), &minifloat::E4M3FN, false, &o, &mut out).unwrap());
    println!("isa {:?} threads {threads}", quant::simd::detect());
    println!("f32 -> e4m3fn: {:.2} GB/s", gb / t);
    let bf: Vec<u16> = x.iter().map(|v| (v.to_bits() >> 16) as u16).collect();
    let t = best(3, || quant::cast(Source::Bf16(&bf), &minifloat::E4M3FN, false, &o, &mut out).unwrap());
    println!("bf16 -> e4m3fn: {:.2} GB/s", gb / 2.0 / t);
    let mut out4 = vec![0u8; packed_len(n, 4)];
    let t = best(3, || quant::cast(Source::F32(&x), &minifloat::E2M1, false, &o, &mut out4).unwrap());
    println!("f32 -> e2m1 packed: {:.2} GB/s", gb / t);
    for f in ["mxfp4", "nvfp4", "mxfp8_e4m3", "int4_asym_g32", "fp8_e4m3", "fp8_e4m3_g128"] {
        let fmt = quant::format(f).unwrap();
        let t = best(3, || {
            quant::quantize(Source::F32(&x), &[n / 128, 128], 1, fmt, &o).unwrap();
        });
        println!("{f}: {:.2} GB/s", gb / t);
    }
    let mut back = vec![0f32; n];
    let t = best(3, || quant::decode(&out, &minifloat::E4M3FN, &o, &mut back).unwrap());
    println!("e4m3fn -> f32 decode: {:.2} GB/s of output", gb / t);
    let mut dst = vec![0f32; n];
    let t = best(3, || dst.copy_from_slice(std::hint::black_box(&x)));
    std::hint::black_box(&dst);
    println!("memcpy: {:.2} GB/s", gb / t);
}

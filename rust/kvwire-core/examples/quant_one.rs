//! Run one quantisation format repeatedly (for profiling): `quant_one <format> [reps]`.
use kvwire_core::quant::{self, Options, Source};
fn main() {
    let f = std::env::args().nth(1).unwrap_or_else(|| "nvfp4".into());
    let reps: usize = std::env::args().nth(2).and_then(|s| s.parse().ok()).unwrap_or(5);
    let n = 64 << 20;
    let x: Vec<f32> = (0..n).map(|i| ((i as u32).wrapping_mul(2654435761) as f32 / 4e9) - 0.5).collect();
    let fmt = quant::format(&f).expect("known format");
    let o = Options { threads: Some(1), ..Options::default() };
    for _ in 0..reps {
        std::hint::black_box(quant::quantize(Source::F32(&x), &[n / 128, 128], 1, fmt, &o).expect("ok"));
    }
}

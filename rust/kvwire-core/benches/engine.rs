//! Criterion bench of the engine: Llama-3-8B, 1P1D H100, InfiniBand, default lengths, 8 req/s.
//! Run with `cargo bench -p kvwire-core`; results are recorded in `benches/README.md`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use kvwire_core::{simulate, Scenario};
use std::hint::black_box;

fn scenario(requests: u64, macro_steps: bool) -> Scenario {
    let json = format!(r#"{{"workload": {{"requests": {requests}}}, "engine": {{"macro_steps": {macro_steps}}}}}"#);
    Scenario::from_json(&json, None).expect("valid scenario")
}

fn engine(c: &mut Criterion) {
    let mut g = c.benchmark_group("simulate");
    g.sample_size(10);
    for &n in &[1_000u64, 100_000, 1_000_000] {
        g.throughput(Throughput::Elements(n));
        for macro_steps in [true, false] {
            let id = BenchmarkId::new(if macro_steps { "macro_steps" } else { "step_by_step" }, n);
            g.bench_with_input(id, &n, |b, &n| {
                b.iter_batched(
                    || scenario(n, macro_steps),
                    |sc| black_box(simulate(sc).expect("run")),
                    criterion::BatchSize::PerIteration,
                )
            });
        }
    }
    g.finish();
}

criterion_group!(benches, engine);
criterion_main!(benches);

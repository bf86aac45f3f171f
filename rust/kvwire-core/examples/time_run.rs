//! Time one run of the default scenario with N requests: `cargo run --release --example time_run -- 1000000`.
//! Optional: `plain` (step by step) or `macro` (the default), then the prefill and decode instance counts
//! (`-- 1000000 macro 4 4` for 4P4D), then the arrival rate in requests/s (default 8).
use kvwire_core::{simulate, Scenario};
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let macro_steps = args.next().is_none_or(|s| s != "plain");
    let prefill: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1);
    let decode: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1);
    let rate: f64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(8.0);
    let json = format!(
        r#"{{"workload": {{"requests": {n}, "arrivals": {{"rate_per_s": {rate}}}}}, "engine": {{"macro_steps": {macro_steps}}},
            "prefill": {{"instances": {prefill}}}, "decode": {{"instances": {decode}}}}}"#
    );
    let sc = Scenario::from_json(&json, None).expect("valid scenario");
    let t0 = Instant::now();
    let out = simulate(sc).expect("run");
    let dt = t0.elapsed().as_secs_f64();
    let steps: u64 = out.stats.instances.iter().map(|i| i.steps).sum();
    println!(
        "{n} requests {prefill}P{decode}D: {dt:.3} s ({:.0} req/s), {} events, {} steps, horizon {:.1} s, core wall {:.3} s",
        n as f64 / dt,
        out.stats.events,
        steps,
        out.stats.horizon_s,
        out.stats.wall_s
    );
}

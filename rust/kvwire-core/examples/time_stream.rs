//! Time one streamed run (`simulate_streamed`, bounded memory) of the default scenario with N requests
//! against the in-memory run: `cargo run --release --example time_stream -- 1000000 [stream|memory]`.
use kvwire_core::{engine::own_source, simulate, simulate_streamed, Scenario};
use std::time::Instant;

fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let mode = std::env::args().nth(2).unwrap_or_else(|| "stream".into());
    let json = format!(r#"{{"workload": {{"requests": {n}}}}}"#);
    let sc = Scenario::from_json(&json, None).expect("valid scenario");
    let t0 = Instant::now();
    let out = if mode == "memory" {
        simulate(sc).expect("run")
    } else {
        let mut src = own_source(&sc, 1 << 16).expect("source");
        simulate_streamed(sc, src.as_mut(), None, 1, None, None).expect("run")
    };
    let dt = t0.elapsed().as_secs_f64();
    println!(
        "{mode} {n} requests: {dt:.3} s ({:.0} req/s), {} events, rows held at most {}",
        n as f64 / dt,
        out.stats.events,
        out.stats.table_rows_peak
    );
}

//! Property tests of the engine over random scenarios (`spec/simulator.md` (c), (d) and "Clarifications").
//!
//! Scenarios are generated as JSON (the public contract): disaggregated or colocated, 1–4 instances per
//! pool on heterogeneous devices, three models, every link preset with 1–3 channels, compression, Poisson
//! or gamma arrivals up to heavy overload, fixed/uniform/lognormal lengths (outputs 0 and 1 included,
//! prompts that overflow small KV caches), explicit traces with arrival ties and prompts placed exactly at
//! the rejection boundary, small batching limits, every router, power caps, DVFS and warm-up fractions.
//!
//! Every property is checked on the result `SimOutput { table, stats }` alone (plus the scenario it came
//! from); failures print the scenario JSON, which is a complete reproduction (`kvwire run` / `simulate`).
//!
//! Checked: accounting (rejected xor finished, counts, the rejection rule, the measured set); monotone and
//! present-iff-happened stamps; stages sum to E2E; KV returned, peak ≤ capacity and equal to a sweep of the
//! table; ≤ `max_decode_batch` sequences at once; Little's law; horizon = last finish; energy and busy-time
//! sanity and the power roof; ITL count and exact mean; the link (transfer count, busy and wait totals, FCFS,
//! ≤ channels at once, work conservation); prefill batches (budget, FIFO, maximal, work-conserving) and step
//! / batch-size totals; decode FIFO and immediate admission when idle; every router reconstructed from the
//! table; determinism and `engine.macro_steps` true vs false bit for bit, also with arrivals placed exactly
//! on step ends of an earlier run (ties by construction).
//!
//! `KVWIRE_PROPTEST_CASES` sets the cases per property (256 by default, about a second in all).
//!
//! Regression tests of bugs these properties found (all fixed):
//! `trace_arrival_times_survive_the_scenario_json` (JSON floats off by an ulp), and
//! `itl_percentiles_stay_below_the_max_in_a_run`, `itl_quantiles_ordered_and_within_range`,
//! `itl_mean_within_range` (ITL histogram rounding).

mod common;

use kvwire_core::metrics::stats::RunStats;
use kvwire_core::metrics::table::RequestTable;
use kvwire_core::{simulate, Scenario, SimOutput};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::{json, Value};

// ------------------------------------------------------------------------------------------------
// Scenario generation

const DEVICES: [&str; 5] = ["h100", "a100", "a100-40g", "h200", "b200"];
const MODELS: [&str; 3] = ["llama3-8b", "mistral-7b", "llama3.2-1b"];
const LINKS: [&str; 9] =
    ["nvlink4", "ib-ndr", "pcie5", "pcie4", "eth-100g", "eth-25g", "cpo-optical", "nvlink3", "nvlink5"];
const COMPRESSION: [&str; 3] = ["none", "fp8", "mxfp4"];

/// (idle W, TDP W) of the device presets, to place power caps strictly above the idle draw.
fn idle_tdp(device: &str) -> (f64, f64) {
    match device {
        "h100" | "h200" => (100.0, 700.0),
        "a100" | "a100-40g" => (60.0, 400.0),
        "b200" => (140.0, 1000.0),
        _ => unreachable!(),
    }
}

#[derive(Clone, Debug)]
struct PoolGen {
    device: &'static str,
    instances: u32,
    devices_per_instance: u32,
    /// Power cap as a fraction of 1.2 × (TDP − idle) above idle (so caps above the TDP also occur).
    cap: Option<f64>,
}

fn pool_gen() -> impl Strategy<Value = PoolGen> {
    (prop::sample::select(&DEVICES[..]), 1u32..=4, 1u32..=2, prop::option::weighted(0.3, 0.01f64..1.0)).prop_map(
        |(device, instances, devices_per_instance, cap)| PoolGen { device, instances, devices_per_instance, cap },
    )
}

impl PoolGen {
    fn json(&self) -> Value {
        let mut v = json!({
            "device": self.device,
            "instances": self.instances,
            "devices_per_instance": self.devices_per_instance,
        });
        if let Some(f) = self.cap {
            let (idle, tdp) = idle_tdp(self.device);
            v["power_cap_w"] = json!(idle + 1.0 + f * 1.2 * (tdp - idle));
        }
        v
    }
}

/// A trace prompt: absolute, or relative to the KV capacity that decides rejection (so that the boundary,
/// prompt + output == capacity, is hit exactly).
#[derive(Clone, Debug)]
enum PromptGen {
    Abs(u32),
    Cap { frac: f64, delta: i64 },
}

#[derive(Clone, Debug)]
struct Row {
    gap: f64,
    prompt: PromptGen,
    output: u32,
}

fn row_gen() -> impl Strategy<Value = Row> {
    let gap = prop_oneof![
        4 => Just(0.0),
        3 => 0.0f64..0.3,
        1 => Just(0.25),
        1 => 0.0f64..5.0,
    ];
    let prompt = prop_oneof![
        6 => (1u32..4000).prop_map(PromptGen::Abs),
        2 => (1u32..20_000).prop_map(PromptGen::Abs),
        1 => (1u32..=3).prop_map(PromptGen::Abs),
        1 => (0.2f64..1.3).prop_map(|frac| PromptGen::Cap { frac, delta: 0 }),
        1 => (-2i64..=2).prop_map(|delta| PromptGen::Cap { frac: 1.0, delta }),
    ];
    let output = prop_oneof![3 => 0u32..=3, 3 => 0u32..300];
    (gap, prompt, output).prop_map(|(gap, prompt, output)| Row { gap, prompt, output })
}

fn prompt_dist() -> impl Strategy<Value = Value> {
    prop_oneof![
        2 => (1u32..4096).prop_map(|v| json!({"dist": "fixed", "value": v})),
        1 => (1u32..600_000).prop_map(|v| json!({"dist": "fixed", "value": v})),
        2 => (1u32..2000, 0u32..8000).prop_map(|(a, w)| json!({"dist": "uniform", "min": a, "max": a + w})),
        1 => (1u32..2000, 0u32..500_000).prop_map(|(a, w)| json!({"dist": "uniform", "min": a, "max": a + w})),
        3 => (1.0f64..8000.0, prop_oneof![Just(0.0), 0.0f64..2.0], 1u32..64, prop_oneof![Just(32768u32), 64u32..400_000])
            .prop_map(|(mean, cv, min, max)| json!({"dist": "lognormal", "mean": mean, "cv": cv, "min": min, "max": max.max(min)})),
    ]
}

fn output_dist() -> impl Strategy<Value = Value> {
    prop_oneof![
        1 => (0u32..=2).prop_map(|v| json!({"dist": "fixed", "value": v})),
        1 => (0u32..300).prop_map(|v| json!({"dist": "fixed", "value": v})),
        2 => (0u32..=3, 0u32..300).prop_map(|(a, w)| json!({"dist": "uniform", "min": a, "max": a + w})),
        3 => (1.0f64..200.0, prop_oneof![Just(0.0), 0.0f64..1.5], 0u32..=2, 2u32..400)
            .prop_map(|(mean, cv, min, max)| json!({"dist": "lognormal", "mean": mean, "cv": cv, "min": min, "max": max.max(min)})),
    ]
}

#[derive(Clone, Debug)]
enum WorkGen {
    Generated { requests: u64, seed: u64, arrivals: Value, prompt: Value, output: Value },
    Trace { start: f64, rows: Vec<Row> },
}

fn work_gen(max_requests: u64, max_rows: usize) -> impl Strategy<Value = WorkGen> {
    let rate = (-1.5f64..2.7).prop_map(|e| 10f64.powf(e)); // 0.03 .. 500 req/s
    let arrivals = prop_oneof![
        rate.clone().prop_map(|r| json!({"process": "poisson", "rate_per_s": r})),
        (rate, 0.1f64..4.0).prop_map(|(r, cv)| json!({"process": "gamma", "rate_per_s": r, "cv": cv})),
    ];
    prop_oneof![
        (1u64..=max_requests, any::<u64>(), arrivals, prompt_dist(), output_dist()).prop_map(
            |(requests, seed, arrivals, prompt, output)| {
                WorkGen::Generated { requests, seed, arrivals, prompt, output }
            }
        ),
        (prop_oneof![Just(0.0), 0.0f64..10.0], prop::collection::vec(row_gen(), 1..=max_rows))
            .prop_map(|(start, rows)| WorkGen::Trace { start, rows }),
    ]
}

#[derive(Clone, Debug)]
struct Gen {
    colocated: bool,
    model: &'static str,
    prefill: PoolGen,
    decode: PoolGen,
    link: &'static str,
    channels: u32,
    compression: &'static str,
    work: WorkGen,
    warmup: f64,
    mem_util: f64,
    max_prefill_tokens: u32,
    max_decode_batch: u32,
    routers: (&'static str, &'static str, &'static str),
    lm_head: &'static str,
    enforce_tdp: bool,
    dvfs: bool,
    overhead: f64,
    macro_steps: bool,
    /// `metrics.first_token`: "prefill" (the reference's rule) or "decode" (the default).
    first_token: &'static str,
}

fn scenario_gen(max_requests: u64, max_rows: usize) -> impl Strategy<Value = Gen> {
    let pools = (any::<bool>(), pool_gen(), pool_gen());
    let link = (prop::sample::select(&LINKS[..]), 1u32..=3, prop::sample::select(&COMPRESSION[..]));
    let sched = (
        prop_oneof![Just(0.0), Just(0.1), 0.0f64..0.999],
        prop_oneof![Just(0.9), 0.45f64..0.9],
        prop_oneof![1 => Just(8192u32), 2 => 1u32..600, 2 => 256u32..16_384],
        prop_oneof![1 => Just(256u32), 2 => 1u32..=4, 2 => 1u32..=32],
    );
    let routers = (
        prop::sample::select(&["least_queued_tokens", "round_robin"][..]),
        prop::sample::select(&["least_loaded", "round_robin"][..]),
        prop::sample::select(&["least_loaded", "round_robin"][..]),
    );
    let cost = (
        prop::sample::select(&["last", "all"][..]),
        prop::bool::weighted(0.8),
        prop::bool::weighted(0.2),
        prop_oneof![4 => Just(0.0005), 1 => Just(0.0), 1 => 0.0f64..0.01],
        any::<bool>(),
        prop::sample::select(&["prefill", "decode"][..]),
    );
    (pools, prop::sample::select(&MODELS[..]), link, work_gen(max_requests, max_rows), sched, routers, cost).prop_map(
        |(
            (colocated, prefill, decode),
            model,
            (link, channels, compression),
            work,
            (warmup, mem_util, max_prefill_tokens, max_decode_batch),
            routers,
            (lm_head, enforce_tdp, dvfs, overhead, macro_steps, first_token),
        )| Gen {
            colocated,
            model,
            prefill,
            decode,
            link,
            channels,
            compression,
            work,
            warmup,
            mem_util,
            max_prefill_tokens,
            max_decode_batch,
            routers,
            lm_head,
            enforce_tdp,
            dvfs,
            overhead,
            macro_steps,
            first_token,
        },
    )
}

impl Gen {
    /// The scenario without its workload.
    fn base(&self) -> Value {
        let mut v = json!({
            "model": self.model,
            "metrics": {"warmup_fraction": self.warmup, "first_token": self.first_token},
            "cost": {
                "mem_util": self.mem_util, "prefill_lm_head": self.lm_head, "enforce_tdp": self.enforce_tdp,
                "dvfs": self.dvfs, "step_overhead_s": self.overhead,
            },
            "scheduler": {"max_prefill_tokens": self.max_prefill_tokens, "max_decode_batch": self.max_decode_batch},
            "router": {"prefill": self.routers.0, "decode": self.routers.1, "colocated": self.routers.2},
            "engine": {"macro_steps": self.macro_steps},
        });
        if self.colocated {
            v["mode"] = json!("colocated");
            v["colocated"] = self.decode.json();
        } else {
            v["mode"] = json!("disaggregated");
            v["prefill"] = self.prefill.json();
            v["decode"] = self.decode.json();
            v["link"] = json!({"preset": self.link, "channels": self.channels});
            v["handoff"] = json!({"compression": self.compression});
        }
        v
    }

    /// The full scenario. Trace prompts relative to the KV capacity are resolved with a probe run.
    fn scenario(&self) -> Value {
        let mut v = self.base();
        v["workload"] = match &self.work {
            WorkGen::Generated { requests, seed, arrivals, prompt, output } => json!({
                "requests": requests, "seed": seed, "arrivals": arrivals,
                "prompt_tokens": prompt, "output_tokens": output,
            }),
            WorkGen::Trace { start, rows } => {
                let cap = reject_capacity(&self.base());
                let mut t = *start;
                let (mut a, mut p, mut o) = (Vec::new(), Vec::new(), Vec::new());
                for r in rows {
                    t += r.gap;
                    a.push(t);
                    let prompt = match r.prompt {
                        PromptGen::Abs(x) => x as i64,
                        PromptGen::Cap { frac, delta } => (cap as f64 * frac).floor() as i64 + delta - r.output as i64,
                    };
                    p.push(prompt.clamp(1, u32::MAX as i64));
                    o.push(r.output);
                }
                json!({"trace": {"arrival_s": a, "prompt_tokens": p, "output_tokens": o}})
            }
        };
        v
    }
}

/// KV capacity (tokens) of the first decode / colocated instance of a scenario, read from a one-request run.
fn reject_capacity(base: &Value) -> u64 {
    let mut v = base.clone();
    v["workload"] = json!({"trace": {"arrival_s": [0.0], "prompt_tokens": [1], "output_tokens": [0]}});
    let out = run(&v);
    out.stats.instances.iter().find_map(|i| i.kv_capacity_tokens).expect("a KV-holding instance")
}

fn run(v: &Value) -> SimOutput {
    let text = v.to_string();
    let sc = Scenario::from_json(&text, None).unwrap_or_else(|e| panic!("generated scenario invalid: {e}\n{text}"));
    simulate(sc).unwrap_or_else(|e| panic!("run failed: {e}\n{text}"))
}

// ------------------------------------------------------------------------------------------------
// What the checks need to know about a scenario

struct Facts {
    colocated: bool,
    /// Prefill instances (disaggregated) or colocated instances.
    front: usize,
    /// Decode instances (disaggregated; 0 when colocated).
    back: usize,
    channels: usize,
    max_prefill_tokens: u64,
    max_decode_batch: usize,
    warmup: f64,
    prefill_router: String,
    decode_router: String,
    colocated_router: String,
    /// Per-device power limit of the front / back pool (W), when a power roof applies.
    front_limit_w: Option<f64>,
    back_limit_w: Option<f64>,
    compression: bool,
}

impl Facts {
    fn of(v: &Value) -> Facts {
        let colocated = v["mode"] == "colocated";
        let n = |p: &Value| p["instances"].as_u64().unwrap() as usize;
        let enforce = v["cost"]["enforce_tdp"].as_bool().unwrap();
        let limit = |p: &Value| {
            let (_, tdp) = idle_tdp(p["device"].as_str().unwrap());
            match (p["power_cap_w"].as_f64(), enforce) {
                (Some(c), true) => Some(c.min(tdp)),
                (Some(c), false) => Some(c),
                (None, true) => Some(tdp),
                (None, false) => None,
            }
        };
        let s = |x: &Value| x.as_str().unwrap().to_string();
        let (front, back, fl, bl) = if colocated {
            let c = &v["colocated"];
            (n(c), 0, limit(c), None)
        } else {
            (n(&v["prefill"]), n(&v["decode"]), limit(&v["prefill"]), limit(&v["decode"]))
        };
        Facts {
            colocated,
            front,
            back,
            channels: v["link"]["channels"].as_u64().unwrap_or(0) as usize,
            max_prefill_tokens: v["scheduler"]["max_prefill_tokens"].as_u64().unwrap(),
            max_decode_batch: v["scheduler"]["max_decode_batch"].as_u64().unwrap() as usize,
            warmup: v["metrics"]["warmup_fraction"].as_f64().unwrap(),
            prefill_router: s(&v["router"]["prefill"]),
            decode_router: s(&v["router"]["decode"]),
            colocated_router: s(&v["router"]["colocated"]),
            front_limit_w: fl,
            back_limit_w: bl,
            compression: !colocated && v["handoff"]["compression"] != "none",
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Checks. Each returns Err(message) on the first violation.

type Check = Result<(), String>;

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        // Bound first, so that a NaN comparison fails the check (and clippy's neg_cmp lint stays quiet).
        let ok: bool = $cond;
        if !ok {
            return Err(format!($($fmt)+));
        }
    };
}

fn set(x: f64) -> bool {
    !x.is_nan()
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()).max(1e-300) || a == b
}

fn finished(t: &RequestTable) -> impl Iterator<Item = usize> + '_ {
    (0..t.len()).filter(|&i| !t.rejected[i])
}

/// Every request is rejected (no stage at all) or finished; counts agree; the rejection rule and the
/// measured set are as specified.
fn check_accounting(o: &SimOutput, f: &Facts) -> Check {
    let (t, s) = (&o.table, &o.stats);
    let n = t.len();
    let cap = s.instances.iter().find_map(|i| i.kv_capacity_tokens).ok_or("no KV capacity reported")?;
    let (mut completed, mut rejected) = (0u64, 0u64);
    for i in 0..n {
        ensure!(t.id[i] == i as u64, "row {i}: id {}", t.id[i]);
        let res = t.prompt_tokens[i] as u64 + t.output_tokens[i] as u64;
        ensure!(
            t.rejected[i] == (res > cap),
            "row {i}: rejected={} but prompt+output={res} vs capacity {cap}",
            t.rejected[i]
        );
        let stamps = [
            t.prefill_start_s[i],
            t.first_token_s[i],
            t.kv_start_s[i],
            t.kv_ready_s[i],
            t.decode_start_s[i],
            t.finish_s[i],
        ];
        if t.rejected[i] {
            rejected += 1;
            ensure!(stamps.iter().all(|x| x.is_nan()), "rejected row {i} has stage times {stamps:?}");
            ensure!(t.prefill_instance[i] == -1 && t.decode_instance[i] == -1, "rejected row {i} has instances");
            ensure!(!t.measured[i], "rejected row {i} is measured");
        } else {
            completed += 1;
            ensure!(t.finish_s[i].is_finite(), "row {i} neither rejected nor finished");
        }
    }
    ensure!(completed + rejected == n as u64, "count mismatch");
    ensure!(
        s.completed == completed && s.rejected == rejected,
        "stats completed/rejected {}/{} vs table {completed}/{rejected}",
        s.completed,
        s.rejected
    );
    let warm = (f.warmup * completed as f64).floor() as u64;
    for (seen, i) in finished(t).enumerate() {
        ensure!(
            t.measured[i] == (seen as u64 >= warm),
            "row {i}: measured={} but it is completed #{seen} with warm-up {warm}",
            t.measured[i]
        );
    }
    let measured = t.measured.iter().filter(|&&m| m).count() as u64;
    ensure!(
        measured == completed - warm && s.measured == measured,
        "measured {measured} / stats {} vs expected {}",
        s.measured,
        completed - warm
    );
    Ok(())
}

/// Monotone stamps, presence rules, instance ranges; the six stages sum to E2E.
fn check_timestamps(o: &SimOutput, f: &Facts) -> Check {
    let t = &o.table;
    for i in finished(t) {
        let (a, ps, ft, ks, kr, ds, fin) = (
            t.arrival_s[i],
            t.prefill_start_s[i],
            t.first_token_s[i],
            t.kv_start_s[i],
            t.kv_ready_s[i],
            t.decode_start_s[i],
            t.finish_s[i],
        );
        let row = [a, ps, ft, ks, kr, ds, fin];
        ensure!(set(ps) && set(ft), "row {i}: finished without prefill stamps {row:?}");
        let pi = t.prefill_instance[i];
        ensure!(pi >= 0 && (pi as usize) < f.front, "row {i}: prefill instance {pi}");
        ensure!(a <= ps && ps < ft && ft <= fin, "row {i}: stamps out of order {row:?}");
        if t.output_tokens[i] <= 1 {
            ensure!(fin == ft, "row {i}: output {} but finish {fin} != first token {ft}", t.output_tokens[i]);
            ensure!(!set(ks) && !set(kr) && !set(ds), "row {i}: output ≤ 1 with kv/decode stamps {row:?}");
            ensure!(t.decode_instance[i] == -1, "row {i}: output ≤ 1 has a decode instance");
        } else if f.colocated {
            ensure!(!set(ks) && !set(kr), "row {i}: colocated with kv stamps {row:?}");
            ensure!(ds == ft, "row {i}: colocated decode_start {ds} != first token {ft}");
            ensure!(fin > ds, "row {i}: decode took no time {row:?}");
        } else {
            ensure!(set(ks) && set(kr) && set(ds), "row {i}: missing hand-off/decode stamps {row:?}");
            ensure!(ft <= ks && ks < kr && kr <= ds && ds < fin, "row {i}: stamps out of order {row:?}");
            let di = t.decode_instance[i];
            ensure!(di >= 0 && (di as usize) < f.back, "row {i}: decode instance {di}");
        }
        if f.colocated && t.output_tokens[i] >= 2 {
            ensure!(t.decode_instance[i] == pi, "row {i}: colocated decode instance {} != {pi}", t.decode_instance[i]);
        }
        // Stage breakdown (spec (d)); absent stages are 0.
        let kv_ready_or = if set(kr) { kr } else { ds };
        let stages = [
            ps - a,
            ft - ps,
            if set(ks) { ks - ft } else { 0.0 },
            if set(ks) { kr - ks } else { 0.0 },
            if set(ds) { ds - kv_ready_or } else { 0.0 },
            if set(ds) { fin - ds } else { 0.0 },
        ];
        ensure!(stages.iter().all(|&x| x >= 0.0), "row {i}: negative stage {stages:?}");
        let sum: f64 = stages.iter().sum();
        let e2e = fin - a;
        ensure!(
            (sum - e2e).abs() <= 1e-12 * fin.abs().max(1.0) * 8.0,
            "row {i}: stages sum {sum} != e2e {e2e} ({stages:?})"
        );
    }
    Ok(())
}

/// Maximum of Σ weight over half-open intervals [start, end), ends before starts at equal times.
fn sweep(intervals: impl Iterator<Item = (f64, f64, u64)>) -> (u64, usize) {
    let mut ev: Vec<(f64, i8, u64)> = Vec::new();
    for (s, e, w) in intervals {
        ev.push((s, 1, w));
        ev.push((e, -1, w));
    }
    ev.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut w, mut n, mut max_w, mut max_n) = (0u64, 0usize, 0u64, 0usize);
    for (_, d, x) in ev {
        if d > 0 {
            w += x;
            n += 1;
            max_w = max_w.max(w);
            max_n = max_n.max(n);
        } else {
            w -= x;
            n -= 1;
        }
    }
    (max_w, max_n)
}

/// KV reservations return, capacities hold, the peak matches a reconstruction from the table, and the
/// decode / colocated batch never exceeds `max_decode_batch`.
fn check_kv_and_batch(o: &SimOutput, f: &Facts) -> Check {
    let (t, s) = (&o.table, &o.stats);
    for (k, inst) in s.instances.iter().enumerate() {
        ensure!(inst.kv_end_tokens == 0, "{}: {} KV tokens never returned", inst.name, inst.kv_end_tokens);
        let holds_kv = f.colocated || k >= f.front;
        ensure!(inst.kv_capacity_tokens.is_some() == holds_kv, "{}: capacity presence", inst.name);
        let Some(cap) = inst.kv_capacity_tokens else {
            ensure!(inst.kv_peak_tokens == 0, "{}: KV without capacity", inst.name);
            continue;
        };
        ensure!(inst.kv_peak_tokens <= cap, "{}: KV peak {} > capacity {cap}", inst.name, inst.kv_peak_tokens);
        let idx = if f.colocated { k } else { k - f.front } as i32;
        let res = |i: usize| t.prompt_tokens[i] as u64 + t.output_tokens[i] as u64;
        let (peak, max_n) = if f.colocated {
            // Reserved from prefill admission to the finish (outputs ≤ 1 release at the prefill end).
            sweep(
                finished(t)
                    .filter(|&i| t.prefill_instance[i] == idx)
                    .map(|i| (t.prefill_start_s[i], t.finish_s[i], res(i))),
            )
        } else {
            sweep(
                finished(t)
                    .filter(|&i| t.decode_instance[i] == idx)
                    .map(|i| (t.decode_start_s[i], t.finish_s[i], res(i))),
            )
        };
        ensure!(
            peak == inst.kv_peak_tokens,
            "{}: reconstructed KV peak {peak} != reported {}",
            inst.name,
            inst.kv_peak_tokens
        );
        ensure!(
            max_n <= f.max_decode_batch,
            "{}: {max_n} sequences at once > max_decode_batch {}",
            inst.name,
            f.max_decode_batch
        );
    }
    Ok(())
}

/// Little's law holds exactly (to 1e-6); the horizon is the last finish; energy terms are sane; busy times
/// fit in the horizon; the power roof holds.
fn check_totals(o: &SimOutput, f: &Facts) -> Check {
    let (t, s) = (&o.table, &o.stats);
    let horizon = finished(t).map(|i| t.finish_s[i]).fold(0.0f64, f64::max);
    ensure!(s.horizon_s == horizon, "horizon {} != max finish {horizon}", s.horizon_s);
    let sum_e2e: f64 = finished(t).map(|i| t.finish_s[i] - t.arrival_s[i]).sum();
    if s.completed == 0 {
        ensure!(s.population_area == 0.0 && horizon == 0.0, "empty run with area/horizon");
    } else {
        let mean_e2e = sum_e2e / s.completed as f64;
        let l = s.population_area / horizon;
        let lw = s.completed as f64 * mean_e2e / horizon;
        // The spec asks for 1e-6; the bookkeeping is exact up to rounding, so hold it to 1e-9.
        ensure!(close(l, lw, 1e-9), "Little: L {l} vs λW {lw} (area {}, horizon {horizon})", s.population_area);
    }
    let mut static_j = 0.0;
    for (k, inst) in s.instances.iter().enumerate() {
        static_j += inst.idle_w * s.horizon_s;
        for (what, x) in [
            ("busy_s", inst.busy_s),
            ("flops", inst.flops),
            ("bytes", inst.bytes),
            ("compute_j", inst.compute_j),
            ("memory_j", inst.memory_j),
            ("power_bound_s", inst.power_bound_s),
            ("compute_bound_s", inst.compute_bound_s),
            ("peak_step_power_w", inst.peak_step_power_w),
        ] {
            ensure!(x.is_finite() && x >= 0.0, "{}: {what} = {x}", inst.name);
        }
        ensure!(
            inst.busy_s <= s.horizon_s * (1.0 + 1e-12),
            "{}: busy {} s > horizon {} s",
            inst.name,
            inst.busy_s,
            s.horizon_s
        );
        ensure!(
            inst.power_bound_s <= inst.busy_s * (1.0 + 1e-12) && inst.compute_bound_s <= inst.busy_s * (1.0 + 1e-12),
            "{}: bound fractions exceed busy time",
            inst.name
        );
        ensure!(inst.steps == inst.prefill_steps + inst.decode_steps, "{}: steps", inst.name);
        if inst.steps > 0 {
            ensure!(
                inst.peak_step_power_w >= inst.idle_w,
                "{}: peak step power {} below idle {}",
                inst.name,
                inst.peak_step_power_w,
                inst.idle_w
            );
            let limit = if f.colocated || k < f.front { f.front_limit_w } else { f.back_limit_w };
            if let Some(w) = limit {
                let roof = w * inst.devices as f64;
                ensure!(
                    inst.peak_step_power_w <= roof * (1.0 + 1e-9),
                    "{}: peak step power {} W above the power roof {roof} W",
                    inst.name,
                    inst.peak_step_power_w
                );
            }
        }
    }
    ensure!(
        s.static_j == static_j && s.static_j.is_finite() && s.static_j >= 0.0,
        "static energy {} != Σ idle·horizon {static_j}",
        s.static_j
    );
    // ITL: one gap per token after the first of every measured request; the gaps of a request add up to
    // finish − the first token as the user sees it (metrics.first_token: out of prefill, or at the end of
    // the first decode step, whose gap is then 0), so the exact mean is known.
    let seen = if t.first_token_seen_s.is_empty() { &t.first_token_s } else { &t.first_token_seen_s };
    let (mut count, mut sum, mut max_span) = (0u64, 0.0f64, 0.0f64);
    for i in finished(t).filter(|&i| t.measured[i] && t.output_tokens[i] >= 2) {
        count += t.output_tokens[i] as u64 - 1;
        sum += t.finish_s[i] - seen[i];
        max_span = max_span.max(t.finish_s[i] - seen[i]);
    }
    let q = s.itl_quantiles();
    ensure!(q.count == count, "ITL count {} != Σ(output − 1) {count}", q.count);
    if count > 0 {
        let mean = q.mean.unwrap();
        ensure!(close(mean, sum / count as f64, 1e-9), "ITL mean {mean} != {}", sum / count as f64);
        // Ordered exactly: bucket values are clamped to their bucket's range.
        let ps = [q.p50, q.p90, q.p95, q.p99, q.p99_9, q.max].map(Option::unwrap);
        ensure!(ps.windows(2).all(|w| w[0] <= w[1]) && ps[0] >= 0.0, "ITL percentiles not ordered {ps:?}");
        ensure!(mean <= ps[5], "ITL mean {mean} > max {}", ps[5]);
        ensure!(ps[5] <= max_span * (1.0 + 1e-12), "ITL max {} > longest decode span {max_span}", ps[5]);
    } else {
        ensure!(q.mean.is_none() && q.max.is_none(), "ITL without samples");
    }
    Ok(())
}

/// The link: one transfer per hand-off, busy and wait totals, FCFS grants, at most `channels` at once,
/// work-conserving.
fn check_link(o: &SimOutput, f: &Facts) -> Check {
    let (t, s) = (&o.table, &o.stats);
    let Some(link) = s.network() else {
        ensure!(f.colocated, "disaggregated run without link stats");
        return Ok(());
    };
    ensure!(!f.colocated, "colocated run with link stats");
    let xs: Vec<usize> = finished(t).filter(|&i| set(t.kv_start_s[i])).collect();
    ensure!(link.transfers == xs.len() as u64, "transfers {} != hand-offs {}", link.transfers, xs.len());
    let busy: f64 = xs.iter().map(|&i| t.kv_ready_s[i] - t.kv_start_s[i]).sum();
    let wait: f64 = xs.iter().map(|&i| t.kv_start_s[i] - t.first_token_s[i]).sum();
    // A difference of stamps carries the rounding of the stamps (ulp of the absolute time), so the
    // tolerance scales with Σ |kv_ready|.
    let tol = 8.0 * f64::EPSILON * xs.iter().map(|&i| t.kv_ready_s[i]).sum::<f64>();
    ensure!(
        (link.busy_s - busy).abs() <= tol.max(1e-12 * busy),
        "link busy {} != Σ(kv_ready − kv_start) {busy}",
        link.busy_s
    );
    ensure!(
        (link.wait_s - wait).abs() <= tol.max(1e-12 * wait),
        "link wait {} != Σ(kv_start − first_token) {wait}",
        link.wait_s
    );
    ensure!(link.busy_s <= f.channels as f64 * s.horizon_s * (1.0 + 1e-12), "link busy beyond channels × horizon");
    for (what, x) in [
        ("link_j", link.link_j),
        ("transit_j", link.transit_j),
        ("wire_bytes", link.wire_bytes),
        ("handoff_bytes", link.handoff_bytes),
    ] {
        ensure!(x.is_finite() && x >= 0.0, "link {what} = {x}");
    }
    if f.compression {
        ensure!(link.wire_bytes <= link.handoff_bytes, "compression grew the bytes");
    } else {
        ensure!(
            link.wire_bytes == link.handoff_bytes && link.transit_j == 0.0,
            "no compression but wire {} != hand-off {} or transit energy {}",
            link.wire_bytes,
            link.handoff_bytes,
            link.transit_j
        );
    }
    // FCFS in request order: an earlier first token (or the same prefill batch, in batch order) is
    // granted no later.
    for &a in &xs {
        for &b in &xs {
            let before = t.first_token_s[a] < t.first_token_s[b]
                || (t.first_token_s[a] == t.first_token_s[b]
                    && t.prefill_instance[a] == t.prefill_instance[b]
                    && a < b);
            ensure!(
                !before || t.kv_start_s[a] <= t.kv_start_s[b],
                "FCFS: request {a} (first token {}) granted at {} after request {b} (first token {}) at {}",
                t.first_token_s[a],
                t.kv_start_s[a],
                t.first_token_s[b],
                t.kv_start_s[b]
            );
        }
    }
    let (_, max_n) = sweep(xs.iter().map(|&i| (t.kv_start_s[i], t.kv_ready_s[i], 1)));
    ensure!(max_n <= f.channels, "{max_n} transfers at once on {} channels", f.channels);
    if f.channels == 1 {
        let mut order = xs.clone();
        order.sort_by(|&a, &b| t.kv_start_s[a].total_cmp(&t.kv_start_s[b]));
        for w in order.windows(2) {
            let (a, b) = (w[0], w[1]);
            ensure!(
                t.first_token_s[a] <= t.first_token_s[b],
                "single channel: transfer order differs from first-token order ({a}, {b})"
            );
            ensure!(t.kv_start_s[b] >= t.kv_ready_s[a], "single channel: transfers {a} and {b} overlap");
        }
    }
    // Work conservation: a request that waited was granted the moment another transfer ended.
    for &r in &xs {
        if t.kv_start_s[r] > t.first_token_s[r] {
            ensure!(
                xs.iter().any(|&q| t.kv_ready_s[q] == t.kv_start_s[r]),
                "request {r} waited for the link until {} but no transfer ended then",
                t.kv_start_s[r]
            );
        }
    }
    Ok(())
}

/// Per-instance requests in index order.
fn by_instance(t: &RequestTable, col: &[i32], n: usize) -> Vec<Vec<usize>> {
    let mut v = vec![Vec::new(); n];
    for i in finished(t) {
        if col[i] >= 0 {
            v[col[i] as usize].push(i);
        }
    }
    v
}

/// Prefill batches: token budget, strict FIFO, maximal under the budget, one first-token per batch, a
/// work-conserving prefill instance; per-instance step counts and batch sums agree with the table.
fn check_prefill_batches(o: &SimOutput, f: &Facts) -> Check {
    let (t, s) = (&o.table, &o.stats);
    for (p, reqs) in by_instance(t, &t.prefill_instance, f.front).into_iter().enumerate() {
        // FIFO: starts non-decreasing in index (= arrival) order.
        for w in reqs.windows(2) {
            ensure!(
                t.prefill_start_s[w[0]] <= t.prefill_start_s[w[1]],
                "instance {p}: request {} prefilled at {} before request {} at {}",
                w[1],
                t.prefill_start_s[w[1]],
                w[0],
                t.prefill_start_s[w[0]]
            );
        }
        // Batches are runs of equal prefill_start (step times are > 0, so starts are distinct per batch).
        let mut batches: Vec<&[usize]> = Vec::new();
        let mut k = 0;
        while k < reqs.len() {
            let mut e = k + 1;
            while e < reqs.len() && t.prefill_start_s[reqs[e]] == t.prefill_start_s[reqs[k]] {
                e += 1;
            }
            batches.push(&reqs[k..e]);
            k = e;
        }
        let inst = &s.instances[p];
        ensure!(
            inst.prefill_steps == batches.len() as u64,
            "{}: {} prefill steps but {} batches in the table",
            inst.name,
            inst.prefill_steps,
            batches.len()
        );
        let mut prev_end: Option<f64> = None;
        for (bi, b) in batches.iter().enumerate() {
            let start = t.prefill_start_s[b[0]];
            let end = t.first_token_s[b[0]];
            ensure!(
                b.iter().all(|&r| t.first_token_s[r] == end),
                "instance {p}: batch at {start} has several first-token times"
            );
            let tokens: u64 = b.iter().map(|&r| t.prompt_tokens[r] as u64).sum();
            ensure!(
                b.len() == 1 || tokens <= f.max_prefill_tokens,
                "instance {p}: batch of {} prompts with {tokens} tokens > max_prefill_tokens {}",
                b.len(),
                f.max_prefill_tokens
            );
            if let Some(pe) = prev_end {
                ensure!(start >= pe, "instance {p}: batch starts at {start} before the previous ended at {pe}");
            }
            if !f.colocated {
                // Maximal: the next request on this instance, already waiting when the batch formed, would
                // have broken the budget.
                if let Some(next) = batches.get(bi + 1).map(|nb| nb[0]) {
                    if t.arrival_s[next] < start {
                        ensure!(
                            tokens + t.prompt_tokens[next] as u64 > f.max_prefill_tokens,
                            "instance {p}: request {next} (prompt {}) was waiting at {start} but left out of a \
                             batch of {tokens} tokens (budget {})",
                            t.prompt_tokens[next],
                            f.max_prefill_tokens
                        );
                    }
                }
                // Work-conserving: a batch starts when the previous one ends, or when its head arrives at an
                // idle instance.
                let head_arrival = t.arrival_s[b[0]];
                let want = prev_end.map_or(head_arrival, |pe| pe.max(head_arrival));
                ensure!(start == want, "instance {p}: batch headed by {} starts at {start}, expected {want}", b[0]);
            }
            prev_end = Some(end);
        }
        // Batch sums: prompts in prefill steps, sequences in decode steps.
        let prompts = reqs.len() as u64;
        let decode_rows: u64 =
            if f.colocated { reqs.iter().map(|&r| (t.output_tokens[r] as u64).saturating_sub(1)).sum() } else { 0 };
        ensure!(
            inst.batch_sum == prompts + decode_rows,
            "{}: batch_sum {} != {prompts} prompts + {decode_rows} decode rows",
            inst.name,
            inst.batch_sum
        );
    }
    Ok(())
}

/// Decode instances: FIFO from the queue and Σ batch sizes = Σ (output − 1).
fn check_decode(o: &SimOutput, f: &Facts) -> Check {
    if f.colocated {
        return Ok(());
    }
    let (t, s) = (&o.table, &o.stats);
    for (d, reqs) in by_instance(t, &t.decode_instance, f.back).into_iter().enumerate() {
        let inst = &s.instances[f.front + d];
        let rows: u64 = reqs.iter().map(|&r| t.output_tokens[r] as u64 - 1).sum();
        ensure!(inst.batch_sum == rows, "{}: batch_sum {} != Σ(output − 1) {rows}", inst.name, inst.batch_sum);
        ensure!(inst.prefill_steps == 0, "{}: prefill steps", inst.name);
        // An idle decode instance admits at once: when nothing runs across or ends at T = kv_ready[r], every
        // hand-off landing at T is queued before the wake-up runs (the transfers were scheduled earlier), so
        // they are admitted at T as far as the batch limit and the KV capacity allow (at least the first).
        let cap = inst.kv_capacity_tokens.unwrap_or(0);
        for &r in &reqs {
            let now = t.kv_ready_s[r];
            let busy = reqs.iter().any(|&q| (t.decode_start_s[q] < now && t.finish_s[q] > now) || t.finish_s[q] == now);
            if busy {
                continue;
            }
            let landing: Vec<usize> = reqs.iter().copied().filter(|&q| t.kv_ready_s[q] == now).collect();
            let at_once = landing.iter().filter(|&&q| t.decode_start_s[q] == now).count();
            let kv: u64 = landing.iter().map(|&q| t.prompt_tokens[q] as u64 + t.output_tokens[q] as u64).sum();
            let want = if landing.len() <= f.max_decode_batch && kv <= cap { landing.len() } else { 1 };
            ensure!(
                at_once >= want,
                "{}: idle at {now}, {} hand-offs landed but only {at_once} admitted at once (rows {landing:?})",
                inst.name,
                landing.len()
            );
        }
        for &a in &reqs {
            for &b in &reqs {
                if t.kv_ready_s[a] < t.kv_ready_s[b] {
                    ensure!(
                        t.decode_start_s[a] <= t.decode_start_s[b],
                        "{}: request {a} (ready {}) admitted at {} after request {b} (ready {}) at {}",
                        inst.name,
                        t.kv_ready_s[a],
                        t.decode_start_s[a],
                        t.kv_ready_s[b],
                        t.decode_start_s[b]
                    );
                }
            }
        }
    }
    Ok(())
}

fn argmin(loads: &[u64]) -> usize {
    let mut best = 0;
    for i in 1..loads.len() {
        if loads[i] < loads[best] {
            best = i;
        }
    }
    best
}

/// Routers, reconstructed from the table. Decisions at an instant where another event of the same time
/// makes the order ambiguous are skipped.
fn check_routing(o: &SimOutput, f: &Facts) -> Check {
    let t = &o.table;
    let acc: Vec<usize> = finished(t).collect();
    let front_rule = if f.colocated { f.colocated_router.as_str() } else { f.prefill_router.as_str() };
    if front_rule == "round_robin" {
        for (k, &r) in acc.iter().enumerate() {
            ensure!(
                t.prefill_instance[r] as usize == k % f.front,
                "round robin: accepted request #{k} (row {r}) went to {}",
                t.prefill_instance[r]
            );
        }
    } else {
        // Loads at the arrival of r: requests routed earlier that have not started their prefill (a batch
        // in flight is not counted); colocated adds the running set.
        let ends: Vec<f64> = acc.iter().flat_map(|&i| [t.first_token_s[i], t.finish_s[i]]).collect();
        for (k, &r) in acc.iter().enumerate() {
            let now = t.arrival_s[r];
            if ends.contains(&now) {
                continue;
            }
            let mut load = vec![0u64; f.front];
            for &q in &acc[..k] {
                if t.prefill_start_s[q] > now {
                    let p = t.prefill_instance[q] as usize;
                    load[p] += if f.colocated { 1 } else { t.prompt_tokens[q] as u64 };
                }
            }
            if f.colocated {
                for &q in &acc[..k] {
                    if t.output_tokens[q] >= 2 && t.first_token_s[q] < now && t.finish_s[q] > now {
                        load[t.prefill_instance[q] as usize] += 1;
                    }
                }
            }
            let want = argmin(&load);
            ensure!(
                t.prefill_instance[r] as usize == want,
                "{front_rule}: row {r} at {now} went to {} but loads were {load:?}",
                t.prefill_instance[r]
            );
        }
    }
    if f.colocated {
        return Ok(());
    }
    let xs: Vec<usize> = acc.iter().copied().filter(|&i| set(t.kv_ready_s[i])).collect();
    if f.decode_router == "round_robin" {
        let mut counts = vec![0usize; f.back];
        for &r in &xs {
            counts[t.decode_instance[r] as usize] += 1;
        }
        let (lo, hi) = (xs.len() / f.back, xs.len().div_ceil(f.back));
        ensure!(counts.iter().all(|&c| c == lo || c == hi), "round robin decode counts {counts:?}");
        let mut order = xs.clone();
        order.sort_by(|&a, &b| t.kv_ready_s[a].total_cmp(&t.kv_ready_s[b]));
        let distinct = order.windows(2).all(|w| t.kv_ready_s[w[0]] < t.kv_ready_s[w[1]]);
        if distinct {
            for (k, &r) in order.iter().enumerate() {
                ensure!(
                    t.decode_instance[r] as usize == k % f.back,
                    "round robin: hand-off #{k} (row {r}) went to decode {}",
                    t.decode_instance[r]
                );
            }
        }
    } else {
        for &r in &xs {
            let now = t.kv_ready_s[r];
            let tie = xs
                .iter()
                .any(|&q| q != r && (t.kv_ready_s[q] == now || t.decode_start_s[q] == now || t.finish_s[q] == now));
            if tie {
                continue;
            }
            let mut load = vec![0u64; f.back];
            for &q in &xs {
                let d = t.decode_instance[q] as usize;
                let queued = t.kv_ready_s[q] < now && t.decode_start_s[q] > now;
                let running = t.decode_start_s[q] < now && t.finish_s[q] > now;
                load[d] += (queued || running) as u64;
            }
            let want = argmin(&load);
            ensure!(
                t.decode_instance[r] as usize == want,
                "least_loaded: hand-off of row {r} at {now} went to decode {} but loads were {load:?}",
                t.decode_instance[r]
            );
        }
    }
    Ok(())
}

fn check_all(o: &SimOutput, f: &Facts) -> Check {
    check_accounting(o, f)?;
    check_timestamps(o, f)?;
    check_kv_and_batch(o, f)?;
    check_totals(o, f)?;
    check_link(o, f)?;
    check_prefill_batches(o, f)?;
    check_decode(o, f)?;
    check_routing(o, f)
}

// ------------------------------------------------------------------------------------------------
// Bit-level comparison of two runs

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn same_table(a: &RequestTable, b: &RequestTable) -> Check {
    common::table_diff(a, b).map_or(Ok(()), Err)
}

/// Everything but the wall clock (and, with `events`, the kernel event count, which macro-steps change).
fn same_stats(a: &RunStats, b: &RunStats, events: bool) -> Check {
    ensure!(a.instances == b.instances, "instance stats differ");
    ensure!(a.links == b.links, "link stats differ");
    ensure!(
        a.horizon_s.to_bits() == b.horizon_s.to_bits()
            && a.population_area.to_bits() == b.population_area.to_bits()
            && a.static_j.to_bits() == b.static_j.to_bits(),
        "totals differ"
    );
    ensure!((a.completed, a.rejected, a.measured) == (b.completed, b.rejected, b.measured), "counts differ");
    ensure!(a.itl_quantiles() == b.itl_quantiles(), "ITL differs: {:?} vs {:?}", a.itl_quantiles(), b.itl_quantiles());
    if events {
        ensure!(a.events == b.events, "event counts differ");
    }
    Ok(())
}

fn with_macro(v: &Value, on: bool) -> Value {
    let mut v = v.clone();
    v["engine"]["macro_steps"] = json!(on);
    v
}

fn fail(sc: &Value, what: &str, e: String) -> TestCaseError {
    TestCaseError::fail(format!("{what}: {e}\nscenario: {sc}"))
}

// ------------------------------------------------------------------------------------------------
// Properties

/// Cases per property: 256 by default (a few seconds in all); `KVWIRE_PROPTEST_CASES` raises it for a
/// longer bug hunt.
fn cases() -> u32 {
    std::env::var("KVWIRE_PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(256)
}

/// No regression files are written: a failure prints the scenario JSON, which is the reproduction.
fn config() -> ProptestConfig {
    ProptestConfig { cases: cases(), max_shrink_iters: 2000, failure_persistence: None, ..ProptestConfig::default() }
}

proptest! {
    #![proptest_config(config())]

    /// All structural properties of one run.
    #[test]
    fn run_invariants(g in scenario_gen(120, 80)) {
        let sc = g.scenario();
        let out = run(&sc);
        check_all(&out, &Facts::of(&sc)).map_err(|e| fail(&sc, "invariant", e))?;
    }

    /// The echo of a validated scenario (`Scenario::echo_json`, the input schema) validates back to the same
    /// scenario, and running it gives the same table.
    #[test]
    fn echo_reproduces_the_scenario(g in scenario_gen(40, 30)) {
        let json = g.scenario().to_string();
        let sc = Scenario::from_json(&json, None).map_err(|e| TestCaseError::fail(format!("{json}: {e}")))?;
        let echo = sc.echo_json().to_string();
        let again = Scenario::from_json(&echo, None).map_err(|e| TestCaseError::fail(format!("{echo}: {e}")))?;
        prop_assert_eq!(&again, &sc, "echo {}", echo);
        let (a, b) = (simulate(sc).unwrap(), simulate(again).unwrap());
        same_table(&a.table, &b.table).map_err(|e| TestCaseError::fail(format!("{json}: {e}")))?;
    }

    /// Determinism, and the macro-step fast path against the step-by-step reference: bit-identical tables
    /// and totals (only the kernel event count may differ).
    #[test]
    fn deterministic_and_macro_steps_exact(g in scenario_gen(100, 60)) {
        let sc = g.scenario();
        let fast = run(&with_macro(&sc, true));
        let again = run(&with_macro(&sc, true));
        let slow = run(&with_macro(&sc, false));
        same_table(&fast.table, &again.table).map_err(|e| fail(&sc, "rerun", e))?;
        same_stats(&fast.stats, &again.stats, true).map_err(|e| fail(&sc, "rerun", e))?;
        same_table(&fast.table, &slow.table).map_err(|e| fail(&sc, "macro_steps true vs false", e))?;
        same_stats(&fast.stats, &slow.stats, false).map_err(|e| fail(&sc, "macro_steps true vs false", e))?;
        prop_assert!(fast.stats.events <= slow.stats.events, "macro-steps added events");
    }

    /// The step calendar on every engine path: 1P1D, 2P2D, 4P4D (or several colocated instances), with
    /// conditional disaggregation, layer-wise streaming (closed form or per slice), every link model
    /// (FCFS, processor sharing, host-staged), compression on the sender or in transit with decompression
    /// on the receiver, and the first token counted at the decode. Macro-steps on and off give
    /// bit-identical tables and totals; on, every batch step ends through the calendar (its count equals
    /// the instances' steps) and the heap's events plus the calendar's step ends equal the step-by-step
    /// run's events (nothing added, nothing lost). The events per step are printed with `--nocapture`.
    #[test]
    fn macro_steps_exact_on_every_path(
        g in scenario_gen(80, 50),
        (pools, colocated_n) in (prop::sample::select(&[(1u32, 1u32), (2, 2), (4, 4), (1, 3), (3, 1)][..]), 2u32..=5),
        conditional in prop::option::weighted(0.4, (0u32..3000, 0u32..40, prop_oneof![Just(0.0), 0.0f64..0.2])),
        model in prop::sample::select(&["fcfs", "fcfs", "shared", "host_staged"][..]),
        streaming in prop::sample::select(&["whole", "layer", "slices"][..]),
        endpoints in (any::<bool>(), any::<bool>()),
        first_token_decode in any::<bool>(),
    ) {
        let mut sc = g.scenario();
        if g.colocated {
            sc["colocated"]["instances"] = json!(colocated_n);
        } else {
            sc["prefill"]["instances"] = json!(pools.0);
            sc["decode"]["instances"] = json!(pools.1);
            sc["link"]["model"] = json!(model);
            if let Some((p, o, w)) = conditional {
                sc["router"]["disaggregate"] = json!({"policy": "conditional", "min_prompt_tokens": p,
                    "min_output_tokens": o, "max_link_wait_s": w});
            }
            if model == "fcfs" && streaming != "whole" {
                sc["handoff"]["streaming"] = json!("layer");
                sc["engine"]["per_slice_streaming"] = json!(streaming == "slices");
            }
            if g.compression != "none" {
                if endpoints.0 {
                    sc["handoff"]["compress_at"] = json!("sender");
                }
                if endpoints.1 {
                    sc["handoff"]["decompress_at"] = json!("receiver");
                }
            }
            if first_token_decode {
                sc["metrics"]["first_token"] = json!("decode");
            }
        }
        let text = sc.to_string();
        // Combinations the validation refuses (e.g. a prompt longer than a pool's KV) are not this test's.
        prop_assume!(Scenario::from_json(&text, None).is_ok());
        let fast = run(&with_macro(&sc, true));
        let slow = run(&with_macro(&sc, false));
        same_table(&fast.table, &slow.table).map_err(|e| fail(&sc, "macro_steps true vs false", e))?;
        same_stats(&fast.stats, &slow.stats, false).map_err(|e| fail(&sc, "macro_steps true vs false", e))?;
        let steps: u64 = fast.stats.instances.iter().map(|i| i.steps).sum();
        prop_assert_eq!(fast.stats.calendar_steps, steps, "every step ends through the calendar\n{}", text);
        prop_assert_eq!(slow.stats.calendar_steps, 0);
        prop_assert_eq!(fast.stats.events + fast.stats.calendar_steps, slow.stats.events, "{}", text);
        if steps > 0 {
            println!("events per step: {:.3} (step by step {:.3})", fast.stats.events as f64 / steps as f64,
                slow.stats.events as f64 / steps as f64);
        }
    }

    /// Bursts: many simultaneous arrivals (ties in arrival time) over several instances, with prompts that
    /// often fill the prefill budget exactly.
    #[test]
    fn bursts_with_ties(
        g in scenario_gen(60, 40),
        burst in 2usize..40,
        n_bursts in 1usize..4,
        gap in prop_oneof![Just(0.0), Just(0.05), 0.0f64..0.5],
        prompt in prop_oneof![1u32..=4, 1u32..3000],
        spread in prop_oneof![Just(1u32), 1u32..=4, 1u32..500],
        budget in prop::option::of(prop_oneof![1u32..=12, 1u32..4000]),
    ) {
        let mut sc = g.base();
        if let Some(b) = budget {
            sc["scheduler"]["max_prefill_tokens"] = json!(b);
        }
        let (mut a, mut p, mut o) = (Vec::new(), Vec::new(), Vec::new());
        for b in 0..n_bursts {
            for k in 0..burst {
                a.push(b as f64 * gap);
                p.push(prompt + (k as u32 * 37) % spread);
                o.push((k as u32 * 7) % 5);
            }
        }
        sc["workload"] = json!({"trace": {"arrival_s": a, "prompt_tokens": p, "output_tokens": o}});
        let out = run(&sc);
        check_all(&out, &Facts::of(&sc)).map_err(|e| fail(&sc, "invariant", e))?;
        let slow = run(&with_macro(&sc, !g.macro_steps));
        same_table(&out.table, &slow.table).map_err(|e| fail(&sc, "macro_steps differential", e))?;
        same_stats(&out.stats, &slow.stats, false).map_err(|e| fail(&sc, "macro_steps differential", e))?;
    }

    /// Ties by construction: extra requests arrive exactly at step-end times of a first run (a first token,
    /// a finish, a hand-off). Everything before the earliest injected arrival is unchanged, so at least one
    /// arrival coincides with a step end; the invariants and the fast-path differential must survive it.
    #[test]
    fn arrivals_exactly_on_step_ends(
        g in scenario_gen(60, 40),
        picks in prop::collection::vec((any::<prop::sample::Index>(), 1u32..3000, 0u32..6, any::<bool>()), 1..6),
    ) {
        let sc0 = g.scenario();
        let t0 = run(&sc0).table;
        let mut times: Vec<f64> = finished(&t0)
            .flat_map(|i| [t0.first_token_s[i], t0.finish_s[i], t0.kv_ready_s[i], t0.decode_start_s[i]])
            .filter(|x| set(*x))
            .collect();
        prop_assume!(!times.is_empty());
        times.sort_by(f64::total_cmp);
        times.dedup();
        // (arrival, before same-time originals?, prompt, output)
        let mut rows: Vec<(f64, bool, u32, u32)> = (0..t0.len())
            .map(|i| (t0.arrival_s[i], false, t0.prompt_tokens[i], t0.output_tokens[i]))
            .collect();
        for (ix, prompt, output, first) in &picks {
            rows.push((times[ix.index(times.len())], *first, *prompt, *output));
        }
        rows.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)));
        let mut sc = g.base();
        sc["workload"] = json!({"trace": {
            "arrival_s": rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            "prompt_tokens": rows.iter().map(|r| r.2).collect::<Vec<_>>(),
            "output_tokens": rows.iter().map(|r| r.3).collect::<Vec<_>>(),
        }});
        let fast = run(&with_macro(&sc, true));
        let slow = run(&with_macro(&sc, false));
        check_all(&fast, &Facts::of(&sc)).map_err(|e| fail(&sc, "invariant", e))?;
        same_table(&fast.table, &slow.table).map_err(|e| fail(&sc, "macro_steps true vs false", e))?;
        same_stats(&fast.stats, &slow.stats, false).map_err(|e| fail(&sc, "macro_steps true vs false", e))?;
    }
}

// ------------------------------------------------------------------------------------------------
// The ITL histogram alone

proptest! {
    #![proptest_config(config())]

    /// Quantiles of the weighted ITL histogram are ordered and lie within the recorded [min, max], whatever
    /// the weights and however close the values (several distinct values share a bucket).
    #[test]
    fn itl_quantiles_ordered_and_within_range(
        base in 1e-4f64..1.0,
        samples in prop::collection::vec((0u64..4, 1u64..2000), 1..8),
    ) {
        let (h, lo) = itl_histogram(base, &samples);
        let q = h.quantiles();
        let ps = [q.p50, q.p90, q.p95, q.p99, q.p99_9, q.max].map(Option::unwrap);
        prop_assert!(ps.windows(2).all(|w| w[0] <= w[1]), "not ordered: {:?} (samples {:?})", ps, samples);
        prop_assert!(ps[0] >= lo, "p50 {} below the minimum {}", ps[0], lo);
    }

    /// The ITL mean lies within [min, max] (the spec's mean is `statistics.fmean`, correctly rounded, so
    /// the mean of copies of one value is that value).
    #[test]
    fn itl_mean_within_range(
        base in 1e-4f64..1.0,
        samples in prop::collection::vec((0u64..4, 1u64..2000), 1..8),
    ) {
        let (h, lo) = itl_histogram(base, &samples);
        let q = h.quantiles();
        let (mean, max) = (q.mean.unwrap(), q.max.unwrap());
        prop_assert!(lo <= mean && mean <= max, "mean {:?} outside [{:?}, {:?}]", mean, lo, max);
    }
}

/// A histogram of values `base + k ulp` with weights; also returns the smallest value.
fn itl_histogram(base: f64, samples: &[(u64, u64)]) -> (kvwire_core::metrics::itl::ItlHistogram, f64) {
    let mut h = kvwire_core::metrics::itl::ItlHistogram::default();
    let mut lo = f64::INFINITY;
    for &(ulps, w) in samples {
        let v = f64::from_bits(base.to_bits() + ulps);
        h.record(v, w);
        lo = lo.min(v);
    }
    (h, lo)
}

// ------------------------------------------------------------------------------------------------
// Worked examples of the spec's clarifications

fn burst_scenario(prefill_instances: u32) -> Value {
    json!({
        "prefill": {"instances": prefill_instances},
        "workload": {"trace": {
            "arrival_s": vec![1.0; 8], "prompt_tokens": [100, 200, 300, 400, 500, 600, 700, 800],
            "output_tokens": vec![4; 8]}},
    })
}

/// "A burst of 8 simultaneous requests over two idle prefill instances: #1 → P0 and starts at once; #2 → P0
/// and waits; #3 → P1 and starts at once; after that each arrival goes to the queue holding fewer prompt
/// tokens."
#[test]
fn burst_of_eight_over_two_prefill_instances() {
    let sc = burst_scenario(2);
    let out = run(&sc);
    let t = &out.table;
    assert_eq!(&t.prefill_instance[..3], &[0, 0, 1]);
    assert_eq!(t.prefill_start_s[0], 1.0);
    assert!(t.prefill_start_s[1] > 1.0);
    assert_eq!(t.prefill_start_s[2], 1.0);
    // #4 (400) sees P0 holding 200 and P1 holding 0 → P1; #5 (500): P0 200, P1 400 → P0; and so on.
    let mut queued = [200u64, 0];
    for i in 3..8 {
        let want = if queued[1] < queued[0] { 1 } else { 0 };
        assert_eq!(t.prefill_instance[i], want as i32, "request {i}");
        queued[want] += t.prompt_tokens[i] as u64;
    }
    check_all(&out, &Facts::of(&with_defaults(&sc))).unwrap();
}

/// "Rejected iff prompt_len + output_len > KV capacity; equality is admitted."
#[test]
fn rejection_boundary_is_inclusive() {
    for (device, model) in [("a100-40g", "llama3-8b"), ("h100", "mistral-7b"), ("b200", "llama3.2-1b")] {
        let base = json!({"model": model, "decode": {"device": device}});
        let cap = reject_capacity(&base);
        let mut sc = base.clone();
        let p = |x: u64| x - 5;
        sc["workload"] = json!({"trace": {
            "arrival_s": [0.0, 0.0, 0.1], "prompt_tokens": [p(cap), p(cap) + 1, 1],
            "output_tokens": [5, 5, 5]}});
        let out = run(&sc);
        assert_eq!(out.table.rejected, [false, true, false], "{device} {model}");
        assert_eq!(out.stats.completed, 2);
        check_all(&out, &Facts::of(&with_defaults(&sc))).unwrap();
    }
}

/// "Arrival stamp: TTFT and E2E are measured from the request's given arrival time (the trace value)."
///
/// Regression test of a fixed bug: scenario JSON is parsed by serde_json without its `float_roundtrip` feature, whose float
/// parser is not correctly rounded: `632/7` written as `90.28571428571429` (the shortest round-trip text, as
/// Python's `json.dumps` and serde_json itself write it) is read as `90.28571428571428`. About 10% of
/// arbitrary doubles (17 significant digits) move by one ulp; short decimals (0.25, 8.0) are exact. Every
/// float field is affected (rates, caps, custom presets), but it shows most in `workload.trace`, where the
/// table's `arrival_s` is not the given value and the Python `requests=` path (numpy, exact) disagrees
/// with `workload.trace`. Fix: `serde_json = { version = "1", features = ["float_roundtrip"] }`.
#[test]
fn trace_arrival_times_survive_the_scenario_json() {
    let given = [1.860_607_111_065_223_4, 632.0 / 7.0];
    let sc = json!({"workload": {"trace": {
        "arrival_s": given, "prompt_tokens": [100, 100], "output_tokens": [2, 2]}}});
    let text = sc.to_string();
    assert!(text.contains("90.28571428571429"), "{text}");
    let out = run(&sc);
    assert_eq!(bits(&out.table.arrival_s), bits(&given), "arrival_s {:?} != given {given:?}", out.table.arrival_s);
}

/// Regression test of a fixed bug: the ITL histogram's quantiles can leave the sample's range. `bucket_value` represents a
/// bucket holding distinct values by Σ(value·weight)/count, which is not clamped to the bucket's [min, max]
/// and rounds (each value·weight product is rounded) to an ulp or two outside it. In this run (found by
/// `run_invariants`) p99 = p99.9 = 0.18890412214363433 > max = 0.18890412214363428, breaking
/// p50 ≤ … ≤ p99.9 ≤ max in `summary["latency"]["itl_s"]`. Fix: clamp the bucket value to [min, max].
#[test]
fn itl_percentiles_stay_below_the_max_in_a_run() {
    let sc: Value = serde_json::from_str(
        r#"{"mode": "colocated", "colocated": {"device": "b200", "instances": 1}, "model": "mistral-7b",
            "cost": {"enforce_tdp": false, "step_overhead_s": 0.007460050810613071},
            "scheduler": {"max_decode_batch": 14, "max_prefill_tokens": 14602},
            "workload": {"requests": 72, "seed": 6220855333609212014,
                "arrivals": {"process": "poisson", "rate_per_s": 493.4154870475996},
                "prompt_tokens": {"dist": "fixed", "value": 2086},
                "output_tokens": {"dist": "lognormal", "mean": 16.64907599673096, "cv": 0.0, "min": 0, "max": 15}}}"#,
    )
    .unwrap();
    let q = run(&sc).stats.itl_quantiles();
    let ps = [q.p50, q.p90, q.p95, q.p99, q.p99_9, q.max].map(Option::unwrap);
    assert!(ps.windows(2).all(|w| w[0] <= w[1]), "ITL p50, p90, p95, p99, p99.9, max not ordered: {ps:?}");
}

/// Fill the defaults the checks read into a hand-written scenario.
fn with_defaults(v: &Value) -> Value {
    let mut d: Value = serde_json::from_str(kvwire_core::scenario::DEFAULT_SCENARIO_JSON).expect("default JSON");
    merge(&mut d, v);
    if let Value::Object(m) = &mut d {
        m.remove("workload");
    }
    d
}

fn merge(a: &mut Value, b: &Value) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (a, b) => *a = b.clone(),
    }
}

//! Serving levers in the event core: chunked prefill (`scheduler.policy = "chunked"`).
//!
//! Oracles: the whole-prompt engine where the two must agree (no decode rows and no prompt split), the
//! ceiling ⌈n/b⌉ for the steps of one long prompt, the cost model's worst mixed step as a bound on the
//! inter-token gap, and Little's law / conservation on random runs.

mod common;
use common::{merged, run, step_by_step_diff, table_diff, trace};

use kvwire_core::cost::model::{Chunks, LmHead, ModelCost};
use kvwire_core::scenario::Topology;
use kvwire_core::Scenario;
use proptest::prelude::*;
use serde_json::{json, Value};

const HUGE: u32 = 4_000_000_000;

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Chunked prefill with no decode rows in any step and a budget no step can fill (so no prompt is ever
    /// split) is whole-prompt batching under the same budget, bit for bit: every table column and every
    /// instance / link total. Disaggregated (the prefill pool never decodes; outputs of any length, with
    /// sender-side compression so the final chunk's pass is covered too) and colocated with outputs ≤ 1.
    #[test]
    fn chunked_without_decode_rows_equals_whole(
        seed in 0u64..1000,
        rate in 1.0f64..60.0,
        colocated in any::<bool>(),
        instances in 1u32..3,
        mean in 100u32..6000,
    ) {
        let out_len = if colocated { json!({"dist": "uniform", "min": 0, "max": 1}) }
            else { json!({"dist": "lognormal", "mean": 200, "cv": 0.5}) };
        let mut base = json!({
            "workload": {"requests": 60, "seed": seed, "arrivals": {"process": "poisson", "rate_per_s": rate},
                         "prompt_tokens": {"dist": "lognormal", "mean": mean, "cv": 1.0, "max": 30000},
                         "output_tokens": out_len},
        });
        if colocated {
            base["mode"] = json!("colocated");
            base["colocated"] = json!({"instances": instances});
        } else {
            base["prefill"] = json!({"instances": instances});
            base["handoff"] = json!({"compression": "fp8", "compress_at": "sender"});
        }
        let whole = run(&merged(&base, &json!({"scheduler": {"max_prefill_tokens": HUGE}})));
        let chunked = run(&merged(&base, &json!({"scheduler": {"policy": "chunked", "max_num_batched_tokens": HUGE}})));
        prop_assert_eq!(table_diff(&whole.table, &chunked.table), None);
        prop_assert_eq!(&whole.stats.instances, &chunked.stats.instances);
        prop_assert_eq!(&whole.stats.links, &chunked.stats.links);
        prop_assert_eq!(whole.stats.population_area.to_bits(), chunked.stats.population_area.to_bits());
    }

    /// Random chunked runs (disaggregated, conditional or colocated; small budgets that split prompts;
    /// small KV caches; macro-steps on and off) conserve everything: each request is rejected xor finished,
    /// its stamps are ordered (arrival ≤ prefill start ≤ first token ≤ decode start ≤ finish), every KV
    /// reservation is returned and the peak never exceeds the capacity, the prefill tokens each instance
    /// computed sum to the prompts it prefilled, Little's law holds (∫N dt = Σ E2E), and the macro-step fast
    /// path gives the step-by-step result bit for bit.
    #[test]
    fn chunked_runs_conserve_requests_tokens_and_kv(
        seed in 0u64..1000,
        rate in 0.5f64..40.0,
        mode in 0u8..3,
        budget in prop_oneof![1u32..64, 64u32..4096],
        batch in 1u32..64,
        mem_util in prop_oneof![Just(0.9f64), 0.205f64..0.3],
    ) {
        let mut v = json!({
            "model": "llama3-8b",
            "workload": {"requests": 50, "seed": seed, "arrivals": {"process": "poisson", "rate_per_s": rate},
                         "prompt_tokens": {"dist": "lognormal", "mean": 1500, "cv": 1.0, "max": 20000},
                         "output_tokens": {"dist": "lognormal", "mean": 60, "cv": 1.0, "min": 0, "max": 400}},
            "scheduler": {"policy": "chunked", "max_num_batched_tokens": budget, "max_decode_batch": batch},
            "cost": {"mem_util": mem_util},
            "metrics": {"warmup_fraction": 0.0},
        });
        match mode {
            0 => {}
            1 => v["router"] = json!({"disaggregate": {"policy": "conditional", "min_prompt_tokens": 1500}}),
            _ => {
                v["mode"] = json!("colocated");
                v["colocated"] = json!({"instances": 2});
            }
        }
        let o = run(&v);
        let t = &o.table;
        let mut e2e = 0.0;
        let mut prefilled = vec![0u64; o.stats.instances.len()];
        for i in 0..t.len() {
            if t.rejected[i] {
                prop_assert!(t.finish_s[i].is_nan());
                continue;
            }
            let (a, s, f, d, e) = (t.arrival_s[i], t.prefill_start_s[i], t.first_token_s[i], t.decode_start_s[i], t.finish_s[i]);
            prop_assert!(a <= s && s < f && f <= e, "request {}: {} {} {} {}", i, a, s, f, e);
            if t.output_tokens[i] >= 2 {
                prop_assert!(f <= d && d < e, "request {}: first {} decode {} finish {}", i, f, d, e);
            }
            e2e += e - a;
            prefilled[t.prefill_instance[i] as usize] += t.prompt_tokens[i] as u64;
        }
        prop_assert_eq!(o.stats.completed + o.stats.rejected, t.len() as u64);
        let area = o.stats.population_area;
        prop_assert!((area - e2e).abs() <= 1e-9 * e2e.max(1.0), "Little: ∫N dt {} vs Σ E2E {}", area, e2e);
        for (k, s) in o.stats.instances.iter().enumerate() {
            prop_assert_eq!(s.kv_end_tokens, 0, "{} keeps KV", &s.name);
            if let Some(cap) = s.kv_capacity_tokens {
                prop_assert!(s.kv_peak_tokens <= cap);
            }
            if !s.name.starts_with("decode") {
                prop_assert_eq!(s.prefill_tokens_sum, prefilled[k], "{}", &s.name);
            }
        }
        prop_assert_eq!(step_by_step_diff(&v, &o), None);
    }
}

/// One prompt of n = 10,000 tokens under a budget of b tokens takes ⌈n/b⌉ steps, back to back: its TTFT is
/// the instance's whole busy time, and the prefill tokens computed are n.
#[test]
fn a_long_prompt_takes_ceil_n_over_b_steps() {
    let n = 10_000u32;
    for b in [1000u32, 2048, 3333, 4096, 9999, 10_000, 20_000] {
        let v = json!({
            "workload": trace(&[(0.5, n, 1)]),
            "scheduler": {"policy": "chunked", "max_num_batched_tokens": b},
        });
        let o = run(&v);
        let pre = &o.stats.instances[0];
        assert_eq!(pre.prefill_steps, n.div_ceil(b) as u64, "budget {b}");
        assert_eq!(pre.steps, pre.prefill_steps);
        assert_eq!(pre.prefill_tokens_sum, n as u64);
        let ttft = o.table.first_token_s[0] - o.table.prefill_start_s[0];
        assert_eq!(o.table.prefill_start_s[0], 0.5);
        assert!((ttft - pre.busy_s).abs() <= 1e-12, "budget {b}: ttft {ttft} busy {}", pre.busy_s);
    }
}

/// Colocated, one instance: a request decoding 3,000 tokens when a 30,000-token prompt arrives. With
/// whole-prompt batching the prompt's single prefill step stalls the decode, so the largest inter-token
/// gap is at least that step. Chunked (512 tokens) runs the decode row in every step, so every gap is one
/// mixed step, bounded by the cost model's time for a step doing more than any real one (the row and the
/// other request's at their longest context, plus a 512-token final chunk after 30,000 cached tokens).
#[test]
fn chunked_prefill_does_not_stall_decodes() {
    let base = json!({
        "mode": "colocated",
        "colocated": {"instances": 1},
        "workload": trace(&[(0.0, 100, 3000), (1.0, 30_000, 2)]),
        "metrics": {"warmup_fraction": 0.0},
    });
    let whole = run(&base);
    let chunked = run(&merged(&base, &json!({"scheduler": {"policy": "chunked", "max_num_batched_tokens": 512}})));
    let long_step = whole.table.first_token_s[1] - whole.table.prefill_start_s[1];
    let whole_max = whole.stats.itl_quantiles().max.unwrap();
    assert!(whole_max >= long_step, "whole: max ITL {whole_max} < the prompt's step {long_step}");

    let sc = Scenario::from_json(&chunked_scenario_json(&base), None).unwrap();
    let Topology::Colocated { pool } = &sc.topology else { panic!("colocated") };
    let timer = pool.timer(sc.roofline);
    let model = ModelCost::new(&sc.model.spec, LmHead::Last);
    let worst = Chunks {
        tokens: 512,
        cached_tokens: 30_000,
        attention_flops: model.chunk_attention_flops(512, 30_000),
        last_chunks: 1,
    };
    let bound = timer.time(model.mixed(3100 + 30_002, 2, worst)).time_s;
    let chunked_max = chunked.stats.itl_quantiles().max.unwrap();
    assert!(chunked_max <= bound, "chunked: max ITL {chunked_max} > one mixed step {bound}");
    assert!(bound < long_step / 10.0, "bound {bound} vs the stall {long_step}");
    // Every token of both requests was produced: 2,999 + 1 gaps.
    assert_eq!(chunked.stats.itl.count(), 3000);
    // The prompt's chunks ran in ⌈30,000 / 511⌉ or more steps (the decode row takes one token of each).
    assert!(chunked.stats.instances[0].prefill_steps >= 30_000u64.div_ceil(511));
}

fn chunked_scenario_json(base: &Value) -> String {
    merged(base, &json!({"scheduler": {"policy": "chunked", "max_num_batched_tokens": 512}})).to_string()
}

/// Validation: the budget must be a positive whole number, the policy a known name, and chunked prefill is
/// refused with layer-wise streaming; each error names its field.
#[test]
fn chunked_scenario_errors_name_their_field() {
    for (json, path) in [
        (r#"{"scheduler": {"max_num_batched_tokens": 0}}"#, "scheduler.max_num_batched_tokens"),
        (r#"{"scheduler": {"max_num_batched_tokens": -3}}"#, "scheduler.max_num_batched_tokens"),
        (r#"{"scheduler": {"policy": "sarathi"}}"#, "scheduler.policy"),
        (r#"{"scheduler": {"policy": "chunked"}, "handoff": {"streaming": "layer"}}"#, "scheduler.policy"),
    ] {
        let e = Scenario::from_json(json, None).unwrap_err();
        assert_eq!(e.path(), path, "{json}: {e}");
    }
    // Whole-prompt batching keeps its defaults; the echo carries the new keys.
    let sc = Scenario::from_json("{}", None).unwrap();
    let echo = sc.echo_json();
    assert_eq!(echo["scheduler"]["policy"], "whole");
    assert_eq!(echo["scheduler"]["max_num_batched_tokens"], 2048);
}

// ------------------------------------------------------------------------------------------------
// Paged KV (`kv.policy = "paged"`)

fn mode_json(v: &mut Value, mode: u8) {
    match mode {
        0 => {}
        1 => v["router"] = json!({"disaggregate": {"policy": "conditional", "min_prompt_tokens": 600}}),
        _ => {
            v["mode"] = json!("colocated");
            v["colocated"] = json!({"instances": 2});
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// With memory to spare (60 requests never fill an H100's 426k-token cache, watermark included), paged KV
    /// is reserved KV: every table column bit for bit (no preemption), the ITL figures, the horizon, the
    /// population integral and every instance's busy time and work — in disaggregated, conditional and
    /// colocated mode, whole or chunked. (The KV occupancy totals differ by design: blocks, not reservations.)
    #[test]
    fn paged_with_ample_memory_equals_reserve(
        seed in 0u64..1000,
        rate in 1.0f64..40.0,
        mode in 0u8..3,
        chunked in any::<bool>(),
        block in prop_oneof![Just(16u32), 1u32..300],
        swap in any::<bool>(),
    ) {
        let mut base = json!({
            "workload": {"requests": 60, "seed": seed, "arrivals": {"process": "poisson", "rate_per_s": rate},
                         "prompt_tokens": {"dist": "lognormal", "mean": 1200, "cv": 1.0, "max": 6000},
                         "output_tokens": {"dist": "lognormal", "mean": 150, "cv": 1.0, "min": 0, "max": 800}},
        });
        mode_json(&mut base, mode);
        if chunked {
            base["scheduler"] = json!({"policy": "chunked", "max_num_batched_tokens": 1024});
        }
        let reserve = run(&base);
        let preemption = if swap { "swap" } else { "recompute" };
        let paged = run(&merged(&base, &json!({"kv": {"policy": "paged", "block_size": block, "preemption": preemption}})));
        prop_assert_eq!(table_diff(&reserve.table, &paged.table), None);
        prop_assert!(paged.table.preemptions.iter().all(|&p| p == 0));
        prop_assert_eq!(reserve.stats.itl_quantiles(), paged.stats.itl_quantiles());
        prop_assert_eq!(reserve.stats.horizon_s.to_bits(), paged.stats.horizon_s.to_bits());
        prop_assert_eq!(reserve.stats.population_area.to_bits(), paged.stats.population_area.to_bits());
        for (a, b) in reserve.stats.instances.iter().zip(&paged.stats.instances) {
            prop_assert_eq!((a.busy_s.to_bits(), a.steps, a.flops.to_bits(), a.bytes.to_bits()),
                            (b.busy_s.to_bits(), b.steps, b.flops.to_bits(), b.bytes.to_bits()), "{}", &a.name);
        }
        prop_assert_eq!(paged.stats.preemptions, 0);
    }

    /// Paged KV under memory pressure (a cache of a few hundred to ~12k tokens, whole or chunked, every
    /// mode, both preemption modes): no request is lost — each is rejected xor finished, with every one of
    /// its output tokens (the ITL count is exactly Σ (output − 1) over the requests decoded) — blocks are
    /// conserved (every block given out is returned at the end, the peak never exceeds the capacity, which
    /// is whole blocks), stamps stay ordered, Little's law holds, the per-request preemption counts sum to
    /// the run's, and only the chosen mode's cost appears (swap bytes, or recompute tokens). With speculative
    /// decoding too (several tokens a step, and their blocks): every token is still accounted for — a request's
    /// verify steps are its output − 1 less the drafts it accepted (kept through preemption) and less the
    /// tokens its re-prefills gave it — and Σ accepted per request = the instances' total.
    #[test]
    fn paged_preemption_loses_nothing_and_conserves_blocks(
        seed in 0u64..1000,
        rate in 1.0f64..60.0,
        mode in 0u8..3,
        chunked in any::<bool>(),
        block in prop_oneof![Just(16u32), 1u32..64],
        watermark in prop_oneof![Just(0.01f64), 0.0f64..0.2],
        swap in any::<bool>(),
        mem_util in 0.2015f64..0.22,
        macro_steps in any::<bool>(),
        speculative in prop::option::of((1u32..6, 0.0f64..0.95)),
    ) {
        let mut v = json!({
            "workload": {"requests": 50, "seed": seed, "arrivals": {"process": "poisson", "rate_per_s": rate},
                         "prompt_tokens": {"dist": "lognormal", "mean": 300, "cv": 1.0, "max": 4000},
                         "output_tokens": {"dist": "lognormal", "mean": 200, "cv": 1.0, "min": 0, "max": 1500}},
            "cost": {"mem_util": mem_util},
            "metrics": {"warmup_fraction": 0.0},
            "kv": {"policy": "paged", "block_size": block, "watermark": watermark,
                   "preemption": if swap { "swap" } else { "recompute" }},
            "engine": {"macro_steps": macro_steps},
        });
        mode_json(&mut v, mode);
        if chunked {
            v["scheduler"] = json!({"policy": "chunked", "max_num_batched_tokens": 256});
        }
        if let Some((gamma, alpha)) = speculative {
            v["speculative"] = json!({"method": "mtp", "tokens": gamma, "acceptance": alpha});
        }
        let o = run(&v);
        let t = &o.table;
        let (mut e2e, mut tokens) = (0.0, 0u64);
        for i in 0..t.len() {
            if t.rejected[i] {
                prop_assert!(t.finish_s[i].is_nan());
                continue;
            }
            let (a, s, f, e) = (t.arrival_s[i], t.prefill_start_s[i], t.first_token_s[i], t.finish_s[i]);
            prop_assert!(a <= s && s < f && f <= e, "request {}: {} {} {} {}", i, a, s, f, e);
            if t.output_tokens[i] >= 2 {
                prop_assert!(f <= t.decode_start_s[i] && t.decode_start_s[i] < e, "request {}", i);
                tokens += t.output_tokens[i] as u64 - 1;
            }
            e2e += e - a;
        }
        prop_assert_eq!(o.stats.completed + o.stats.rejected, t.len() as u64);
        prop_assert_eq!(o.stats.itl.count(), tokens, "inter-token gaps");
        let area = o.stats.population_area;
        prop_assert!((area - e2e).abs() <= 1e-9 * e2e.max(1.0), "Little: {} vs {}", area, e2e);
        for s in &o.stats.instances {
            prop_assert_eq!(s.kv_end_tokens, 0, "{} keeps KV", &s.name);
            if let Some(cap) = s.kv_capacity_tokens {
                prop_assert!(s.kv_peak_tokens <= cap, "{}: peak {} > {}", &s.name, s.kv_peak_tokens, cap);
                prop_assert_eq!(cap % block as u64, 0);
            }
        }
        let per_request: u64 = t.preemptions.iter().map(|&p| p as u64).sum();
        prop_assert_eq!(per_request, o.stats.preemptions);
        if speculative.is_some() {
            let rows: u64 = o.stats.instances.iter().map(|s| s.spec_rows).sum();
            let accepted: u64 = o.stats.instances.iter().map(|s| s.spec_accepted).sum();
            prop_assert_eq!(t.accepted_tokens.iter().map(|&a| a as u64).sum::<u64>(), accepted);
            let steps: u64 = (0..t.len())
                .filter(|&i| !t.rejected[i] && t.output_tokens[i] >= 2)
                .map(|i| {
                    let again = if swap { 0 } else { t.preemptions[i] as u64 };
                    t.output_tokens[i] as u64 - 1 - t.accepted_tokens[i] as u64 - again
                })
                .sum();
            prop_assert_eq!(steps, rows, "verify steps");
        }
        if swap {
            prop_assert_eq!(o.stats.recompute_tokens, 0);
            prop_assert_eq!(o.stats.swap_bytes > 0.0, o.stats.preemptions > 0);
        } else {
            prop_assert_eq!(o.stats.swap_bytes, 0.0);
            prop_assert_eq!(o.stats.recompute_tokens > 0, o.stats.preemptions > 0);
        }
    }
}

/// A colocated instance with a 2,000-token cache (whole blocks of 16) and requests whose outputs outgrow it:
/// preemption happens in both modes, every request still finishes with all its tokens, a recomputed request
/// was prefilled again (recompute tokens > 0, no bytes moved) and a swapped one moved its KV out and back
/// (an even number of block-sized transfers: swap bytes a multiple of 2 · 16 · 131,072 B... per block).
#[test]
fn preemption_happens_and_every_request_finishes() {
    let rows: Vec<(f64, u32, u32)> = (0..12).map(|i| (i as f64 * 0.01, 200, 600)).collect();
    for preemption in ["recompute", "swap"] {
        let v = json!({
            "mode": "colocated",
            "colocated": {"instances": 1},
            "cost": {"mem_util": 0.2070},
            "metrics": {"warmup_fraction": 0.0},
            "kv": {"policy": "paged", "preemption": preemption},
            "workload": trace(&rows),
        });
        let o = run(&v);
        let cap = o.stats.instances[0].kv_capacity_tokens.unwrap();
        assert!((800..12 * 800).contains(&cap), "capacity {cap}");
        assert_eq!(o.stats.completed, 12, "{preemption}");
        assert!(o.stats.preemptions > 0, "{preemption}: no preemption");
        assert_eq!(o.stats.itl.count(), 12 * 599, "{preemption}");
        assert_eq!(o.stats.instances[0].kv_end_tokens, 0);
        if preemption == "swap" {
            assert_eq!(o.stats.recompute_tokens, 0);
            let block_bytes = 16.0 * 131_072.0;
            assert_eq!(o.stats.swap_bytes % block_bytes, 0.0);
        } else {
            assert!(o.stats.recompute_tokens >= o.stats.preemptions * 201);
            assert_eq!(o.stats.swap_bytes, 0.0);
        }
    }
}

/// Validation of `kv`: block size in 1..=65,536, watermark in [0, 1), known policy and preemption names;
/// each error names its field. The echo carries the section.
#[test]
fn kv_scenario_errors_name_their_field() {
    for (json, path) in [
        (r#"{"kv": {"block_size": 0}}"#, "kv.block_size"),
        (r#"{"kv": {"block_size": 70000}}"#, "kv.block_size"),
        (r#"{"kv": {"watermark": 1.0}}"#, "kv.watermark"),
        (r#"{"kv": {"watermark": -0.1}}"#, "kv.watermark"),
        (r#"{"kv": {"policy": "lru"}}"#, "kv.policy"),
        (r#"{"kv": {"preemption": "kill"}}"#, "kv.preemption"),
    ] {
        let e = Scenario::from_json(json, None).unwrap_err();
        assert_eq!(e.path(), path, "{json}: {e}");
    }
    let echo = Scenario::from_json(r#"{"kv": {"policy": "paged"}}"#, None).unwrap().echo_json();
    assert_eq!(echo["kv"], json!({"policy": "paged", "block_size": 16, "watermark": 0.01, "preemption": "recompute"}));
}

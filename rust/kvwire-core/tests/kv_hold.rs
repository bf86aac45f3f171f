//! KV holding in disaggregated runs with paged KV (issue 12 item 3): a prefill instance holds each handed-off
//! prompt's blocks from its prefill batch until its hand-off lands; a decode instance pulls a hand-off (its
//! transfer starts) only when it can allocate the request's blocks, which are reserved from then on.
//!
//! Oracles: reserved KV where memory never runs short (bit for bit); a replay of the prefill pool's blocks
//! from the per-request table (never above capacity at any instant); conservation and Little's law on random
//! runs; and a two-request run whose every time is composed by hand from the cost model's step and transfer
//! times.

mod common;
use common::{merged, run, step_by_step_diff, table_diff, trace};

use kvwire_core::cost::model::{LmHead, ModelCost};
use kvwire_core::metrics::table::RequestTable;
use kvwire_core::scenario::Topology;
use kvwire_core::Scenario;
use proptest::prelude::*;
use serde_json::{json, Value};

/// The hand-off path variants the properties run: FCFS (the reference), layer-wise streaming, processor
/// sharing with two channels, host-staged (three hops, the decode instance chosen before the last).
fn link_json(v: &mut Value, link: u8) {
    match link {
        0 => {}
        1 => v["handoff"] = json!({"streaming": "layer"}),
        2 => v["link"] = json!({"preset": "ib-ndr", "model": "shared", "channels": 2}),
        _ => v["link"] = json!({"preset": "eth-25g", "model": "host_staged"}),
    }
}

/// Replay of the prefill pool from the table: a request handed off from prefill instance i holds
/// ⌈prompt/block⌉ blocks there from its prefill start until its hand-off lands (until its first token when it
/// needs no hand-off). Returns the most tokens any instance held at one instant (releases at an instant come
/// before admissions: a landing wakes the instance at that same time).
fn prefill_replay_peak(t: &RequestTable, block: u64, instances: usize) -> u64 {
    let mut events: Vec<(f64, i64, usize)> = Vec::new();
    for i in 0..t.len() {
        if t.rejected[i] || t.local_decode[i] {
            continue;
        }
        let held = (t.prompt_tokens[i] as u64).div_ceil(block) * block;
        let end = if t.output_tokens[i] >= 2 { t.kv_ready_s[i] } else { t.first_token_s[i] };
        let inst = t.prefill_instance[i] as usize;
        events.push((t.prefill_start_s[i], held as i64, inst));
        events.push((end, -(held as i64), inst));
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut used, mut peak) = (vec![0i64; instances], 0i64);
    for (_, d, i) in events {
        used[i] += d;
        peak = peak.max(used[i]);
    }
    assert!(used.iter().all(|&u| u == 0));
    peak as u64
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// With memory to spare on both sides (60 requests never fill an H100's cache), KV holding never makes a
    /// prompt or a hand-off wait, so paged KV is reserved KV bit for bit in disaggregated runs — every table
    /// column, the ITL figures, the horizon, the population integral, every instance's work and every link
    /// total — over one or two prefill instances, always or conditional disaggregation, whole or chunked
    /// prefill, and FCFS, layer-streamed, processor-sharing and host-staged hand-off paths; no request
    /// waited for room (`kv_hold_wait_s` all 0) and every hand-off was pulled.
    #[test]
    fn holding_with_ample_memory_equals_reserve(
        seed in 0u64..1000,
        rate in 1.0f64..40.0,
        prefills in 1u32..3,
        conditional in any::<bool>(),
        chunked in any::<bool>(),
        link in 0u8..4,
        block in prop_oneof![Just(16u32), 1u32..300],
        swap in any::<bool>(),
    ) {
        let mut base = json!({
            "prefill": {"instances": prefills},
            "workload": {"requests": 60, "seed": seed, "arrivals": {"process": "poisson", "rate_per_s": rate},
                         "prompt_tokens": {"dist": "lognormal", "mean": 1200, "cv": 1.0, "max": 6000},
                         "output_tokens": {"dist": "lognormal", "mean": 150, "cv": 1.0, "min": 0, "max": 800}},
        });
        if conditional {
            base["router"] = json!({"disaggregate": {"policy": "conditional", "min_prompt_tokens": 600}});
        }
        link_json(&mut base, link);
        if chunked && link != 1 {
            base["scheduler"] = json!({"policy": "chunked", "max_num_batched_tokens": 1024});
        }
        let reserve = run(&base);
        let preemption = if swap { "swap" } else { "recompute" };
        let paged = run(&merged(&base, &json!({"kv": {"policy": "paged", "block_size": block, "preemption": preemption}})));
        prop_assert_eq!(table_diff(&reserve.table, &paged.table), None);
        prop_assert!(paged.table.kv_hold_wait_s.iter().all(|&w| w == 0.0));
        prop_assert_eq!(reserve.stats.itl_quantiles(), paged.stats.itl_quantiles());
        prop_assert_eq!(reserve.stats.horizon_s.to_bits(), paged.stats.horizon_s.to_bits());
        prop_assert_eq!(reserve.stats.population_area.to_bits(), paged.stats.population_area.to_bits());
        for (a, b) in reserve.stats.instances.iter().zip(&paged.stats.instances) {
            prop_assert_eq!((a.busy_s.to_bits(), a.steps, a.flops.to_bits(), a.bytes.to_bits()),
                            (b.busy_s.to_bits(), b.steps, b.flops.to_bits(), b.bytes.to_bits()), "{}", &a.name);
        }
        prop_assert_eq!(&reserve.stats.links, &paged.stats.links);
        let t = &paged.table;
        let handed = (0..t.len()).filter(|&i| !t.rejected[i] && !t.local_decode[i] && t.output_tokens[i] >= 2).count();
        prop_assert_eq!(paged.stats.kv_hold.handoffs, handed as u64);
        prop_assert_eq!(paged.stats.kv_hold.waited, 0);
    }

    /// KV holding under memory pressure on both sides (caches of a few hundred to ~12k tokens; always or
    /// conditional disaggregation; whole or chunked prefill; FCFS, streamed or host-staged paths; both
    /// preemption modes; macro-steps on or off): no request is lost — each is rejected xor finished with all
    /// its tokens (ITL count) — every block is returned on every instance and none ever held beyond capacity
    /// (the instances' peaks, and for always-disaggregated runs a replay of the prefill pool from the table at
    /// every instant), a prompt longer than a prefill instance's cache is rejected, a transfer starts only
    /// after its prompt's first token (or first layer, streamed) plus its recorded wait for room, the waits
    /// add up to the summary's, Little's law holds, and the macro-step path gives the step-by-step result
    /// bit for bit.
    #[test]
    fn holding_loses_nothing_and_conserves_blocks(
        seed in 0u64..1000,
        rate in 1.0f64..60.0,
        conditional in any::<bool>(),
        chunked in any::<bool>(),
        link in prop_oneof![Just(0u8), Just(1u8), Just(3u8)],
        block in prop_oneof![Just(16u32), 1u32..64],
        watermark in prop_oneof![Just(0.01f64), 0.0f64..0.2],
        swap in any::<bool>(),
        mem_util in 0.2015f64..0.22,
        decode_fp8 in any::<bool>(),
        instances in 1u32..3,
    ) {
        let mut v = json!({
            "prefill": {"instances": instances},
            "decode": {"instances": instances},
            "workload": {"requests": 50, "seed": seed, "arrivals": {"process": "poisson", "rate_per_s": rate},
                         "prompt_tokens": {"dist": "lognormal", "mean": 300, "cv": 1.0, "max": 4000},
                         "output_tokens": {"dist": "lognormal", "mean": 200, "cv": 1.0, "min": 0, "max": 1500}},
            "cost": {"mem_util": mem_util},
            "metrics": {"warmup_fraction": 0.0},
            "kv": {"policy": "paged", "block_size": block, "watermark": watermark,
                   "preemption": if swap { "swap" } else { "recompute" }},
        });
        if decode_fp8 {
            // The decode pool keeps fp8 (twice the tokens): the prefill pool is the smaller one.
            v["decode"]["kv_format"] = json!("fp8");
        }
        if conditional {
            v["router"] = json!({"disaggregate": {"policy": "conditional", "min_prompt_tokens": 600}});
        }
        link_json(&mut v, link);
        if chunked && link != 1 {
            v["scheduler"] = json!({"policy": "chunked", "max_num_batched_tokens": 256});
        }
        let o = run(&v);
        let t = &o.table;
        let prefill_cap = o.stats.instances[0].kv_capacity_tokens.unwrap();
        let (mut e2e, mut tokens, mut waits, mut handed) = (0.0, 0u64, 0.0, 0u64);
        for i in 0..t.len() {
            if t.prompt_tokens[i] as u64 > prefill_cap {
                prop_assert!(t.rejected[i], "request {}: prompt {} > prefill cache {}", i, t.prompt_tokens[i], prefill_cap);
            }
            if t.rejected[i] {
                prop_assert!(t.finish_s[i].is_nan());
                continue;
            }
            let (a, s, f, e) = (t.arrival_s[i], t.prefill_start_s[i], t.first_token_s[i], t.finish_s[i]);
            prop_assert!(a <= s && s < f && f <= e, "request {}: {} {} {} {}", i, a, s, f, e);
            let w = t.kv_hold_wait_s[i];
            prop_assert!(w >= 0.0);
            if t.output_tokens[i] >= 2 {
                prop_assert!(f <= t.decode_start_s[i] && t.decode_start_s[i] < e, "request {}", i);
                tokens += t.output_tokens[i] as u64 - 1;
                if !t.local_decode[i] {
                    handed += 1;
                    waits += w;
                    // Ready at the first token (whole) or once the first layer is done (streamed).
                    let ready = if link == 1 { s + (f - s) / 32.0 } else { f };
                    prop_assert!(t.kv_start_s[i] >= ready + w - 1e-9 * ready.max(1.0),
                                 "request {}: start {} ready {} wait {}", i, t.kv_start_s[i], ready, w);
                    prop_assert!(t.kv_start_s[i] <= t.kv_ready_s[i] && t.kv_ready_s[i] <= t.decode_start_s[i]);
                }
            }
            if t.local_decode[i] || t.output_tokens[i] < 2 {
                prop_assert_eq!(w, 0.0);
            }
            e2e += e - a;
        }
        prop_assert_eq!(o.stats.completed + o.stats.rejected, t.len() as u64);
        prop_assert_eq!(o.stats.itl.count(), tokens, "inter-token gaps");
        let area = o.stats.population_area;
        prop_assert!((area - e2e).abs() <= 1e-9 * e2e.max(1.0), "Little: {} vs {}", area, e2e);
        for s in &o.stats.instances {
            prop_assert_eq!(s.kv_end_tokens, 0, "{} keeps KV", &s.name);
            let cap = s.kv_capacity_tokens.unwrap();
            prop_assert!(s.kv_peak_tokens <= cap, "{}: peak {} > {}", &s.name, s.kv_peak_tokens, cap);
            prop_assert_eq!(cap % block as u64, 0);
        }
        let h = &o.stats.kv_hold;
        prop_assert_eq!(h.handoffs, handed);
        prop_assert!((h.wait_s_sum - waits).abs() <= 1e-9 * waits.max(1.0));
        prop_assert_eq!(h.waited, t.kv_hold_wait_s.iter().filter(|&&w| w > 0.0).count() as u64);
        if !conditional {
            let peak = prefill_replay_peak(t, block as u64, instances as usize);
            prop_assert!(peak <= prefill_cap, "replayed prefill pool {} > {}", peak, prefill_cap);
            prop_assert!(h.prefill_held_peak_blocks * block as u64 <= prefill_cap);
        }
        prop_assert_eq!(step_by_step_diff(&v, &o), None);
    }
}

/// Two requests of a 1,500-token prompt on 1P1D, each instance's cache 2,592 tokens (162 blocks of 16): one
/// prompt's blocks (94) fit a prefill instance but two do not, and one request's decode blocks (⌈1,502/16⌉ =
/// 94, growing to ⌈1,560/16⌉ = 98) fit a decode instance but two do not. So, with T_p the prefill step of one
/// prompt, X its transfer and D(c) a decode step at context c:
/// * A arrives at 0 and is prefilled alone over [0, T_p] (B, arriving at 0.001, waits: back-pressure);
/// * A's transfer starts at once: [T_p, T_p + X]; its landing frees its prefill blocks, so B's prefill runs
///   [T_p + X, T_p + X + T_p], while A decodes its 59 steps from T_p + X: A finishes at F_A = T_p + X + Σ D;
/// * B's first token comes before F_A; its transfer waits for A's blocks (`kv_hold_wait_s`) and starts
///   exactly when they are freed, at F_A, and lands at F_A + X; B then decodes alone.
///
/// Every time is composed here from the cost model (prefill and decode steps on the roofline, the link's
/// transfer time), not read from the run.
#[test]
fn two_requests_wait_for_room_at_exact_times() {
    let (p, out) = (1500u32, 60u32);
    let v = json!({
        "cost": {"mem_util": 0.205},
        "metrics": {"warmup_fraction": 0.0},
        "kv": {"policy": "paged", "block_size": 16, "watermark": 0},
        "workload": trace(&[(0.0, p, out), (0.001, p, out)]),
    });
    let o = run(&v);
    let caps: Vec<u64> = o.stats.instances.iter().map(|s| s.kv_capacity_tokens.unwrap()).collect();
    assert_eq!(caps, vec![2592, 2592]);

    let sc = Scenario::from_json(&v.to_string(), None).unwrap();
    let Topology::Disaggregated { prefill, decode } = &sc.topology else { panic!("disaggregated") };
    let model = ModelCost::new(&sc.model.spec, LmHead::Last);
    let t_p =
        prefill.timer(sc.roofline).time(model.prefill(p as u64, 1, model.prompt_attention_flops(p as u64))).time_s;
    let x = sc.handoff.hops[0].cost.transfer(sc.handoff.handoff_bytes(p)).duration_s;
    let dt = decode.timer(sc.roofline);
    // A request's decode steps, from `start`: contexts p + 1 … p + out − 1, one sequence each.
    let decode_from = |start: f64| (1..out).fold(start, |now, k| now + dt.time(model.decode((p + k) as u64, 1)).time_s);

    let t = &o.table;
    let landed_a = t_p + x;
    let finish_a = decode_from(landed_a);
    let first_b = landed_a + t_p;
    assert!(first_b < finish_a, "B must be ready before A is done");
    let want_a = [0.0, t_p, t_p, landed_a, landed_a, finish_a, 0.0];
    let want_b =
        [landed_a, first_b, finish_a, finish_a + x, finish_a + x, decode_from(finish_a + x), finish_a - first_b];
    for (r, want) in [(0, want_a), (1, want_b)] {
        let got = [
            t.prefill_start_s[r],
            t.first_token_s[r],
            t.kv_start_s[r],
            t.kv_ready_s[r],
            t.decode_start_s[r],
            t.finish_s[r],
            t.kv_hold_wait_s[r],
        ];
        assert_eq!(
            got, want,
            "request {r}: prefill start, first token, kv start, kv ready, decode start, finish, wait"
        );
    }
    let h = &o.stats.kv_hold;
    assert_eq!((h.handoffs, h.waited), (2, 1));
    assert_eq!((h.wait_s_sum, h.wait_s_max), (finish_a - first_b, finish_a - first_b));
    assert_eq!((h.prefill_held_peak_blocks, h.decode_peak_blocks), (94, 98));
    // The link's wait excludes the wait for room: both transfers found the channel free.
    assert_eq!(o.stats.links[0].wait_s, 0.0);
}

/// Reserved KV is untouched by holding: the same two requests with `kv.policy = "reserve"` hand off and
/// prefill with no back-pressure (B's prefill starts at its arrival's batch, right after A's), no wait is
/// recorded and the prefill instance reports no KV capacity, as before.
#[test]
fn reserve_does_not_hold() {
    let v = json!({
        "cost": {"mem_util": 0.205},
        "workload": trace(&[(0.0, 1500, 60), (0.001, 1500, 60)]),
    });
    let o = run(&v);
    let t = &o.table;
    assert_eq!(t.prefill_start_s[1], t.first_token_s[0]);
    assert!(t.kv_hold_wait_s.iter().all(|&w| w == 0.0));
    assert_eq!(o.stats.instances[0].kv_capacity_tokens, None);
    assert_eq!(o.stats.kv_hold, Default::default());
}

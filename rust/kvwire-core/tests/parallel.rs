//! Parallel layouts of a pool (issue 24 item 1): the collectives of a one-step run against their closed
//! forms written out here (not through the library's functions), the pipeline stretch, replication, the
//! memory fit per rank, and "every degree 1" = no `parallel`, bit for bit.

mod common;

use common::{merged, run, table_diff, trace};
use kvwire_core::{Error, Scenario};
use serde_json::{json, Value};

/// NVLink 4 (the H100 preset's scale-up link): 450 GB/s per direction, 5 µs.
const NV_B: f64 = 450e9;
const NV_A: f64 = 5e-6;
/// InfiniBand NDR (the default scale-out link): 50 GB/s, 10 µs.
const IB_B: f64 = 50e9;
const IB_A: f64 = 10e-6;
const OVERHEAD_S: f64 = 0.0005;

/// One 2,048-token prompt with one output token (a prefill step and no hand-off), TDP roof off so every
/// step is plain roofline.
fn one_prefill(model: &str, prefill: Value) -> Value {
    json!({
        "model": model,
        "prefill": prefill,
        "decode": {"device": "h100", "devices_per_instance": 8},
        "cost": {"enforce_tdp": false},
        "workload": trace(&[(0.0, 2048, 1)]),
    })
}

fn prefill_stats(v: &Value) -> (f64, f64) {
    let out = run(v);
    let p = &out.stats.instances[0];
    assert_eq!(p.name, "prefill-0");
    assert_eq!(p.steps, 1, "one prefill step");
    (p.busy_s, p.comm_s)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * b.abs().max(1e-9)
}

/// Every degree 1 (and an empty `parallel`) is the pool without `parallel`: every column of the table and
/// every instance total, bit for bit, on a 300-request run with decode.
#[test]
fn all_ones_is_no_parallel() {
    let base = json!({"workload": {"requests": 300}});
    let plain = run(&base);
    for par in [json!({}), json!({"tp": 1, "pp": 1, "ep": 1, "dp": 1})] {
        let v = merged(&base, &json!({"prefill": {"parallel": par}, "decode": {"parallel": par}}));
        let out = run(&v);
        assert_eq!(table_diff(&out.table, &plain.table), None, "{par}");
        assert_eq!(out.stats.instances, plain.stats.instances, "{par}");
    }
}

/// TP = 8 on Llama-3-70B (80 layers, hidden 8,192): the prefill step charges two ring all-reduces per layer
/// of 2,048 × 8,192 × 2 bytes over 8 NVLink ranks, 2·7/8·S/B + 14·α each, and its time is exactly the
/// 8-device roofline step plus that. Doubling TP (4 → 8) halves the step's roofline time (compute-bound
/// prefill: FLOPs over twice the devices) and adds exactly the all-reduce time.
#[test]
fn tp_all_reduce_matches_the_ring_closed_form() {
    let s = 2048.0 * 8192.0 * 2.0;
    for tp in [4u32, 8] {
        let n = tp as f64;
        let ar = 2.0 * (n - 1.0) / n * s / NV_B + 2.0 * (n - 1.0) * NV_A;
        let want_comm = 2.0 * 80.0 * ar;
        let (busy, comm) = prefill_stats(&one_prefill("llama3-70b", json!({"device": "h100", "parallel": {"tp": tp}})));
        let (plain, plain_comm) =
            prefill_stats(&one_prefill("llama3-70b", json!({"device": "h100", "devices_per_instance": tp})));
        assert_eq!(plain_comm, 0.0);
        assert!(close(comm, want_comm), "tp {tp}: {comm} vs {want_comm}");
        assert!(close(busy, plain + want_comm), "tp {tp}: {busy} vs {plain} + {want_comm}");
    }
    let (r4, _) = prefill_stats(&one_prefill("llama3-70b", json!({"device": "h100", "devices_per_instance": 4})));
    let (r8, _) = prefill_stats(&one_prefill("llama3-70b", json!({"device": "h100", "devices_per_instance": 8})));
    assert!(close(r8 - OVERHEAD_S, (r4 - OVERHEAD_S) / 2.0), "{r4} {r8}");
}

/// `cost.comm_overlap` hides that share of the collectives: 0.75 leaves a quarter of them in the step.
#[test]
fn comm_overlap_hides_a_share() {
    let mut v = one_prefill("llama3-70b", json!({"device": "h100", "parallel": {"tp": 8}}));
    let (busy0, comm0) = prefill_stats(&v);
    v["cost"]["comm_overlap"] = json!(0.75);
    let (busy, comm) = prefill_stats(&v);
    assert!(close(comm, comm0 * 0.25), "{comm} vs {comm0}");
    assert!(close(busy, busy0 - 0.75 * comm0), "{busy} vs {busy0}");
}

/// EP = 8 on Mixtral-8x7B (32 MoE layers, hidden 4,096), TP = 8: each MoE layer adds a dispatch and a
/// combine all-to-all. Together the ranks send tokens × hidden × 2 bytes × (ep − 1)/ep per direction, each
/// rank an eighth of it in 7 messages: (that total / 8)/B + 7·α.
#[test]
fn ep_all_to_all_matches_its_bytes() {
    let total_bytes = 2048.0 * 4096.0 * 2.0 * 7.0 / 8.0;
    let a2a = total_bytes / 8.0 / NV_B + 7.0 * NV_A;
    let tp_only = prefill_stats(&one_prefill("mixtral-8x7b", json!({"device": "h100", "parallel": {"tp": 8}})));
    let with_ep =
        prefill_stats(&one_prefill("mixtral-8x7b", json!({"device": "h100", "parallel": {"tp": 8, "ep": 8}})));
    let want = 2.0 * 32.0 * a2a;
    assert!(close(with_ep.1 - tp_only.1, want), "{} vs {want}", with_ep.1 - tp_only.1);
    assert!(close(with_ep.0 - tp_only.0, want));
}

/// The busiest expert at twice the mean load: the routed experts' FLOPs (2 · top-2 · 3·4,096·14,336 per MoE
/// layer and token, 32 layers) are charged once more, at the 8 devices' derated rate (compute-bound step).
#[test]
fn expert_imbalance_charges_the_busiest_expert() {
    let (b1, _) = prefill_stats(&one_prefill("mixtral-8x7b", json!({"device": "h100", "parallel": {"tp": 8}})));
    let (b2, _) = prefill_stats(&one_prefill(
        "mixtral-8x7b",
        json!({"device": "h100", "parallel": {"tp": 8, "expert_imbalance": 2.0}}),
    ));
    let routed = 2048.0 * 2.0 * 2.0 * 3.0 * 4096.0 * 14336.0 * 32.0;
    let want = routed / (989e12 * 0.55 * 8.0);
    assert!(close(b2 - b1, want), "{} vs {want}", b2 - b1);
}

/// PP = 2 × TP = 4 (8 devices, one NVLink domain): the batch passes the two stages in turn, so the step takes
/// twice the 8-device roofline time, plus the TP all-reduces of every layer and one hand-over of the
/// activations between the stages (S/B + α).
#[test]
fn pipeline_stretches_the_step_and_hands_over_once() {
    let s = 2048.0 * 8192.0 * 2.0;
    let ar = 2.0 * 3.0 / 4.0 * s / NV_B + 6.0 * NV_A;
    let send = s / NV_B + NV_A;
    let (busy, comm) =
        prefill_stats(&one_prefill("llama3-70b", json!({"device": "h100", "parallel": {"tp": 4, "pp": 2}})));
    let (plain, _) = prefill_stats(&one_prefill("llama3-70b", json!({"device": "h100", "devices_per_instance": 8})));
    let want_comm = 2.0 * 80.0 * ar + send;
    assert!(close(comm, want_comm), "{comm} vs {want_comm}");
    assert!(close(busy, (plain - OVERHEAD_S) * 2.0 + OVERHEAD_S + want_comm), "{busy}");
}

/// Micro-batches in the pipeline (PP = 2 × TP = 4): four 512-token prompts in one prefill step (queued
/// behind a 16-token one, whose step is the same in every run and is subtracted) run as four groups kept in
/// flight. Each group's stage pass takes a quarter of the compute-bound step's roofline time
/// (τ = (plain − overhead)/4 on the 8 devices), each stage passes the four groups in turn, so the step takes
/// max(pp, 4) · τ = the 8-device roofline time (the pipeline bubble filled) instead of twice it, plus
/// max(pp, 4)/pp = 2 group passes' collectives: 80 layers × 2 all-reduces of 512 × 8,192 × 2 bytes over 4
/// ranks and one stage hand-over of the group. `micro_batches` = 1 is the pipeline without it, bit for bit.
#[test]
fn micro_batches_fill_the_pipeline() {
    let rows = [(0.0, 16, 1), (1e-6, 512, 1), (1e-6, 512, 1), (1e-6, 512, 1), (1e-6, 512, 1)];
    let stats = |prefill: Value, rows: &[(f64, u32, u32)]| {
        let mut v = one_prefill("llama3-70b", prefill);
        v["workload"] = trace(rows);
        let out = run(&v);
        let p = out.stats.instances[0].clone();
        (p.busy_s, p.comm_s, p.steps)
    };
    // The second step alone: the whole run less the run of its first prompt only.
    let second = |prefill: Value| {
        let (busy, comm, steps) = stats(prefill.clone(), &rows);
        let (busy1, comm1, steps1) = stats(prefill, &rows[..1]);
        assert_eq!((steps, steps1), (2, 1), "the four prompts share one step");
        (busy - busy1, comm - comm1)
    };
    let (plain, _) = second(json!({"device": "h100", "devices_per_instance": 8}));
    let s = 512.0 * 8192.0 * 2.0;
    let group_comm = 2.0 * 80.0 * (2.0 * 3.0 / 4.0 * s / NV_B + 6.0 * NV_A) + (s / NV_B + NV_A);
    let (busy, comm) = second(json!({"device": "h100", "parallel": {"tp": 4, "pp": 2, "micro_batches": 4}}));
    let near = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs();
    assert!(near(comm, 2.0 * group_comm), "{comm} vs {}", 2.0 * group_comm);
    assert!(near(busy, plain + 2.0 * group_comm), "{busy} vs {plain} + {}", 2.0 * group_comm);
    // More micro-batches than rows: one group per prompt, the same step.
    let (busy8, _) = second(json!({"device": "h100", "parallel": {"tp": 4, "pp": 2, "micro_batches": 8}}));
    assert_eq!(busy8.to_bits(), busy.to_bits());
    // One micro-batch is the plain pipeline, bit for bit: twice the roofline time plus the batch's collectives.
    let one = stats(json!({"device": "h100", "parallel": {"tp": 4, "pp": 2, "micro_batches": 1}}), &rows);
    let none = stats(json!({"device": "h100", "parallel": {"tp": 4, "pp": 2}}), &rows);
    assert_eq!((one.0.to_bits(), one.1.to_bits()), (none.0.to_bits(), none.1.to_bits()));
    let (one_second, _) = second(json!({"device": "h100", "parallel": {"tp": 4, "pp": 2}}));
    assert!(one_second > busy * 1.5, "the bubble costs: {one_second} vs {busy}");
}

/// The busy and collective time of the second prefill step of `model` on the `prefill` pool, whose prompts
/// are `rows` (each of the given tokens, arriving while a one-token prompt's step runs): the run less the run
/// of the first prompt alone.
fn second_step(model: &str, prefill: Value, rows: &[u32]) -> (f64, f64) {
    let (busy, comm, _) = second_step_with_energy(model, prefill, rows, json!(0.0));
    (busy, comm)
}

/// [`second_step`] with `cost.comm_overlap` = `overlap`, and the step's dynamic energy (compute, memory), J.
fn second_step_with_energy(model: &str, prefill: Value, rows: &[u32], overlap: Value) -> (f64, f64, (f64, f64)) {
    let mut all = vec![(0.0, 1, 1)];
    all.extend(rows.iter().map(|&p| (1e-6, p, 1)));
    let stats = |rows: &[(f64, u32, u32)]| {
        let mut v = one_prefill(model, prefill.clone());
        v["workload"] = trace(rows);
        v["cost"]["comm_overlap"] = overlap.clone();
        let p = run(&v).stats.instances[0].clone();
        (p.busy_s, p.comm_s, p.steps, p.compute_j, p.memory_j)
    };
    let (busy, comm, steps, ec, em) = stats(&all);
    let (busy1, comm1, steps1, ec1, em1) = stats(&all[..1]);
    assert_eq!((steps, steps1), (2, 1), "the prompts share one step");
    (busy - busy1, comm - comm1, (ec - ec1, em - em1))
}

/// A memory-bound step (four 2-token prompts of Llama-3-70B, TP 2 × PP 2 × DP 2: the bytes are the weights,
/// both DP copies of the non-expert ones, and little else) with g micro-batches reads every stage's weights
/// once per group: its time less collectives and overhead is max(pp, g)/R · (W + (B − W)/g), W the weights
/// read per pass and B all its bytes, against pp/R · B with one batch. So, whatever W, B and R are,
/// s₄ − s₂ = 2 (s₂ − s₁/2). A compute-bound one (Mixtral-8x7B, four 2,048-token prompts, TP 4 × PP 2 × EP 4,
/// the busiest expert at twice the mean load) takes max(pp, g)/g of its FLOPs' time: with g = 4 on two stages
/// exactly half of one batch's.
#[test]
fn micro_batches_reread_weights_and_split_flops() {
    let net = |(busy, comm): (f64, f64)| busy - comm - OVERHEAD_S;
    let dense = |mb: u32| {
        let par = json!({"tp": 2, "pp": 2, "dp": 2, "micro_batches": mb});
        net(second_step("llama3-70b", json!({"device": "h100", "parallel": par}), &[2, 2, 2, 2]))
    };
    let (s1, s2, s4) = (dense(1), dense(2), dense(4));
    assert!(s2 < s1 && s4 > s2, "{s1} {s2} {s4}");
    let (lhs, rhs) = (s4 - s2, 2.0 * (s2 - s1 / 2.0));
    assert!((lhs - rhs).abs() <= 1e-9 * rhs, "{lhs} vs {rhs}");
    let moe = |mb: u32| {
        let par = json!({"tp": 4, "pp": 2, "ep": 4, "expert_imbalance": 2.0, "micro_batches": mb});
        net(second_step("mixtral-8x7b", json!({"device": "h100", "parallel": par}), &[2048, 2048, 2048, 2048]))
    };
    let (m1, m4) = (moe(1), moe(4));
    assert!((m4 - m1 / 2.0).abs() <= 1e-9 * m4, "{m4} vs {}", m1 / 2.0);
}

/// A micro-batched step's energy is its work's with the weights read once per group: the compute energy does
/// not change with g, and the memory energy grows by W·j per extra group, so E₄ − E₂ = 2 (E₂ − E₁), and
/// E₂ < 2 E₁. Its
/// collectives are those of a group pass max(pp, g)/pp times, less what `comm_overlap` hides: at 0.75 a
/// quarter of the g = 4 step's collectives at 0 overlap, the rest of the step unchanged.
#[test]
fn micro_batches_energy_and_overlap() {
    let step = |mb: u32, overlap: f64| {
        let par = json!({"tp": 2, "pp": 2, "dp": 2, "micro_batches": mb});
        second_step_with_energy("llama3-70b", json!({"device": "h100", "parallel": par}), &[2, 2, 2, 2], json!(overlap))
    };
    let (e1, e2, e4) = (step(1, 0.0).2, step(2, 0.0).2, step(4, 0.0).2);
    assert!((e2.0 - e1.0).abs() <= 1e-9 * e1.0 && (e4.0 - e1.0).abs() <= 1e-9 * e1.0, "{e1:?} {e2:?} {e4:?}");
    let (lhs, rhs) = (e4.1 - e2.1, 2.0 * (e2.1 - e1.1));
    assert!(rhs > 0.0 && (lhs - rhs).abs() <= 1e-9 * rhs, "{lhs} vs {rhs}");
    // A second read of the weights adds less than all the step's bytes again (W < B).
    assert!(e2.1 < 2.0 * e1.1, "{e1:?} {e2:?}");
    let (busy0, comm0, _) = step(4, 0.0);
    let (busy, comm, _) = step(4, 0.75);
    assert!((comm - 0.25 * comm0).abs() <= 1e-9 * comm0, "{comm} vs {comm0}");
    assert!((busy - (busy0 - 0.75 * comm0)).abs() <= 1e-9 * busy0, "{busy} vs {busy0}");
}

/// A memory-bound decode step with micro-batches reads the stage's weights once per group: at PP = 2 with
/// two groups in flight, a small batch's step (its bytes almost all weights) takes nearly what one batch at
/// a time does — each stage reads its weights twice per token period instead of once — and gains only the
/// split of its KV reads.
#[test]
fn micro_batches_reread_the_weights_in_decode() {
    let run_with = |par: Value| {
        let v = json!({"model": "llama3-70b", "cost": {"enforce_tdp": false},
                       "prefill": {"device": "h100", "devices_per_instance": 8},
                       "decode": {"device": "h100", "parallel": par},
                       "workload": trace(&[(0.0, 128, 40), (0.0, 128, 40), (0.0, 128, 40), (0.0, 128, 40)])});
        let out = run(&v);
        let d = out.stats.instances.iter().find(|i| i.name == "decode-0").unwrap().clone();
        d.busy_s / d.steps as f64
    };
    let one = run_with(json!({"tp": 4, "pp": 2}));
    let two = run_with(json!({"tp": 4, "pp": 2, "micro_batches": 2}));
    assert!(two < one && two > one * 0.99, "{two} vs {one}");
}

/// A TP group larger than the device's scale-up domain (16 > 8 on H100) runs its all-reduces on the
/// scale-out network (InfiniBand NDR by default; `parallel.scale_out` picks another).
#[test]
fn groups_beyond_the_domain_use_the_scale_out_network() {
    let s = 2048.0 * 8192.0 * 2.0;
    let ar = |b: f64, a: f64| 2.0 * 15.0 / 16.0 * s / b + 30.0 * a;
    let (_, comm) = prefill_stats(&one_prefill("llama3-70b", json!({"device": "h100", "parallel": {"tp": 16}})));
    assert!(close(comm, 160.0 * ar(IB_B, IB_A)), "{comm}");
    let (_, comm) = prefill_stats(&one_prefill(
        "llama3-70b",
        json!({"device": "h100", "parallel": {"tp": 16, "scale_out": "eth-100g"}}),
    ));
    assert!(close(comm, 160.0 * ar(12.5e9, 20e-6)), "{comm}");
}

/// KV capacity per rank: Llama-3-70B has 8 KV heads, so TP = 16 keeps one head per rank, twice the heads in
/// all: capacity = ⌊(H·u − W/16) / (2·kv/16)⌋ where the same 16 devices acting as one give ⌊(16·H·u − W)/kv⌋.
#[test]
fn kv_heads_below_tp_are_replicated() {
    let cap = |pool: Value| {
        let v = json!({"model": "llama3-70b", "prefill": {"device": "h100", "devices_per_instance": 4},
                       "decode": pool, "workload": trace(&[(0.0, 100, 2)])});
        run(&v).stats.instances[1].kv_capacity_tokens.unwrap()
    };
    // Llama-3-70B: 70,552,387,584 parameters (both embeddings) × 2 bytes; KV 80 layers × 2 × 8 × 128 × 2 bytes.
    let w: f64 = 70_552_387_584.0 * 2.0;
    let kv: f64 = 80.0 * 2.0 * 8.0 * 128.0 * 2.0;
    let hu: f64 = 80e9 * 0.9;
    let par = cap(json!({"device": "h100", "parallel": {"tp": 16}}));
    let plain = cap(json!({"device": "h100", "devices_per_instance": 16}));
    assert_eq!(par, ((hu - w / 16.0) / (2.0 * kv / 16.0)).floor() as u64);
    assert_eq!(plain, ((16.0 * hu - w) / kv).floor() as u64);
    // TP = 8 divides the heads: no replication, the same capacity as 8 devices acting as one (within the
    // floor of a differently rounded quotient).
    let par8 = cap(json!({"device": "h100", "parallel": {"tp": 8}}));
    let plain8 = cap(json!({"device": "h100", "devices_per_instance": 8}));
    assert!(par8.abs_diff(plain8) <= 1, "{par8} {plain8}");
}

fn refused(v: Value) -> Error {
    let text = v.to_string();
    Scenario::from_json(&text, None).expect_err(&text)
}

fn path_of(e: &Error) -> String {
    match e {
        Error::Field { path, .. } => path.clone(),
        other => panic!("not a field error: {other}"),
    }
}

/// The memory fit per rank refuses a TP that does not fit and names the smallest that does.
#[test]
fn memory_fit_names_the_smallest_tp() {
    let e = refused(json!({"model": "llama3-70b", "prefill": {"device": "h100", "parallel": {"tp": 1, "pp": 1}},
                           "decode": {"devices_per_instance": 4}}));
    assert_eq!(path_of(&e), "prefill.parallel.tp");
    let msg = e.to_string();
    assert!(msg.contains("the smallest tp that fits is 2") && msg.contains("--set prefill.parallel.tp=2"), "{msg}");
}

/// What cannot be priced or does not exist is refused, naming the field.
#[test]
fn impossible_layouts_are_refused() {
    let cases = [
        (json!({"prefill": {"parallel": {"ep": 2}}}), "prefill.parallel.ep"),
        (json!({"prefill": {"parallel": {"tp": 3}}}), "prefill.parallel.tp"),
        (json!({"prefill": {"parallel": {"tp": 0}}}), "prefill.parallel.tp"),
        (json!({"prefill": {"parallel": {"pp": 33}}}), "prefill.parallel.pp"),
        (json!({"prefill": {"parallel": {"tp": 2, "micro_batches": 2}}}), "prefill.parallel.micro_batches"),
        (json!({"prefill": {"parallel": {"pp": 2, "micro_batches": 0}}}), "prefill.parallel.micro_batches"),
        (json!({"prefill": {"parallel": {"pp": 2, "micro_batches": 5000}}}), "prefill.parallel.micro_batches"),
        (json!({"prefill": {"devices_per_instance": 4, "parallel": {"tp": 2}}}), "prefill.devices_per_instance"),
        (json!({"prefill": {"parallel": {"expert_imbalance": 1.5}}}), "prefill.parallel.expert_imbalance"),
        (
            json!({"model": "mixtral-8x7b", "prefill": {"devices_per_instance": 1, "parallel": {"tp": 2, "ep": 4}},
                "decode": {"devices_per_instance": 2}}),
            "prefill.parallel.ep",
        ),
        (
            json!({"model": "mixtral-8x7b", "prefill": {"devices_per_instance": 2},
                "decode": {"parallel": {"tp": 2, "expert_imbalance": 0.5}}}),
            "decode.parallel.expert_imbalance",
        ),
        (json!({"prefill": {"parallel": {"tp": 2, "scale_out": "smoke-signals"}}}), "prefill.parallel.scale_out"),
        (json!({"prefill": {"device": "wafer-scale", "parallel": {"tp": 2}}}), "prefill.device.scale_up"),
        (json!({"cost": {"comm_overlap": 1.5}}), "cost.comm_overlap"),
        (
            json!({"prefill": {"device": {"preset": "h100", "scale_up": {"domain": 8}}, "parallel": {"tp": 2}}}),
            "prefill.device.scale_up.bandwidth_gb_per_s",
        ),
    ];
    for (v, want) in cases {
        let e = refused(v.clone());
        assert_eq!(path_of(&e), want, "{v}: {e}");
    }
}

/// A custom device's scale-up fabric given as figures is used as given.
#[test]
fn a_custom_scale_up_fabric_is_priced() {
    let dev = json!({"preset": "h100", "scale_up": {"domain": 4, "bandwidth_gb_per_s": 100.0, "latency_us": 2.0}});
    let (_, comm) = prefill_stats(&one_prefill("llama3-70b", json!({"device": dev, "parallel": {"tp": 4}})));
    let s = 2048.0 * 8192.0 * 2.0;
    let want = 160.0 * (2.0 * 3.0 / 4.0 * s / 100e9 + 6.0 * 2e-6);
    assert!(close(comm, want), "{comm} vs {want}");
}

/// The echo of a parallel scenario validates to the same scenario and re-runs identically.
#[test]
fn the_echo_keeps_the_layout() {
    let v = json!({"model": "mixtral-8x7b", "prefill": {"parallel": {"tp": 4, "ep": 4, "expert_imbalance": 1.2}},
                   "decode": {"parallel": {"tp": 2, "pp": 2}}, "cost": {"comm_overlap": 0.5},
                   "workload": {"requests": 50}});
    let sc = Scenario::from_json(&v.to_string(), None).unwrap();
    let echo = serde_json::to_string(&sc.to_spec()).unwrap();
    let again = Scenario::from_json(&echo, None).unwrap();
    assert_eq!(sc, again);
    let a = run(&v);
    let b = run(&serde_json::from_str(&echo).unwrap());
    assert_eq!(table_diff(&a.table, &b.table), None);
    assert!(a.stats.instances.iter().all(|i| i.comm_s > 0.0), "every pool charges collectives");
}

/// The hand-off between unlike TP layouts (issue 24 item 5), in the closed form the engine shares: Llama-3-70B
/// (8 KV heads, 80 layers), a 2,048-token prompt (128 blocks of 16 per layer), a link with a 100 µs launch
/// overhead and 2 µs per descriptor. The busiest rank's k transfers each pay the launch overhead and
/// 128 · 80 descriptors: TP 4 → 8 has k = 2 (each prefill rank feeds two decode ranks), TP 8 → 2 k = 4 (each
/// decode rank gathers from four), matched TP 8 → 8 k = 1.
#[test]
fn unlike_tp_handoffs_pay_for_their_transfers() {
    let figures = |p: u32, d: u32| {
        let v = json!({"model": "llama3-70b",
                       "prefill": {"device": "h100", "parallel": {"tp": p}},
                       "decode": {"device": "h100", "parallel": {"tp": d}},
                       "link": {"preset": "ib-ndr", "launch_overhead_us": 100.0, "descriptor_us": 2.0}});
        let sc = Scenario::from_json(&v.to_string(), None).unwrap();
        sc.handoff_figures(2048, kvwire_core::scenario::Streaming::Whole).unwrap()
    };
    let bytes = 2048.0 * 80.0 * 2.0 * 8.0 * 128.0 * 2.0;
    let base = 10e-6 + 100e-6 + bytes / 50e9;
    for (p, d, k, pairs) in [(4u32, 8u32, 2.0, 8u32), (8, 2, 4.0, 8), (8, 8, 1.0, 8)] {
        let f = figures(p, d);
        let extra = (k - 1.0) * 100e-6 + k * 128.0 * 80.0 * 2e-6;
        assert_eq!(f.rank_pairs, pairs, "{p} -> {d}");
        assert!(close(f.descriptors_s, extra), "{p} -> {d}: {} vs {extra}", f.descriptors_s);
        assert!(close(f.transfer_s, base + extra), "{p} -> {d}: {} vs {}", f.transfer_s, base + extra);
    }
    // Without parallel on both pools and without a descriptor cost, a hand-off is one transfer, as before.
    let v = json!({"model": "llama3-70b", "prefill": {"devices_per_instance": 4},
                   "decode": {"parallel": {"tp": 8}}, "link": {"preset": "ib-ndr", "launch_overhead_us": 100.0}});
    let sc = Scenario::from_json(&v.to_string(), None).unwrap();
    let f = sc.handoff_figures(2048, kvwire_core::scenario::Streaming::Whole).unwrap();
    assert_eq!((f.rank_pairs, f.descriptors_s), (1, 0.0));
    assert!(close(f.transfer_s, base));
}

//! Analytic capacity ceilings: for each resource, the largest arrival rate (requests/s) it can sustain at
//! the workload's mean prompt and output lengths. It composes the physics (`cost/`: step times, KV
//! capacity) and the hand-off path (`handoff/`: the same hops and transfer costs the engine uses); it runs
//! no simulation.
//!
//! Definitions (README "Capacity ceilings"). Let the *served* requests be those not rejected at arrival (a
//! share `a` of all requests), p̄ and ō their mean prompt and output lengths, `h` the share of them with
//! output ≥ 2 (handed off and decoded), and D̄ = mean of max(o − 1, 0) (decode steps per request). Every
//! ceiling is in *arriving* requests/s: a resource that serves `x` served requests/s sustains `x / a`
//! arrivals/s (rejected requests cost nothing).
//!
//! * **prefill**: full token-budget batches of the mean prompt: k = max(1, ⌊max_prefill_tokens / p⌋) prompts
//!   of p = round(p̄) tokens, step time T_p = roofline(prefill of k·p tokens) + the sender's pass (compression
//!   and/or layout conversion) for the k·h of them handed off; ceiling = instances · k / T_p / a.
//! * **decode**: the steady batch B = min(max_decode_batch, ⌊KV capacity / (p̄ + ō)⌋) (at least 1) at the
//!   mean context p̄ + ō/2 per sequence (a sequence's context grows from p + 1 to p + o − 1); step time
//!   T_d = roofline(decode of B sequences, context B·(p̄ + ō/2)); each request needs D̄ sequence-steps and the
//!   receiver's pass (decompression and/or conversion) once per hand-off: ceiling = instances / ((T_d/B)·D̄
//!   + h·T_pass) / a. `None` when nothing decodes (D̄ = 0).
//! * **kv-link**: each hop of the hand-off path (the network; with a host-staged link also the PCIe hops and
//!   a host conversion) serves lanes · channels transfers at once, each holding its channel for the transfer
//!   time of the mean hand-off (latency + bytes / bandwidth, or the in-transit stage's ops time; data time
//!   only on a processor-sharing link): hop ceiling = lanes · channels / (t_x · h) / a, the `handoff.md`
//!   "link full at" rate per channel. The kv-link ceiling is the lowest hop's. `None` when nothing is handed
//!   off.
//! * **colocated**: an instance spends T_p/k per request on prefill and (T_d/B)·D̄ on decode, one after the
//!   other: 1 / colocated = 1 / prefill + 1 / decode, both computed as above on the colocated pool.
//!
//! Conditional disaggregation is priced as if every request were handed off. The binding resource is the
//! one with the lowest ceiling.

use serde::Serialize;

use crate::cost::model::StepWork;
use crate::cost::table::Shape;
use crate::error::Result;
use crate::scenario::{OverContext, Pool, Requests, Scenario, Topology, Workload};
use crate::workload::Arrivals;

/// One hop's ceiling.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HopCeiling {
    /// `kv-link`, `pcie-prefill`, `host-convert` or `pcie-decode`.
    pub resource: &'static str,
    pub req_per_s: f64,
}

/// Every resource's ceiling, arriving requests/s (`None` where the resource does not exist in this mode or
/// carries no work).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Ceilings {
    pub prefill_req_per_s: Option<f64>,
    pub decode_req_per_s: Option<f64>,
    pub kv_link_req_per_s: Option<f64>,
    pub colocated_req_per_s: Option<f64>,
    /// `prefill`, `decode`, `kv-link` or `colocated`: the resource with the lowest ceiling.
    pub binding: &'static str,
    pub ceiling_req_per_s: f64,
    /// The workload's mean arrival rate: `rate_per_s` of a generated workload; (n − 1) / (last − first
    /// arrival) of a request table (`None` with fewer than two requests or all at one instant); `rate_per_s` ×
    /// the mean turns per session of a sessions workload (closed loop: its steady-state request rate).
    pub offered_req_per_s: Option<f64>,
    /// Mean prompt and output lengths of the served requests, tokens.
    pub prompt_tokens_mean: f64,
    pub output_tokens_mean: f64,
    /// Share of requests served (not rejected at arrival).
    pub admitted_fraction: f64,
    /// Share of served requests with output ≥ 2 (handed off / decoded).
    pub handoff_fraction: f64,
    /// Prompts per full prefill batch (k).
    pub prefill_batch_prompts: u64,
    /// Steady decode batch (B), sequences.
    pub decode_batch: u64,
    /// Every hop of the hand-off path (empty when colocated).
    pub hops: Vec<HopCeiling>,
}

/// Means of the served part of a request table.
#[derive(Clone, Copy, Debug)]
struct Means {
    prompt: f64,
    output: f64,
    decode_steps: f64,
    handoff: f64,
    admitted: f64,
}

/// Sums over a request table, request by request, from which [`Means`] follow: of the requests served and,
/// for a table where every request is rejected, of all of them. Also the table's size and arrival span
/// (the offered rate). Built from a whole table or chunk by chunk (bounded-memory runs).
#[derive(Clone, Copy, Debug, Default)]
pub struct Census {
    served: [f64; 4],
    served_n: u64,
    served_handoff: u64,
    all: [f64; 4],
    all_handoff: u64,
    pub requests: u64,
    pub first_arrival_s: f64,
    pub last_arrival_s: f64,
}

impl Census {
    /// Account one request (after any clipping to the context): `served` when it is not rejected.
    #[inline]
    pub fn add(&mut self, arrival_s: f64, prompt: u32, output: u32, served: bool) {
        if self.requests == 0 {
            self.first_arrival_s = arrival_s;
        }
        self.last_arrival_s = arrival_s;
        self.requests += 1;
        let v = [prompt as f64, output as f64, output.saturating_sub(1) as f64];
        for (s, x) in self.all.iter_mut().zip(v) {
            *s += x;
        }
        self.all_handoff += (output >= 2) as u64;
        if served {
            self.served_n += 1;
            for (s, x) in self.served.iter_mut().zip(v) {
                *s += x;
            }
            self.served_handoff += (output >= 2) as u64;
        }
    }

    /// Requests not rejected at arrival.
    pub fn served(&self) -> u64 {
        self.served_n
    }

    fn means(&self) -> Means {
        let total = self.requests.max(1) as f64;
        let (s, n, h, admitted) = if self.served_n == 0 {
            // Every request is rejected: describe the workload as if it were admitted.
            (&self.all, self.requests.max(1) as f64, self.all_handoff, 0.0)
        } else {
            (&self.served, self.served_n as f64, self.served_handoff, self.served_n as f64 / total)
        };
        Means { prompt: s[0] / n, output: s[1] / n, decode_steps: s[2] / n, handoff: h as f64 / n, admitted }
    }

    /// The offered rate of a request table: (n − 1) / (last − first arrival).
    fn offered(&self) -> Option<f64> {
        let span = self.last_arrival_s - self.first_arrival_s;
        let rate = self.requests.saturating_sub(1) as f64 / span;
        (self.requests >= 2 && span > 0.0 && rate.is_finite()).then_some(rate)
    }
}

/// Whether a request is served (not rejected at arrival) by the ceilings' rule: it fits `capacity` and,
/// when `refuse` is set, was not over the context.
#[inline]
pub fn is_served(prompt: u32, output: u32, capacity: u64, refused: bool) -> bool {
    crate::policy::batching::ever_fits(prompt, output, capacity) && !refused
}

/// The census of a whole table, with the decoding pool's capacity of `sc`.
fn census(sc: &Scenario, requests: &Requests) -> Census {
    let trace = &requests.trace;
    let capacity = sc.decode_capacity();
    let prompts = sc.prompt_capacity();
    let refuse = sc.over_context == OverContext::Reject;
    let mut c = Census::default();
    for (i, ((&a, &p), &o)) in
        trace.arrival_s().iter().zip(trace.prompt_tokens()).zip(trace.output_tokens()).enumerate()
    {
        c.add(a, p, o, is_served(p, o, capacity, (refuse && requests.over_context[i]) || p as u64 > prompts));
    }
    c
}

/// Served requests/s of a pool's prefill: k prompts of round(p̄) per step, plus `pass` (the sender's extra
/// work per handed-off request) for the k·h handed off. Returns (rate, k).
fn prefill_rate(sc: &Scenario, p: &Pool, m: &Means, pass: StepWork) -> (f64, u64) {
    let model = sc.pool_cost(p);
    let prompt = (m.prompt.round() as u64).max(1);
    let k = (sc.max_prefill_tokens as u64 / prompt).max(1);
    let t = p.timer(sc.roofline);
    let work = model.prefill(k * prompt, k, k as u128 * model.prompt_attention_flops(prompt));
    let mut step_s = t.step(work, Shape::prefill(k, k * prompt, 0)).time_s;
    let share = k as f64 * m.handoff;
    if pass.bytes > 0.0 {
        step_s += t.pass(StepWork { flops: pass.flops * share, bytes: pass.bytes * share }).time_s;
    }
    (p.instances as f64 * k as f64 / step_s, k)
}

/// Served requests/s of a pool's decode (`None` when nothing decodes), with `pass` the receiver's extra
/// work per handed-off request. Returns (rate, B).
fn decode_rate(sc: &Scenario, p: &Pool, m: &Means, pass: StepWork) -> (Option<f64>, u64) {
    let model = sc.pool_cost(p);
    let cap = sc.kv_capacity_tokens(p, &model);
    let per_request = (m.prompt + m.output).max(1.0);
    let b = ((cap as f64 / per_request).floor() as u64).clamp(1, sc.max_decode_batch as u64);
    if m.decode_steps <= 0.0 {
        return (None, b);
    }
    let ctx = (b as f64 * (m.prompt + m.output / 2.0)).round() as u64;
    let t = p.timer(sc.roofline);
    let (step_s, tokens_per_step) = match &sc.speculative {
        None => (t.step(model.decode(ctx, b), Shape::decode(b, ctx)).time_s, 1.0),
        Some(sp) => {
            // The engine's step (verify pass and draft passes), for the mean tokens a sequence gets per step.
            let draft = p.cost(&sp.draft_cost(sc.lm_head));
            let (_, timing, _) = t.speculative_step(&model, &draft, sp.gamma, ctx, b);
            (timing.time_s, sp.mean_tokens_per_step())
        }
    };
    let pass_s = if pass.bytes > 0.0 { t.pass(pass).time_s * m.handoff } else { 0.0 };
    let per_request_s = step_s / b as f64 * m.decode_steps / tokens_per_step + pass_s;
    (Some(p.instances as f64 / per_request_s), b)
}

/// The ceilings of `sc` for `requests` (the requests that would run, [`Scenario::requests`]).
pub fn ceilings(sc: &Scenario, requests: &Requests) -> Ceilings {
    ceilings_of(sc, &census(sc, requests))
}

/// The ceilings of `sc` for the requests a [`Census`] describes.
pub fn ceilings_of(sc: &Scenario, c: &Census) -> Ceilings {
    let m = c.means();
    // Served requests/s → arriving requests/s (all rejected: as if admitted).
    let scale = if m.admitted > 0.0 { 1.0 / m.admitted } else { 1.0 };
    let per_arrival = |x: f64| x * scale;
    let none = StepWork { flops: 0.0, bytes: 0.0 };
    let (mut prefill, mut decode, mut link, mut colocated) = (None, None, None, None);
    let (k, b);
    let mut hop_ceilings = Vec::new();
    match &sc.topology {
        Topology::Disaggregated { prefill: pp, decode: dp } => {
            let (p_rate, pk) = prefill_rate(sc, pp, &m, sc.handoff.endpoint_work(m.prompt, true));
            let (d_rate, db) = decode_rate(sc, dp, &m, sc.handoff.endpoint_work(m.prompt, false));
            (k, b) = (pk, db);
            prefill = Some(per_arrival(p_rate));
            decode = d_rate.map(per_arrival);
            if m.handoff > 0.0 {
                let bytes = m.prompt * sc.handoff.bytes_per_token;
                for hop in &sc.handoff.hops {
                    let servers = (hop.lane_count(pp.instances, dp.instances) * hop.channels) as f64;
                    let rate = per_arrival(servers / (hop.service_s(bytes) * m.handoff));
                    hop_ceilings.push(HopCeiling { resource: hop.resource, req_per_s: rate });
                }
                link = hop_ceilings.iter().map(|h| h.req_per_s).reduce(f64::min);
            }
        }
        Topology::Colocated { pool } => {
            let (p_rate, pk) = prefill_rate(sc, pool, &m, none);
            let (d_rate, db) = decode_rate(sc, pool, &m, none);
            (k, b) = (pk, db);
            let per_request_s = 1.0 / p_rate + d_rate.map_or(0.0, |d| 1.0 / d);
            colocated = Some(per_arrival(1.0 / per_request_s));
        }
    }
    let (binding, ceiling) = [("prefill", prefill), ("kv-link", link), ("decode", decode), ("colocated", colocated)]
        .into_iter()
        .filter_map(|(name, c)| c.map(|c| (name, c)))
        .fold(("prefill", f64::INFINITY), |best, (name, c)| if c < best.1 { (name, c) } else { best });
    Ceilings {
        prefill_req_per_s: prefill,
        decode_req_per_s: decode,
        kv_link_req_per_s: link,
        colocated_req_per_s: colocated,
        binding,
        ceiling_req_per_s: ceiling,
        offered_req_per_s: offered(sc, c),
        prompt_tokens_mean: m.prompt,
        output_tokens_mean: m.output,
        admitted_fraction: m.admitted,
        handoff_fraction: m.handoff,
        prefill_batch_prompts: k,
        decode_batch: b,
        hops: hop_ceilings,
    }
}

/// The ceilings of `sc` for its own workload (generated from its seed, or its request table).
pub fn scenario_ceilings(sc: &Scenario) -> Result<Ceilings> {
    Ok(ceilings(sc, &sc.requests()?))
}

fn offered(sc: &Scenario, c: &Census) -> Option<f64> {
    match &sc.workload {
        Workload::Generated {
            arrivals: Arrivals::Poisson { rate_per_s } | Arrivals::Gamma { rate_per_s, .. }, ..
        } => Some(*rate_per_s),
        // Closed loop: every session sends its turns one after the other, so in steady state requests arrive
        // at the session rate × the mean turns a session sends (rows / sessions).
        Workload::Sessions(w) => {
            let rate = match w.arrivals {
                Arrivals::Poisson { rate_per_s } | Arrivals::Gamma { rate_per_s, .. } => rate_per_s,
            };
            Some(rate * c.requests as f64 / w.sessions.count as f64)
        }
        Workload::Trace(_) | Workload::Requests(_) | Workload::Stream => c.offered(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scenario whose workload is `n` requests of `prompt`/`output` tokens arriving at `rate` req/s
    /// (n = 1: one request at t = 1).
    fn fixed(extra: &str, n: usize, rate: f64, prompt: u32, output: u32) -> Scenario {
        let arrivals: Vec<String> = (0..n).map(|i| format!("{}", 1.0 + i as f64 / rate)).collect();
        let col = |v: u32| vec![v.to_string(); n].join(",");
        let json = format!(
            r#"{{{extra} "workload": {{"trace": {{"arrival_s": [{}], "prompt_tokens": [{}], "output_tokens": [{}]}}}}}}"#,
            arrivals.join(","),
            col(prompt),
            col(output)
        );
        Scenario::from_json(&json, None).unwrap()
    }

    fn rel(a: f64, b: f64) -> f64 {
        ((a - b) / b).abs()
    }

    /// kv-link = channels / transfer time of the mean hand-off (`spec/handoff.md`: 268.4 MB over 25 GbE takes
    /// 20 µs + 85.9 ms; the link is full at 11.6 hand-offs/s), times the channels.
    #[test]
    fn link_ceiling_is_channels_over_transfer_time() {
        let bytes = 2048.0 * 131_072.0;
        for channels in [1u32, 3] {
            let extra = format!(r#""link": {{"preset": "eth-25g", "channels": {channels}}},"#);
            let c = scenario_ceilings(&fixed(&extra, 10, 1.0, 2048, 100)).unwrap();
            let want = channels as f64 / (20e-6 + bytes / 3.125e9);
            assert!(rel(c.kv_link_req_per_s.unwrap(), want) < 1e-12, "{c:?}");
            assert_eq!(c.hops.len(), 1);
            // One channel binds (11.6 < prefill's 18 req/s); three (34.9) leave prefill binding.
            let (binding, ceiling) =
                if channels == 1 { ("kv-link", c.kv_link_req_per_s) } else { ("prefill", c.prefill_req_per_s) };
            assert_eq!((c.binding, Some(c.ceiling_req_per_s)), (binding, ceiling));
        }
        // fp8 in transit: half the bytes, the stage's 1 µs added.
        let extra = r#""link": "eth-25g", "handoff": {"compression": "fp8"},"#;
        let sc = fixed(extra, 10, 1.0, 2048, 100);
        let c = scenario_ceilings(&sc).unwrap();
        assert!(rel(c.kv_link_req_per_s.unwrap(), 1.0 / (21e-6 + bytes / 2.0 / 3.125e9)) < 1e-12);
        // Processor sharing holds no channel for the latency: data time only.
        let extra = r#""link": {"preset": "eth-25g", "model": "shared"},"#;
        let sc = fixed(extra, 10, 1.0, 2048, 100);
        let c = scenario_ceilings(&sc).unwrap();
        assert!(rel(c.kv_link_req_per_s.unwrap(), 3.125e9 / bytes) < 1e-12);
    }

    /// Host-staged: each hop is priced; PCIe hops have one lane per instance; the kv-link ceiling is the
    /// lowest hop's (here PCIe4 at 32 GB/s per prefill instance against 2 instances of... the network wins).
    #[test]
    fn host_staged_ceiling_is_the_lowest_hop() {
        let extra = r#""prefill": {"instances": 2}, "decode": {"instances": 3},
            "link": {"preset": "eth-100g", "model": "host_staged", "host_link": "pcie4", "channels": 2},"#;
        let sc = fixed(extra, 10, 1.0, 1000, 100);
        let c = scenario_ceilings(&sc).unwrap();
        let bytes = 1000.0 * 131_072.0;
        let hop = |servers: f64, gbs: f64, lat_us: f64| servers / (lat_us * 1e-6 + bytes / (gbs * 1e9));
        let want = [
            ("pcie-prefill", hop(2.0, 32.0, 5.0)),
            ("kv-link", hop(2.0, 12.5, 20.0)),
            ("pcie-decode", hop(3.0, 32.0, 5.0)),
        ];
        assert_eq!(c.hops.len(), 3);
        for (h, (name, rate)) in c.hops.iter().zip(want) {
            assert_eq!(h.resource, name);
            assert!(rel(h.req_per_s, rate) < 1e-12, "{h:?} vs {rate}");
        }
        assert_eq!(c.kv_link_req_per_s, Some(want[1].1));
    }

    /// Prefill = k / T_p with k = ⌊8192 / 2048⌋ = 4 and T_p the reference's step "8B prefill 4×2048, 1×H100":
    /// 234.6328 ms (spec/simulator.md (b), LM head on every token); two instances double it.
    #[test]
    fn prefill_ceiling_is_full_budget_batches() {
        for instances in [1.0, 2.0] {
            let extra = format!(r#""cost": {{"prefill_lm_head": "all"}}, "prefill": {{"instances": {instances}}},"#);
            let sc = fixed(&extra, 5, 1.0, 2048, 2);
            let c = scenario_ceilings(&sc).unwrap();
            assert_eq!(c.prefill_batch_prompts, 4);
            assert!(rel(c.prefill_req_per_s.unwrap(), instances * 4.0 / 0.2346328) < 2e-7, "{c:?}");
        }
        // A prompt above the budget runs alone: k = 1 and T_p = "8B prefill 2048" 59.0332 ms.
        let sc =
            fixed(r#""cost": {"prefill_lm_head": "all"}, "scheduler": {"max_prefill_tokens": 1000},"#, 5, 1.0, 2048, 2);
        let c = scenario_ceilings(&sc).unwrap();
        assert_eq!(c.prefill_batch_prompts, 1);
        assert!(rel(c.prefill_req_per_s.unwrap(), 1.0 / 0.0590332) < 2e-7);
    }

    /// Decode = B / (T_d · (o − 1)) at the steady batch: B = 64 (max_decode_batch) sequences at mean context
    /// p + o/2 = 1948 + 100 = 2048 tokens each, so the step is the reference's "8B decode b=64, ctx 131,072"
    /// 12.5142 ms (spec/simulator.md (b)); 199 steps per request.
    #[test]
    fn decode_ceiling_is_the_steady_batch() {
        let sc = fixed(r#""scheduler": {"max_decode_batch": 64},"#, 5, 1.0, 1948, 200);
        let c = scenario_ceilings(&sc).unwrap();
        assert_eq!(c.decode_batch, 64);
        assert!(rel(c.decode_req_per_s.unwrap(), 64.0 / (0.0125142 * 199.0)) < 5e-6, "{c:?}");
        // KV-limited: 426,788 tokens (8B on one H100) / (2000 + 200) = 193 sequences.
        let sc = fixed("", 5, 1.0, 2000, 200);
        assert_eq!(scenario_ceilings(&sc).unwrap().decode_batch, 193);
        // Nothing decodes with outputs of one token: no decode or link ceiling.
        let sc = fixed("", 5, 1.0, 2000, 1);
        let c = scenario_ceilings(&sc).unwrap();
        assert_eq!((c.decode_req_per_s, c.kv_link_req_per_s, c.binding), (None, None, "prefill"));
        assert_eq!(c.handoff_fraction, 0.0);
    }

    /// Colocated: the instance's time per request is the sum of its prefill and decode shares.
    #[test]
    fn colocated_combines_prefill_and_decode_time() {
        let colo = fixed(r#""mode": "colocated", "scheduler": {"max_decode_batch": 64},"#, 5, 1.0, 1948, 200);
        let c = scenario_ceilings(&colo).unwrap();
        let dis = fixed(
            r#""prefill": {"instances": 2}, "decode": {"instances": 2}, "scheduler": {"max_decode_batch": 64},"#,
            5,
            1.0,
            1948,
            200,
        );
        let d = scenario_ceilings(&dis).unwrap();
        let want = 1.0 / (1.0 / d.prefill_req_per_s.unwrap() + 1.0 / d.decode_req_per_s.unwrap());
        assert!(rel(c.colocated_req_per_s.unwrap(), want) < 1e-12);
        assert_eq!(
            (c.binding, c.prefill_req_per_s, c.decode_req_per_s, c.kv_link_req_per_s),
            ("colocated", None, None, None)
        );
    }

    /// Rejected requests cost nothing: with half the requests too large for the KV cache, every ceiling in
    /// arrivals/s doubles and the means are the served requests'.
    #[test]
    fn rejected_requests_scale_the_ceilings() {
        let json = r#"{"workload": {"trace": {"arrival_s": [1, 2, 3, 4], "prompt_tokens": [2048, 500000, 2048, 500000],
            "output_tokens": [100, 10, 100, 10]}}}"#;
        let sc = Scenario::from_json(json, None).unwrap();
        let c = scenario_ceilings(&sc).unwrap();
        let served = fixed("", 2, 1.0, 2048, 100);
        let s = scenario_ceilings(&served).unwrap();
        assert_eq!((c.admitted_fraction, c.prompt_tokens_mean, c.output_tokens_mean), (0.5, 2048.0, 100.0));
        assert!(rel(c.prefill_req_per_s.unwrap(), 2.0 * s.prefill_req_per_s.unwrap()) < 1e-12);
        assert!(rel(c.decode_req_per_s.unwrap(), 2.0 * s.decode_req_per_s.unwrap()) < 1e-12);
        assert!(rel(c.kv_link_req_per_s.unwrap(), 2.0 * s.kv_link_req_per_s.unwrap()) < 1e-12);
        assert_eq!(c.offered_req_per_s, Some(1.0));
    }

    /// Half the requests end at prefill (output 1): the sender's compression pass (fp8 on the prefill GPU) adds
    /// h·T_pass = 0.5·T_pass per arriving request to the prefill time, the receiver's decompression the same to
    /// the decode time, and the link carries half as many hand-offs. T_pass is the pass's HBM time: it reads
    /// the 2,048-token hand-off and writes its fp8 copy, 1.5 × 268.4 MB at 3.35 TB/s × 0.8 (its 1 op per value
    /// at 544 TFLOP/s is 600 times shorter).
    #[test]
    fn endpoint_passes_and_handoff_share() {
        let n = 10;
        let trace = |extra: &str| {
            let arrivals: Vec<String> = (0..n).map(|i| format!("{}", 1.0 + i as f64)).collect();
            let outputs: Vec<&str> = (0..n).map(|i| if i % 2 == 0 { "200" } else { "1" }).collect();
            let json = format!(
                r#"{{{extra} "link": "eth-25g", "workload": {{"trace": {{"arrival_s": [{}], "prompt_tokens": [{}],
                    "output_tokens": [{}]}}}}}}"#,
                arrivals.join(","),
                vec!["2048"; n].join(","),
                outputs.join(",")
            );
            scenario_ceilings(&Scenario::from_json(&json, None).unwrap()).unwrap()
        };
        let plain = trace("");
        assert_eq!(plain.handoff_fraction, 0.5);
        let bytes = 2048.0 * 131_072.0;
        let t_pass = 1.5 * bytes / (3.35e12 * 0.8);
        let sender = trace(r#""handoff": {"compression": "fp8", "compress_at": "sender"},"#);
        let extra = 1.0 / sender.prefill_req_per_s.unwrap() - 1.0 / plain.prefill_req_per_s.unwrap();
        assert!(rel(extra, 0.5 * t_pass) < 1e-9, "{extra} vs {}", 0.5 * t_pass);
        assert_eq!(sender.decode_req_per_s, plain.decode_req_per_s);
        let receiver = trace(r#""handoff": {"compression": "fp8", "decompress_at": "receiver"},"#);
        let extra = 1.0 / receiver.decode_req_per_s.unwrap() - 1.0 / plain.decode_req_per_s.unwrap();
        assert!(rel(extra, 0.5 * t_pass) < 1e-9, "{extra} vs {}", 0.5 * t_pass);
        assert_eq!(receiver.prefill_req_per_s, plain.prefill_req_per_s);
        // The link: one channel, half the requests handed off.
        assert!(rel(plain.kv_link_req_per_s.unwrap(), 1.0 / (0.5 * (20e-6 + bytes / 3.125e9))) < 1e-12);
        // A receiver-side layout conversion reads and writes both layouts' whole blocks (2,048 tokens fill 128
        // blocks of 16 in each: 2 × 268.4 MB).
        let conv = trace(r#""handoff": {"convert": {"from": "vllm_nhd", "to": "vllm_hnd", "at": "receiver"}},"#);
        let extra = 1.0 / conv.decode_req_per_s.unwrap() - 1.0 / plain.decode_req_per_s.unwrap();
        assert!(rel(extra, 0.5 * 2.0 * bytes / (3.35e12 * 0.8)) < 1e-9, "{extra}");
    }

    /// Every request rejected (too large for the KV cache): the ceilings describe the workload as if admitted,
    /// and say that none was (admitted_fraction 0).
    #[test]
    fn all_rejected() {
        let sc = fixed("", 3, 1.0, 500_000, 10);
        let c = scenario_ceilings(&sc).unwrap();
        assert_eq!((c.admitted_fraction, c.prompt_tokens_mean), (0.0, 500_000.0));
        assert!(c.prefill_req_per_s.unwrap() > 0.0);
    }

    /// Offered load: a generated workload's rate; a table's (n − 1) / span, undefined for one request.
    #[test]
    fn offered_rate() {
        let sc =
            Scenario::from_json(r#"{"workload": {"requests": 10, "arrivals": {"rate_per_s": 3.5}}}"#, None).unwrap();
        assert_eq!(scenario_ceilings(&sc).unwrap().offered_req_per_s, Some(3.5));
        let sc = fixed("", 5, 4.0, 100, 10);
        assert!(rel(scenario_ceilings(&sc).unwrap().offered_req_per_s.unwrap(), 4.0) < 1e-12);
        let sc = fixed("", 1, 4.0, 100, 10);
        assert_eq!(scenario_ceilings(&sc).unwrap().offered_req_per_s, None);
    }
}

//! The echo: a validated [`Scenario`] written back in the input schema ([`ScenarioSpec`], serialised by its
//! serde derive), complete — every preset expanded to its fields (with the key it came from), every default
//! filled in. Validating the echo gives back the same scenario ([`Scenario::to_spec`] is the inverse of
//! validation; tested over random scenarios), so a run can always be reproduced from its echo.
//!
//! [`Scenario::to_spec`] destructures every field of the scenario without `..`: a field added to
//! [`Scenario`] does not compile until the echo writes it.

use serde::Serialize;
use serde_json::{Map, Value};

use super::spec::{
    ArrivalSpec, ConvertSpec, CostSpec, DisaggregatePolicy, DisaggregateSpec, DistSpec, EngineSpec, HandoffSpec,
    LengthSpec, LmHeadSpec, LoadRouterSpec, MetricsSpec, ModeSpec, PoolSpec, PrefillRouterSpec, ProcessSpec,
    RouterSpec, ScenarioSpec, SchedulerSpec, SessionsSpec, SloSpec, SpeculativeMethod, SpeculativeSpec, TraceSpec,
    WorkloadSpec,
};
use super::{Disaggregate, LinkModel, Named, Pool, Rule, Scenario, Topology, Workload};
use crate::cost::model::LmHead;
use crate::handoff::plan::{ConvertAt, HandoffPlan};
use crate::quant::formats::Format;
use crate::workload::{Arrivals, LengthDist};

/// A preset reference written out in full: `{"preset": key, every field}` (no `preset` for an inline
/// `"custom"` object).
pub(super) fn expanded<T: Serialize>(named: &Named<T>) -> Value {
    let mut obj = Map::new();
    if named.key != "custom" {
        obj.insert("preset".into(), Value::String(named.key.clone()));
    }
    if let Ok(Value::Object(fields)) = serde_json::to_value(&named.spec) {
        obj.extend(fields);
    }
    Value::Object(obj)
}

fn format_name(f: Option<&'static Format>) -> String {
    f.map_or("none", |f| f.name).to_string()
}

fn pool(p: &Pool) -> PoolSpec {
    // The compute rate and matmul scale are derived from the model's formats and the device (echoed there).
    let Pool {
        device,
        instances,
        devices_per_instance,
        power_cap_w,
        kv_format,
        parallel,
        compute: _,
        matmul_scale: _,
        table: _,
    } = p;
    PoolSpec {
        device: expanded(device),
        instances: Some(*instances),
        devices_per_instance: *devices_per_instance,
        power_cap_w: *power_cap_w,
        kv_format: Some(format_name(*kv_format)),
        parallel: parallel.as_ref().map(|p| p.spec.clone()),
    }
}

/// The generator's fields of a workload (seed, arrival process, lengths).
fn generated(seed: u64, arrivals: &Arrivals, prompt: &LengthDist, output: &LengthDist) -> WorkloadSpec {
    WorkloadSpec {
        seed: Some(seed),
        arrivals: Some(match *arrivals {
            Arrivals::Poisson { rate_per_s } => ArrivalSpec { process: ProcessSpec::Poisson, rate_per_s, cv: None },
            Arrivals::Gamma { rate_per_s, cv } => ArrivalSpec { process: ProcessSpec::Gamma, rate_per_s, cv: Some(cv) },
        }),
        prompt_tokens: Some(length(prompt)),
        output_tokens: Some(length(output)),
        ..WorkloadSpec::default()
    }
}

fn length(d: &LengthDist) -> LengthSpec {
    let none = LengthSpec { dist: DistSpec::Fixed, value: None, mean: None, cv: None, min: None, max: None };
    match *d {
        LengthDist::Fixed { value } => LengthSpec { value: Some(value), ..none },
        LengthDist::Uniform { min, max } => {
            LengthSpec { dist: DistSpec::Uniform, min: Some(min), max: Some(max), ..none }
        }
        LengthDist::Lognormal { mean, cv, min, max } => LengthSpec {
            dist: DistSpec::Lognormal,
            mean: Some(mean),
            cv: Some(cv),
            min: Some(min),
            max: Some(max),
            ..none
        },
    }
}

fn load_router(r: Rule) -> LoadRouterSpec {
    match r {
        Rule::RoundRobin => LoadRouterSpec::RoundRobin,
        // Validation maps the decode and colocated routers to these two rules only.
        Rule::LeastLoaded | Rule::LeastQueuedTokens | Rule::PrefixAffinity { .. } => LoadRouterSpec::LeastLoaded,
    }
}

fn prefill_router(r: Rule) -> PrefillRouterSpec {
    match r {
        Rule::RoundRobin => PrefillRouterSpec::RoundRobin,
        Rule::PrefixAffinity { .. } => PrefillRouterSpec::PrefixAffinity,
        Rule::LeastQueuedTokens | Rule::LeastLoaded => PrefillRouterSpec::LeastQueuedTokens,
    }
}

/// The `handoff` section from the resolved plan.
fn handoff(plan: &HandoffPlan) -> HandoffSpec {
    // Every field named, so a new one cannot be left out of the echo unnoticed: the others are derived from
    // the model (bytes, value size, layers), the decode pool (its format) and the link (the hops).
    let HandoffPlan {
        compression,
        compress_at,
        decompress_at,
        streaming,
        convert,
        bytes_per_token: _,
        kv_bytes_per_value: _,
        receiver_format: _,
        layers: _,
        hops: _,
        network: _,
        // From the pools' parallel layouts and the link's descriptor cost.
        ranks: _,
        rank_pairs: _,
    } = plan;
    let convert = convert.as_ref().map(|c| {
        let host = c.at == ConvertAt::Host;
        ConvertSpec {
            from: c.from.def.name.to_string(),
            to: c.to.def.name.to_string(),
            at: c.at,
            from_block_size: Some(c.from.block_size as u32),
            to_block_size: Some(c.to.block_size as u32),
            from_dtype: c.explicit_dtypes.then(|| c.from.dtype.name().to_string()),
            to_dtype: c.explicit_dtypes.then(|| c.to.dtype.name().to_string()),
            host_gb_per_s: host.then_some(c.host_gb_per_s),
            host_threads: host.then_some(c.host_threads),
            host_w_per_thread: host.then_some(c.host_w_per_thread),
        }
    });
    HandoffSpec {
        compression: Some(format_name(*compression)),
        compress_at: *compress_at,
        decompress_at: *decompress_at,
        streaming: *streaming,
        convert,
        skip_cached_prefix: false,
    }
}

impl Scenario {
    /// This scenario in the input schema, complete (see the module documentation).
    pub fn to_spec(&self) -> ScenarioSpec {
        let Scenario {
            model,
            topology,
            link,
            handoff: plan,
            disaggregate,
            per_slice_streaming,
            workload,
            over_context,
            ttft_slo_s,
            tpot_slo_s,
            warmup_fraction,
            first_token,
            lm_head,
            roofline,
            mem_util,
            max_prefill_tokens,
            max_decode_batch,
            batch_policy,
            max_num_batched_tokens,
            kv,
            prefill_routing,
            decode_routing,
            colocated_routing,
            macro_steps,
            max_steps,
            timeline_max_spans,
            prefix_cache,
            speculative,
            faults,
            kv_tiers,
            timing,
        } = self;
        let (mode, prefill, decode, colocated, link_value) = match topology {
            Topology::Disaggregated { prefill, decode } => {
                let mut l = match expanded(&link.spec) {
                    Value::Object(m) => m,
                    _ => Map::new(),
                };
                l.insert("channels".into(), link.channels.into());
                let model = match &link.model {
                    LinkModel::Fcfs => "fcfs",
                    LinkModel::Shared => "shared",
                    LinkModel::HostStaged { host } => {
                        l.insert("host_link".into(), expanded(host));
                        "host_staged"
                    }
                };
                l.insert("model".into(), model.into());
                (ModeSpec::Disaggregated, Some(pool(prefill)), Some(pool(decode)), None, Some(Value::Object(l)))
            }
            Topology::Colocated { pool: p } => (ModeSpec::Colocated, None, None, Some(pool(p)), None),
        };
        let mut workload = match workload {
            Workload::Generated { requests, seed, arrivals, prompt, output } => {
                WorkloadSpec { requests: Some(*requests as u64), ..generated(*seed, arrivals, prompt, output) }
            }
            Workload::Sessions(w) => WorkloadSpec {
                sessions: Some(SessionsSpec {
                    count: w.sessions.count as u64,
                    turns: w.sessions.turns as u64,
                    think_s: Some(w.sessions.think_s),
                    system_prompts: Some(w.sessions.system_prompts),
                    system_tokens: Some(w.sessions.system_tokens),
                }),
                ..generated(w.seed, &w.arrivals, &w.prompt, &w.output)
            },
            Workload::Trace(t) => WorkloadSpec {
                trace: Some(TraceSpec {
                    arrival_s: t.arrival_s().to_vec(),
                    prompt_tokens: t.prompt_tokens().to_vec(),
                    output_tokens: t.output_tokens().to_vec(),
                }),
                ..WorkloadSpec::default()
            },
            // The table was passed beside the scenario: the echo says so, and needs it passed again.
            Workload::Requests(_) | Workload::Stream => {
                WorkloadSpec { external: Some(true), ..WorkloadSpec::default() }
            }
        };
        workload.over_context = Some(*over_context);
        let disaggregate = match *disaggregate {
            Disaggregate::Always => DisaggregateSpec::default(),
            Disaggregate::Conditional { min_prompt_tokens, min_output_tokens, max_link_wait_s } => DisaggregateSpec {
                policy: DisaggregatePolicy::Conditional,
                min_prompt_tokens,
                min_output_tokens,
                max_link_wait_s: max_link_wait_s.is_finite().then_some(max_link_wait_s),
            },
        };
        ScenarioSpec {
            model: Some(expanded(model)),
            mode: Some(mode),
            prefill,
            decode,
            colocated,
            link: link_value,
            handoff: HandoffSpec { skip_cached_prefix: prefix_cache.skip_cached_prefix, ..handoff(plan) },
            workload,
            slo: SloSpec { ttft_s: *ttft_slo_s, tpot_s: *tpot_slo_s },
            metrics: MetricsSpec { warmup_fraction: *warmup_fraction, first_token: *first_token },
            cost: CostSpec {
                step_overhead_s: roofline.step_overhead_s,
                mem_util: *mem_util,
                prefill_lm_head: match lm_head {
                    LmHead::All => LmHeadSpec::All,
                    LmHead::Last => LmHeadSpec::Last,
                },
                enforce_tdp: roofline.enforce_tdp,
                dvfs: roofline.dvfs,
                s_min: roofline.s_min,
                comm_overlap: roofline.comm_overlap,
                timing: timing.clone(),
            },
            scheduler: SchedulerSpec {
                policy: *batch_policy,
                max_prefill_tokens: *max_prefill_tokens,
                max_decode_batch: *max_decode_batch,
                max_num_batched_tokens: *max_num_batched_tokens,
            },
            kv: kv.clone(),
            router: RouterSpec {
                prefill: prefill_router(*prefill_routing),
                decode: load_router(*decode_routing),
                colocated: load_router(*colocated_routing),
                disaggregate,
            },
            engine: EngineSpec {
                macro_steps: *macro_steps,
                per_slice_streaming: *per_slice_streaming,
                max_steps: *max_steps,
                timeline: timeline_max_spans.is_some(),
                timeline_max_spans: timeline_max_spans.unwrap_or(super::spec::DEFAULT_TIMELINE_MAX_SPANS),
            },
            prefix_cache: prefix_cache.spec(),
            speculative: speculative.as_ref().map(|sp| SpeculativeSpec {
                method: sp.method,
                tokens: sp.gamma,
                acceptance: sp.acceptance_given.clone(),
                draft_model: (sp.method == SpeculativeMethod::Draft).then(|| expanded(&sp.draft)),
            }),
            faults: faults.as_ref().map(|f| f.spec.clone()),
            kv_tiers: (!kv_tiers.is_empty()).then(|| kv_tiers.iter().map(|t| t.spec.clone()).collect()),
        }
    }

    /// The resolved scenario as JSON in the input schema ([`Self::to_spec`]): presets expanded, defaults
    /// filled in; `Scenario::from_json(echo)` validates to this scenario again. Returned with every result
    /// so that a run documents exactly what it simulated.
    pub fn echo_json(&self) -> Value {
        serde_json::to_value(self.to_spec()).unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Trace;

    /// Scenarios covering every branch of the schema: each validates, echoes, and the echo validates back to
    /// the same scenario (the echo's JSON text too, so nothing depends on in-memory types).
    #[test]
    fn echo_validates_back_to_the_same_scenario() {
        let cases = [
            "{}",
            r#"{"mode": "colocated", "colocated": {"device": "a100", "instances": 3, "power_cap_w": 300}}"#,
            r#"{"model": {"preset": "llama3-70b", "kv_bytes_per_value": 1}, "prefill": {"device": "h100",
                "devices_per_instance": 4}, "decode": {"device": {"preset": "h200", "tdp_w": 650},
                "devices_per_instance": 2, "kv_format": "fp8"}, "link": {"preset": "eth-100g", "channels": 3,
                "latency_us": 7}}"#,
            r#"{"model": {"name": "tiny", "layers": 2, "d_model": 256, "heads": 4, "kv_heads": 2, "head_dim": 64,
                "d_ff": 512, "vocab": 1000}, "link": {"name": "mine", "bandwidth_gb_per_s": 1.5, "latency_us": 3,
                "pj_per_bit": 2}, "prefill": {"device": {"name": "gpu", "peak_tflops": 100, "hbm_tb_per_s": 1,
                "hbm_gb": 24, "flops_eff": 0.5, "bw_eff": 0.7, "tdp_w": 300, "idle_w": 50, "pj_per_flop": 1,
                "pj_per_byte": 10}}}"#,
            r#"{"handoff": {"compression": "mxfp4", "compress_at": "sender", "decompress_at": "receiver",
                "streaming": "whole"}, "link": {"preset": "ib-ndr", "model": "shared", "channels": 2}}"#,
            r#"{"handoff": {"compression": "fp8", "streaming": "layer"}, "engine": {"per_slice_streaming": true,
                "macro_steps": false}}"#,
            r#"{"link": {"preset": "eth-25g", "model": "host_staged", "host_link": "pcie4"}, "handoff": {"convert":
                {"from": "vllm_nhd", "to": "sglang", "at": "host", "to_block_size": 1, "host_threads": 3,
                "host_gb_per_s": 9.5, "host_w_per_thread": 2}}}"#,
            r#"{"handoff": {"convert": {"from": "vllm_hnd", "to": "trtllm", "at": "receiver", "from_block_size": 32}}}"#,
            r#"{"router": {"prefill": "round_robin", "decode": "round_robin", "colocated": "round_robin",
                "disaggregate": {"policy": "conditional", "min_prompt_tokens": 100, "min_output_tokens": 3,
                "max_link_wait_s": 0.25}}, "prefill": {"kv_format": "fp8"}}"#,
            r#"{"router": {"disaggregate": {"policy": "conditional", "min_prompt_tokens": 7}}}"#,
            r#"{"workload": {"requests": 33, "seed": 9, "arrivals": {"process": "gamma", "rate_per_s": 2.5, "cv": 3},
                "prompt_tokens": {"dist": "uniform", "min": 5, "max": 90}, "output_tokens": {"dist": "fixed",
                "value": 0}}, "slo": {"ttft_s": 0.3, "tpot_s": 0.01}, "metrics": {"warmup_fraction": 0},
                "cost": {"step_overhead_s": 0, "mem_util": 0.8, "prefill_lm_head": "all", "enforce_tdp": false,
                "dvfs": true, "s_min": 0.3}, "scheduler": {"max_prefill_tokens": 100, "max_decode_batch": 3}}"#,
            r#"{"workload": {"trace": {"arrival_s": [0, 0.1, 0.1], "prompt_tokens": [5, 4294967295, 1],
                "output_tokens": [0, 1, 9]}}}"#,
            r#"{"model": "deepseek-v3", "prefill": {"device": "h200", "devices_per_instance": 8}, "decode":
                {"device": "h200", "devices_per_instance": 8, "kv_format": "fp8_ds_mla"}}"#,
        ];
        for json in cases {
            let sc = Scenario::from_json(json, None).unwrap_or_else(|e| panic!("{json}: {e}"));
            let echo = sc.echo_json();
            let again = Scenario::from_json(&echo.to_string(), None).unwrap_or_else(|e| panic!("{echo}: {e}"));
            assert_eq!(again, sc, "{json}");
            // The echo of the echo is the echo: nothing is lost or added on a second pass.
            assert_eq!(again.echo_json(), echo, "{json}");
        }
    }

    /// The echo is complete: every section and every pool field is written out, nothing is null.
    #[test]
    fn echo_is_complete_and_has_no_nulls() {
        let sc = Scenario::from_json("{}", None).unwrap();
        let echo = sc.echo_json();
        for key in [
            "model",
            "mode",
            "prefill",
            "decode",
            "link",
            "handoff",
            "workload",
            "slo",
            "metrics",
            "cost",
            "scheduler",
            "router",
            "engine",
        ] {
            assert!(echo.get(key).is_some(), "{key} missing from {echo}");
        }
        assert_eq!(echo["model"]["preset"], "llama3-8b");
        assert_eq!(echo["model"]["layers"], 32);
        assert_eq!(echo["link"]["bandwidth_gb_per_s"], 50.0);
        assert_eq!(echo["handoff"]["compress_at"], "transit");
        assert_eq!(echo["router"]["disaggregate"]["policy"], "always");
        assert_eq!(echo["decode"]["kv_format"], "none");
        fn no_null(v: &Value) -> bool {
            match v {
                Value::Null => false,
                Value::Array(a) => a.iter().all(no_null),
                Value::Object(o) => o.values().all(no_null),
                _ => true,
            }
        }
        assert!(no_null(&echo), "{echo}");
    }

    /// A table given beside the scenario is echoed as `workload.external`: validating the echo without the
    /// table is an error naming that field; with the table it gives the same scenario.
    #[test]
    fn external_table_echo_needs_the_table_again() {
        let table = || Trace::from_columns("requests", &[0.0, 1.0], &[10, 20], &[3, 0]).unwrap();
        let sc = Scenario::from_json("{}", Some(table())).unwrap();
        let echo = sc.echo_json();
        assert_eq!(echo["workload"], serde_json::json!({"external": true, "over_context": "warn"}));
        let e = Scenario::from_json(&echo.to_string(), None).unwrap_err();
        assert_eq!(e.path(), "workload.external");
        assert_eq!(Scenario::from_json(&echo.to_string(), Some(table())).unwrap(), sc);
        let both = r#"{"workload": {"external": true, "trace": {"arrival_s": [0], "prompt_tokens": [1], "output_tokens": [1]}}}"#;
        assert_eq!(Scenario::from_json(both, None).unwrap_err().path(), "workload.external");
    }
}

//! `speculative`: checked and resolved once into what the engine needs — γ, the acceptance probabilities
//! per draft position, and the draft's model (a separate draft model, or the target's MTP / EAGLE head).

use serde_json::Value;

use super::spec::{SpeculativeMethod, SpeculativeSpec};
use super::Named;
use crate::cost::model::{LmHead, ModelCost};
use crate::cost::presets::ModelSpec;
use crate::error::{Error, Result};

/// The most draft tokens per step.
pub const MAX_DRAFT_TOKENS: u32 = 16;

/// Resolved speculative decoding.
#[derive(Clone, Debug, PartialEq)]
pub struct Speculative {
    pub method: SpeculativeMethod,
    /// Draft tokens per sequence and step (γ).
    pub gamma: u32,
    /// P(draft position i is accepted | positions before it were), i = 0..γ.
    pub acceptance: Vec<f64>,
    /// The acceptance as given (one number, or the list), for the echo.
    pub acceptance_given: Value,
    /// The draft model (`draft`), or the head the target drafts with (`mtp`, `eagle`: one layer of the
    /// target's shape and its LM head).
    pub draft: Named<ModelSpec>,
    /// Seed of the acceptance draws (the workload's seed).
    pub seed: u64,
}

impl Speculative {
    /// Expected tokens a sequence gets per verify step: Σ_{i=0..γ} Π_{j<i} α_j (= (1 − α^(γ+1)) / (1 − α) for
    /// a constant α).
    pub fn mean_tokens_per_step(&self) -> f64 {
        let (mut sum, mut p) = (1.0, 1.0);
        for &a in &self.acceptance {
            p *= a;
            sum += p;
        }
        sum
    }

    /// The draft's cost model.
    pub fn draft_cost(&self, lm_head: LmHead) -> ModelCost {
        ModelCost::new(&self.draft.spec, lm_head)
    }
}

fn acceptance(v: &Value, gamma: u32) -> Result<Vec<f64>> {
    let path = "speculative.acceptance";
    let one = |x: &Value, at: &str| -> Result<f64> {
        match x.as_f64() {
            Some(a) if (0.0..=1.0).contains(&a) => Ok(a),
            _ => Err(Error::field(at, format!("must be a probability in [0, 1], got {x}"))),
        }
    };
    match v {
        Value::Array(xs) => {
            if xs.len() != gamma as usize {
                return Err(Error::field(
                    path,
                    format!("one probability per draft position: {gamma} (speculative.tokens), got {}", xs.len()),
                ));
            }
            xs.iter().enumerate().map(|(i, x)| one(x, &format!("{path}[{i}]"))).collect()
        }
        x => Ok(vec![one(x, path)?; gamma as usize]),
    }
}

/// The draft head of `target` for `mtp` (one layer as the target's MoE layers, its LM head) or `eagle` (one
/// dense layer of the target's width, its LM head).
fn head_of(target: &Named<ModelSpec>, method: SpeculativeMethod) -> Named<ModelSpec> {
    let mut head = target.spec.clone();
    head.name = format!("{} {} head", target.spec.name, if method == SpeculativeMethod::Mtp { "MTP" } else { "EAGLE" });
    head.layers = 1;
    if method == SpeculativeMethod::Mtp {
        // DeepSeek-V3's MTP module is one MoE layer: no leading dense layer.
        head.dense_layers = 0;
    } else {
        head.n_experts = 0;
        head.top_k = 0;
        head.n_shared_experts = 0;
        head.moe_d_ff = 0;
        head.dense_layers = 0;
    }
    Named { key: "custom".into(), spec: head }
}

/// Check `s` against the target `model`; `resolve_model` resolves and checks a draft model value.
pub(super) fn resolve(
    s: &SpeculativeSpec,
    model: &Named<ModelSpec>,
    seed: u64,
    resolve_model: impl Fn(&Value) -> Result<Named<ModelSpec>>,
) -> Result<Speculative> {
    if s.tokens == 0 || s.tokens > MAX_DRAFT_TOKENS {
        return Err(Error::field(
            "speculative.tokens",
            format!("must be an integer in [1, {MAX_DRAFT_TOKENS}] (draft tokens per step), got {}", s.tokens),
        ));
    }
    let acceptance = acceptance(&s.acceptance, s.tokens)?;
    let draft = match (s.method, &s.draft_model) {
        (SpeculativeMethod::Draft, Some(v)) => resolve_model(v)?,
        (SpeculativeMethod::Draft, None) => {
            return Err(Error::field(
                "speculative.draft_model",
                "required by method \"draft\": a model preset name or inline object (e.g. \"llama3.2-1b\")",
            ))
        }
        (m, Some(_)) => {
            let name = if m == SpeculativeMethod::Mtp { "mtp" } else { "eagle" };
            return Err(Error::field(
                "speculative.draft_model",
                format!("only used by method \"draft\"; \"{name}\" drafts with the target's own head"),
            ));
        }
        (m, None) => head_of(model, m),
    };
    Ok(Speculative {
        method: s.method,
        gamma: s.tokens,
        acceptance,
        acceptance_given: s.acceptance.clone(),
        draft,
        seed,
    })
}

//! The KV capacity of a scenario's pools: the tokens an instance's memory holds beside the weights, which
//! admission, the ceilings and a sessions workload's plan are all judged against. A fact of the resolved
//! scenario (its model, pools, memory share and KV policy), so it lives here, below the ceilings and the engine
//! that read it.

use super::{KvPolicy, Pool, Scenario, Topology};
use crate::cost::model::ModelCost;

impl Scenario {
    /// The cost model of `p`'s instances: the scenario's model, its KV at the pool's format's size.
    pub fn pool_cost(&self, p: &Pool) -> ModelCost {
        p.cost(&ModelCost::new(&self.model.spec, self.lm_head))
    }

    /// KV capacity (tokens) of an instance of `p` with cost model `model` (at least 1: validation refused
    /// pools where nothing fits).
    pub fn kv_capacity_tokens(&self, p: &Pool, model: &ModelCost) -> u64 {
        p.kv_capacity(self.mem_util, model).unwrap_or(1)
    }

    /// KV capacity (tokens) of an instance of the decoding pool: what admission is judged against.
    pub fn decode_capacity(&self) -> u64 {
        let dec_pool = self.decode_pool();
        let cap = self.kv_capacity_tokens(dec_pool, &self.pool_cost(dec_pool));
        match self.kv.policy {
            // Paged KV gives out whole blocks (the engine's `Decoder::new`).
            KvPolicy::Paged => cap / self.kv.block_size as u64 * self.kv.block_size as u64,
            KvPolicy::Reserve => cap,
        }
    }

    /// The longest prompt (tokens) a run serves on account of its prefill instances: with paged KV in a
    /// disaggregated run a prefill instance holds each handed-off prompt's blocks until its hand-off lands, so
    /// a prompt beyond its KV capacity (whole blocks) is rejected at arrival; `u64::MAX` otherwise.
    pub fn prompt_capacity(&self) -> u64 {
        match (&self.topology, self.kv.policy) {
            (Topology::Disaggregated { prefill, .. }, KvPolicy::Paged) => {
                let block = self.kv.block_size as u64;
                self.kv_capacity_tokens(prefill, &self.pool_cost(prefill)) / block * block
            }
            _ => u64::MAX,
        }
    }
}

#[cfg(test)]
mod tests {
    //! The capacities against the pool's own KV capacity recomputed here from the cost model: whole blocks
    //! (rounded down) under paged KV, the pool's capacity under reserve, and no prompt limit unless a
    //! disaggregated prefill pool holds paged blocks.
    use crate::cost::model::ModelCost;
    use crate::scenario::{Pool, Scenario};

    fn scenario(json: &str) -> Scenario {
        Scenario::from_json(json, None).expect("a valid scenario")
    }

    /// The pool's KV capacity in tokens, from the model and the pool's format (not through `pool_cost`).
    fn raw_capacity(sc: &Scenario, p: &Pool) -> u64 {
        let ratio = p.kv_format.map_or(1.0, |f| f.ratio_vs_bf16());
        let model = ModelCost::new(&sc.model.spec, sc.lm_head).with_kv_ratio(ratio);
        p.kv_capacity(sc.mem_util, &model).expect("the model fits")
    }

    #[test]
    fn decode_capacity_is_the_pool_capacity_in_whole_blocks() {
        let reserve = scenario("{}");
        assert_eq!(reserve.decode_capacity(), raw_capacity(&reserve, reserve.decode_pool()));
        for block in [16u64, 7, 1000] {
            let sc = scenario(&format!(r#"{{"kv": {{"policy": "paged", "block_size": {block}}}}}"#));
            let cap = raw_capacity(&sc, sc.decode_pool());
            assert!(cap % block != 0 || block == 16, "block {block}: pick sizes that do not divide {cap}");
            assert_eq!(sc.decode_capacity(), cap - cap % block, "block {block}");
        }
    }

    #[test]
    fn only_a_paged_disaggregated_prefill_pool_limits_prompts() {
        assert_eq!(scenario("{}").prompt_capacity(), u64::MAX);
        assert_eq!(scenario(r#"{"mode": "colocated", "kv": {"policy": "paged"}}"#).prompt_capacity(), u64::MAX);
        for block in [16u64, 7] {
            let sc = scenario(&format!(r#"{{"kv": {{"policy": "paged", "block_size": {block}}}}}"#));
            let cap = raw_capacity(&sc, sc.prefill_pool());
            assert_eq!(sc.prompt_capacity(), cap - cap % block, "block {block}");
            assert!(sc.prompt_capacity() < u64::MAX);
        }
    }
}

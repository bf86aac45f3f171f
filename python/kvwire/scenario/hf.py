"""Any Hugging Face model: a ``config.json`` read into an inline model object.

``model = {"hf_config": "path/to/config.json"}`` in a scenario (a dict, a scenario file, the CLI) is read here
and replaced by the inline model fields before the core sees the scenario; the other keys of the object
override what the file says. A relative path is relative to the scenario file (to the working directory for a
dict); a folder means its ``config.json``. :func:`model_from_hf_config` does the same for a path or for the
parsed ``config.json`` itself, which is how a client of the HTTP service converts a file locally (the service
reads no file a request names).

>>> cfg = {"num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 512,
...        "vocab_size": 1000, "max_position_embeddings": 4096, "_name_or_path": "org/tiny"}
>>> m = model_from_hf_config(cfg)
>>> m["name"], m["layers"], m["kv_heads"], m["head_dim"], m["max_context_tokens"]
('org/tiny', 2, 4, 64, 4096)
>>> resolve_hf_model({"model": {"hf_config": cfg, "name": "mine"}}, None)["model"]["name"]
'mine'
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kvwire.errors import ScenarioError

#: The field of a scenario that names a config.json (and the prefix of every error's path).
WHERE = "model.hf_config"
#: The largest value a model field takes (the core's 32-bit counts).
U32_MAX = 2**32 - 1
#: Architecture names (``architectures`` in config.json) of decoder-only language models.
DECODER_SUFFIXES = ("ForCausalLM", "LMHeadModel", "ForConditionalGeneration")
#: ``layer_types`` entries that are softmax attention over the whole sequence or over a window.
FULL_LAYERS = ("full_attention", "attention", "global_attention")
SLIDING_LAYERS = ("sliding_attention", "local_attention", "chunked_attention")


def _fail(path: str, why: str) -> ScenarioError:
    return ScenarioError(f"{path}: {why}", path)


def _count(cfg: Mapping[str, Any], key: str, at: str, *, low: int = 1, default: int | None = None) -> int | None:
    """``cfg[key]`` as a whole number in [low, 2**32 - 1]; ``default`` when absent or null."""
    value = cfg.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(f"{at}.{key}", f"must be a whole number, got {json.dumps(value)[:60]}")
    if not low <= value <= U32_MAX:
        raise _fail(f"{at}.{key}", f"must be from {low} to {U32_MAX:,}, got {value:,}")
    return value


def _required(cfg: Mapping[str, Any], key: str, at: str, what: str, *, low: int = 1) -> int:
    value = _count(cfg, key, at, low=low)
    if value is None:
        raise _fail(f"{at}.{key}", f"missing: the config.json gives no {what}; add it to the file, or give the inline "
                    "field beside hf_config")  # fmt: skip
    return value


def _read(path: Path) -> dict[str, Any]:
    """The object a config.json holds (errors name ``model.hf_config`` and the file)."""
    if path.is_dir():
        path = path / "config.json"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise _fail(WHERE, f"cannot read {path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise _fail(WHERE, f"{path} is not UTF-8 text (byte {e.start}: {e.reason}); a config.json is JSON") from None
    repeated: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                repeated.append(key)
            out[key] = value
        return out

    try:
        data = json.loads(text, object_pairs_hook=pairs)
    except json.JSONDecodeError as e:
        raise _fail(WHERE, f"{path} is not JSON (line {e.lineno} column {e.colno}: {e.msg})") from None
    except (RecursionError, ValueError) as e:
        raise _fail(WHERE, f"{path} cannot be read as JSON: {type(e).__name__}") from None
    if not isinstance(data, dict):
        raise _fail(WHERE, f"{path} holds {type(data).__name__}, not a JSON object")
    if repeated:  # json.loads would keep the last value silently
        raise _fail(f"{WHERE}.{repeated[0]}", f"{path}: the key appears more than once in the same object")
    return data


def _check_architecture(cfg: Mapping[str, Any], at: str) -> list[str]:
    """Refuse what kvwire cannot model (encoders, encoder-decoders, non-attention layers, sliding-window-only
    attention); the notes of what is approximated."""
    notes: list[str] = []
    if cfg.get("is_encoder_decoder") is True:
        raise _fail(f"{at}.is_encoder_decoder", "an encoder-decoder model; kvwire models decoder-only language models")
    archs = cfg.get("architectures")
    if archs is not None:
        if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
            raise _fail(f"{at}.architectures", f"must be a list of class names, got {json.dumps(archs)[:60]}")
        if archs and not any(a.endswith(DECODER_SUFFIXES) for a in archs):
            raise _fail(
                f"{at}.architectures",
                f"{', '.join(archs)} is not a decoder-only language model (…ForCausalLM); kvwire models those only",
            )
    types = cfg.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
            raise _fail(f"{at}.layer_types", f"must be a list of layer kinds, got {json.dumps(types)[:60]}")
        other = sorted({t for t in types if t not in FULL_LAYERS + SLIDING_LAYERS})
        if other:
            raise _fail(
                f"{at}.layer_types",
                f"layers of kind {', '.join(other)} (not softmax attention); kvwire models attention layers only",
            )
        sliding = sum(t in SLIDING_LAYERS for t in types)
        if types and sliding == len(types):
            raise _fail(f"{at}.layer_types", "every layer is sliding-window attention; kvwire models full attention")
        if sliding:
            notes.append(f"{sliding} of {len(types)} sliding-window layers modelled as full attention")
        return notes
    window = cfg.get("sliding_window")
    longest = cfg.get("max_position_embeddings")
    windowed = isinstance(window, int) and not isinstance(window, bool) and window > 0
    covers = isinstance(longest, int) and isinstance(window, int) and window >= longest
    if windowed and cfg.get("use_sliding_window") is not False and not covers:
        raise _fail(
            f"{at}.sliding_window",
            f"every layer attends over a window of {window:,} tokens (the KV cache is bounded by it); kvwire models "
            "full attention: give the inline fields instead (the mistral-7b preset ignores its window)",
        )
    return notes


def _weights(cfg: Mapping[str, Any], top: Mapping[str, Any], at: str) -> dict[str, Any]:
    """``weights`` (or ``weight_bytes_per_param``) from ``quantization_config`` or ``torch_dtype``."""
    q_at = at if "quantization_config" in cfg else WHERE
    quant = cfg.get("quantization_config", top.get("quantization_config"))
    q_at = f"{q_at}.quantization_config"
    if quant is not None:
        if not isinstance(quant, Mapping):
            raise _fail(q_at, f"must be an object, got {json.dumps(quant)[:60]}")
        method = quant.get("quant_method")
        if not isinstance(method, str):
            raise _fail(f"{q_at}.quant_method", f"must be a string, got {json.dumps(method)[:60]}")
        m = method.lower()
        if m in ("fp8", "fbgemm_fp8"):
            return {"weights": "fp8"}
        if m == "mxfp4":
            return {"weights": "mxfp4"}
        if m in ("awq", "gptq"):
            bits = quant.get("bits", quant.get("w_bit"))
            if bits != 4 or isinstance(bits, bool):
                raise _fail(f"{q_at}.bits", f"{method} with {json.dumps(bits)} bits; kvwire reads 4-bit (int4) only")
            return {"weights": "int4"}
        if m == "modelopt":
            algo = quant.get("quant_algo")
            if isinstance(algo, str) and algo.upper() == "NVFP4":
                return {"weights": "nvfp4"}
            if isinstance(algo, str) and algo.upper() == "FP8":
                return {"weights": "fp8"}
            raise _fail(f"{q_at}.quant_algo", f"modelopt {json.dumps(algo)}; kvwire reads NVFP4 and FP8")
        if m == "compressed-tensors":
            groups = quant.get("config_groups")
            found = set()
            if isinstance(groups, Mapping):
                for g in groups.values():
                    w = g.get("weights") if isinstance(g, Mapping) else None
                    if isinstance(w, Mapping):
                        found.add((w.get("num_bits"), w.get("type")))
            if found == {(4, "int")}:
                return {"weights": "int4"}
            if found == {(8, "float")}:
                return {"weights": "fp8"}
            raise _fail(f"{q_at}.config_groups", "compressed-tensors weights other than one 4-bit int or 8-bit float "
                        "scheme; give model.weights beside hf_config")  # fmt: skip
        raise _fail(
            f"{q_at}.quant_method",
            f"{method!r} is not a method kvwire reads (fp8, mxfp4, awq/gptq 4-bit, modelopt NVFP4/FP8, "
            "compressed-tensors); give model.weights beside hf_config",
        )
    for key in ("torch_dtype", "dtype"):
        if key in cfg and cfg[key] is not None:
            dtype = cfg[key]
            if dtype in ("bfloat16", "float16"):
                return {}
            if dtype == "float32":
                return {"weight_bytes_per_param": 4.0}
            raise _fail(f"{at}.{key}", f"{json.dumps(dtype)[:40]} is not bfloat16, float16 or float32")
    return {}


def _moe(cfg: Mapping[str, Any], at: str, layers: int) -> dict[str, Any]:
    """The MoE fields (empty for a dense model)."""
    key = next((k for k in ("n_routed_experts", "num_local_experts", "num_experts") if cfg.get(k) is not None), None)
    experts = _count(cfg, key, at, low=0) if key else None
    if not experts:
        return {}
    if "num_experts_per_tok" in cfg or "experts_per_token" not in cfg:
        top_k = _required(cfg, "num_experts_per_tok", at, "experts per token")
    else:
        top_k = _required(cfg, "experts_per_token", at, "experts per token")
    if top_k > experts:
        raise _fail(f"{at}.num_experts_per_tok", f"{top_k} experts per token of {experts}")
    moe_ff_key = "moe_intermediate_size" if cfg.get("moe_intermediate_size") is not None else "intermediate_size"
    moe_d_ff = _required(cfg, moe_ff_key, at, "expert size (moe_intermediate_size)")
    shared = _count(cfg, "n_shared_experts", at, low=0, default=None)
    if shared is None:
        shared = _count(cfg, "num_shared_experts", at, low=0, default=0) or 0
    shared_ff = _count(cfg, "shared_expert_intermediate_size", at, low=0, default=0) or 0
    if shared_ff:  # Qwen2-MoE: one shared expert of its own size, as a whole number of routed-size experts
        if shared_ff % moe_d_ff:
            raise _fail(
                f"{at}.shared_expert_intermediate_size",
                f"{shared_ff:,} is not a multiple of the expert size {moe_d_ff:,}; kvwire's shared experts have "
                "the routed experts' size",
            )
        shared = shared_ff // moe_d_ff
    # Which layers are dense: DeepSeek's leading first_k_dense_replace, or Qwen's decoder_sparse_step and
    # mlp_only_layers; kvwire models dense layers as the leading ones only.
    dense: set[int] = set(range(_count(cfg, "first_k_dense_replace", at, low=0, default=0) or 0))
    step = _count(cfg, "decoder_sparse_step", at, default=1) or 1
    only = cfg.get("mlp_only_layers")
    if only is not None and (
        not isinstance(only, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in only)
    ):
        raise _fail(f"{at}.mlp_only_layers", f"must be a list of layer indices, got {json.dumps(only)[:60]}")
    dense |= {i for i in range(layers) if (i + 1) % step != 0 or i in (only or [])}
    for k in ("moe_layer_freq", "interleave_moe_layer_step"):
        freq = cfg.get(k)
        if freq is not None and freq != 1:
            raise _fail(f"{at}.{k}", f"MoE every {json.dumps(freq)[:20]} layers; kvwire models leading dense layers "
                        "then MoE layers only")  # fmt: skip
    n_dense = len(dense)
    if dense != set(range(n_dense)):
        k = "mlp_only_layers" if only else "decoder_sparse_step"
        raise _fail(
            f"{at}.{k}",
            f"dense layers {sorted(dense)[:8]}… are not the leading ones; kvwire models leading dense layers then "
            "MoE layers only",
        )
    out: dict[str, Any] = {"n_experts": experts, "top_k": top_k, "n_shared_experts": shared, "moe_d_ff": moe_d_ff}
    if n_dense:
        out["dense_layers"] = n_dense
    return out


def model_from_hf_config(
    config: str | os.PathLike[str] | Mapping[str, Any], base: Path | None = None
) -> dict[str, Any]:
    """The inline model object (the fields of ``{"model": {...}}``) for a Hugging Face ``config.json``: a path
    (a folder means its ``config.json``; relative to ``base``, else the working directory) or the parsed object.

    Reads ``num_hidden_layers``, ``hidden_size``, ``num_attention_heads``, ``num_key_value_heads`` (default: the
    heads), ``head_dim`` (default: hidden / heads; an MLA model's ``v_head_dim``), ``intermediate_size``,
    ``vocab_size``, ``max_position_embeddings``; MoE (``n_routed_experts`` / ``num_local_experts`` /
    ``num_experts``, ``num_experts_per_tok``, ``n_shared_experts``, ``moe_intermediate_size``,
    ``first_k_dense_replace``, Qwen's ``decoder_sparse_step`` and ``mlp_only_layers``); MLA (``kv_lora_rank``,
    ``qk_rope_head_dim``, ``qk_nope_head_dim``, ``v_head_dim``, ``q_lora_rank``); ``quantization_config`` (→
    ``weights``) or ``torch_dtype``; a ``text_config`` nested in a multimodal config.

    >>> model_from_hf_config({"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
    ...     "intermediate_size": 128, "vocab_size": 100, "quantization_config": {"quant_method": "fp8"}})["weights"]
    'fp8'

    Raises:
        ScenarioError: the file cannot be read or is not a JSON object, a required field is missing or of the
            wrong type, or the model is one kvwire cannot model; ``path`` is ``model.hf_config`` and the
            config's key (``model.hf_config.num_attention_heads``).
    """
    where = "a Hugging Face config.json given as an object"
    folder = None
    if isinstance(config, str | os.PathLike):
        path = Path(config)
        if not path.is_absolute():
            path = (base or Path.cwd()) / path
        data = _read(path)
        file = path / "config.json" if path.is_dir() else path
        where, folder = f"Hugging Face config.json {file}", file.parent.name
    elif isinstance(config, Mapping):
        data = dict(config)
    else:
        raise _fail(WHERE, f"expected the path of a config.json (or its object), got {type(config).__name__}")
    at = WHERE
    cfg: Mapping[str, Any] = data
    text = data.get("text_config")
    if isinstance(text, Mapping) and "num_hidden_layers" not in data:
        cfg, at = text, f"{WHERE}.text_config"
    notes = _check_architecture(cfg, at)
    layers = _required(cfg, "num_hidden_layers", at, "layer count (num_hidden_layers)")
    d_model = _required(cfg, "hidden_size", at, "hidden size (hidden_size)")
    heads = _required(cfg, "num_attention_heads", at, "attention heads (num_attention_heads)")
    kv_heads = _count(cfg, "num_key_value_heads", at, default=heads) or heads
    if heads % kv_heads:
        raise _fail(f"{at}.num_key_value_heads", f"{kv_heads} key/value heads do not divide {heads} attention heads")
    out: dict[str, Any] = {}
    name = data.get("_name_or_path")
    out["name"] = name if isinstance(name, str) and name else folder or str(data.get("model_type") or "hf-model")
    out |= {"layers": layers, "d_model": d_model, "heads": heads, "kv_heads": kv_heads}
    mla = cfg.get("kv_lora_rank") is not None
    head_dim = _count(cfg, "head_dim", at)
    if mla:
        out["attention"] = "mla"
        out["kv_lora_rank"] = _required(cfg, "kv_lora_rank", at, "latent rank")
        out["qk_rope_dim"] = _required(cfg, "qk_rope_head_dim", at, "RoPE part of the key (qk_rope_head_dim)")
        out["qk_nope_dim"] = _required(cfg, "qk_nope_head_dim", at, "non-RoPE head part (qk_nope_head_dim)")
        out["v_head_dim"] = _required(cfg, "v_head_dim", at, "value head dimension (v_head_dim)")
        out["q_lora_rank"] = _count(cfg, "q_lora_rank", at, low=0, default=0)
        head_dim = head_dim or out["v_head_dim"]
    if head_dim is None:
        if d_model % heads:
            raise _fail(f"{at}.head_dim", f"missing, and hidden_size {d_model:,} is not a multiple of {heads} heads")
        head_dim = d_model // heads
    out["head_dim"] = head_dim
    moe = _moe(cfg, at, layers)
    if cfg.get("intermediate_size") is None and moe and not moe.get("dense_layers"):
        out["d_ff"] = moe["moe_d_ff"]  # every layer is MoE: no dense MLP to size
    else:
        out["d_ff"] = _required(cfg, "intermediate_size", at, "MLP size (intermediate_size)")
    out["vocab"] = _required(cfg, "vocab_size", at, "vocabulary size (vocab_size)")
    out |= moe
    out |= _weights(cfg, data, at)
    longest = _count(cfg, "max_position_embeddings", at)
    if longest is not None:
        out["max_context_tokens"] = longest
    if cfg.get("num_nextn_predict_layers"):
        notes.append("multi-token-prediction layers not counted")
    out["source"] = where + "".join(f"; {n}" for n in notes)
    return out


def resolve_hf_model(scenario: Mapping[str, Any], base: Path | None) -> Mapping[str, Any]:
    """``scenario`` with a ``model.hf_config`` replaced by the inline model it reads (the model object's other
    keys override the file's), or ``scenario`` itself when it has none. A relative path is relative to ``base``
    (the scenario file's folder), else the working directory.

    >>> resolve_hf_model({"model": "llama3-8b"}, None)
    {'model': 'llama3-8b'}

    Raises:
        ScenarioError: as :func:`model_from_hf_config`, and ``model.preset`` given beside ``hf_config``.
    """
    model = scenario.get("model")
    if not isinstance(model, Mapping) or "hf_config" not in model:
        return scenario
    if "preset" in model:
        raise _fail("model.preset", "give either a preset or model.hf_config, not both")
    spec = model["hf_config"]
    if not isinstance(spec, str | Mapping) or (isinstance(spec, str) and not spec):
        raise _fail(WHERE, f"expected the path of a config.json (or its object), got {json.dumps(spec)[:60]}")
    resolved = model_from_hf_config(spec, base)
    resolved |= {k: v for k, v in model.items() if k != "hf_config"}
    return {**scenario, "model": resolved}


__all__ = ["WHERE", "model_from_hf_config", "resolve_hf_model"]

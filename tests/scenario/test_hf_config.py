"""Any Hugging Face model (issue 24 item 4): ``model = {"hf_config": "path/to/config.json"}`` reads the public
``config.json`` into the inline model before the core sees the scenario.

The main check: the committed ``config.json`` of a model kvwire has a preset for (``tests/data/hf/``, the values
the Hugging Face repository publishes) gives the same model as the preset, field for field, as the run's echo
shows them. The presets are typed into ``presets.rs`` from the same public configs, so the two sides are
independent transcriptions. The new presets (Llama-3.1, Qwen3, DeepSeek-R1, Kimi-K2, gpt-oss) need the core
rebuilt after ``presets.rs`` changed. Then the hostile cases: each refusal is a ``ScenarioError`` whose path
names ``model.hf_config`` and the config's key."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import kvwire
import pytest
from click.testing import CliRunner
from kvwire.cli import main
from kvwire.scenario.hf import model_from_hf_config

HF = Path(__file__).resolve().parent.parent / "data" / "hf"

#: fixture folder -> (preset key, the weight format its config.json's quantization_config names).
PRESETS = {
    "meta-llama-3-8b": ("llama3-8b", None),
    "mixtral-8x7b": ("mixtral-8x7b", None),
    "deepseek-v3": ("deepseek-v3", "fp8"),
    "qwen3-235b-a22b": ("qwen3-235b-a22b", None),
    "llama3.1-8b": ("llama3.1-8b", None),
    "llama3.1-70b": ("llama3.1-70b", None),
    "llama3.1-405b": ("llama3.1-405b", None),
    "qwen3-32b": ("qwen3-32b", None),
    "deepseek-r1": ("deepseek-r1", "fp8"),
    "kimi-k2": ("kimi-k2", "fp8"),
    "gpt-oss-120b": ("gpt-oss-120b", "mxfp4"),
}
#: Every field of the model that the cost model reads (all but the display name and the source).
COST_FIELDS = (
    "layers", "d_model", "heads", "kv_heads", "head_dim", "d_ff", "vocab", "attention", "kv_lora_rank",
    "qk_rope_dim", "qk_nope_dim", "v_head_dim", "q_lora_rank", "n_experts", "top_k", "n_shared_experts",
    "moe_d_ff", "dense_layers", "weight_bytes_per_param", "kv_bytes_per_value", "max_context_tokens",
)  # fmt: skip
#: Pools large enough for the largest of them (Llama-3.1-405B in BF16, Kimi-K2 in FP8).
BIG = {"device": "b200", "devices_per_instance": 8}
TINY = {"num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 512,
        "vocab_size": 1000}  # fmt: skip
#: A 4-layer MoE model of 4 experts, top-2.
MOE4 = {**TINY, "num_hidden_layers": 4, "num_experts": 4, "num_experts_per_tok": 2}


def echo_model(model: Any) -> dict[str, Any]:
    """The model as the core resolved it (the echo of a two-request run)."""
    sc = {"model": model, "prefill": BIG, "decode": BIG, "workload": {"requests": 2}}
    out: dict[str, Any] = kvwire.simulate(sc).scenario["model"]
    return out


def refused(model: Any) -> kvwire.ScenarioError:
    with pytest.raises(kvwire.ScenarioError) as e:
        kvwire.validate({"model": model})
    return e.value


def write(tmp_path: Path, cfg: Any, name: str = "config.json") -> Path:
    p = tmp_path / name
    p.write_text(cfg if isinstance(cfg, str) else json.dumps(cfg), encoding="utf-8")
    return p


@pytest.mark.parametrize("folder", list(PRESETS))
def test_an_hf_config_of_a_preset_gives_the_preset(folder: str) -> None:
    """The public config.json of a preset's model resolves to the preset's every cost field (the echo of a run
    with each); its quantization_config names the weight format the preset's bytes per weight say."""
    key, weights = PRESETS[folder]
    got = echo_model({"hf_config": str(HF / folder / "config.json")})
    want = echo_model(key)
    assert {f: got.get(f) for f in COST_FIELDS} == {f: want.get(f) for f in COST_FIELDS}
    assert got.get("weights") == weights
    # deepseek-v3 (an older preset) gives its FP8 weights as 1 byte without naming the format: the same cost
    # with BF16 activations (the matmuls run in the wider format, docs/concepts/formats.md).
    assert want.get("weights") in (weights, None)
    assert got["source"].startswith("Hugging Face config.json ") and folder in got["source"]
    assert got["name"] == folder  # no _name_or_path in the file: its folder's name


def test_a_relative_path_in_a_scenario_file_is_relative_to_the_file(tmp_path: Path, monkeypatch: Any) -> None:
    """A scenario file's relative hf_config is found next to the file whatever the working directory; a dict's is
    relative to the working directory; a folder means its config.json."""
    shutil.copytree(HF / "meta-llama-3-8b", tmp_path / "models" / "l3")
    sc = tmp_path / "sc.json"
    sc.write_text(json.dumps({"model": {"hf_config": "models/l3/config.json"}, "workload": {"requests": 3}}))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    kvwire.validate(sc)
    assert kvwire.simulate(sc).scenario["model"]["layers"] == 32
    assert kvwire.load_scenario(sc)["model"]["d_model"] == 4096
    e = refused({"hf_config": "models/l3/config.json"})  # a dict: relative to the working directory
    assert e.path == "model.hf_config" and "cannot read" in str(e)
    monkeypatch.chdir(tmp_path)
    assert (
        kvwire.simulate({"model": {"hf_config": "models/l3"}, "workload": {"requests": 3}}).scenario["model"]["vocab"]
        == 128256
    )


def test_the_cli_reads_hf_config_from_a_file_and_from_set(tmp_path: Path, monkeypatch: Any) -> None:
    """``kvwire run scenario.json`` and ``--set model.hf_config=PATH`` read the config.json."""
    shutil.copy(HF / "mixtral-8x7b" / "config.json", tmp_path / "mixtral.json")
    (tmp_path / "sc.json").write_text(json.dumps({"model": {"hf_config": "mixtral.json"}}))
    monkeypatch.chdir(tmp_path.parent)
    runner = CliRunner()
    args = ["run", str(tmp_path / "sc.json"), "--set", "workload.requests=3", "--set", "prefill.devices_per_instance=2"]
    r = runner.invoke(main, [*args, "--set", "decode.devices_per_instance=2", "--json"])
    assert r.exit_code == 0, r.output
    model = json.loads(r.output)["scenario"]["model"]
    assert (model["n_experts"], model["top_k"], model["name"]) == (8, 2, tmp_path.name)
    r = runner.invoke(main, ["run", "--set", f"model.hf_config={tmp_path / 'nowhere.json'}"])
    assert r.exit_code != 0 and "model.hf_config" in r.output and "cannot read" in r.output


def test_other_keys_override_the_file() -> None:
    """Keys beside hf_config win over the file's values; the name defaults to _name_or_path."""
    m = echo_model({"hf_config": {**TINY, "_name_or_path": "org/tiny"}, "kv_bytes_per_value": 1, "layers": 3})
    assert (m["name"], m["kv_bytes_per_value"], m["layers"], m["d_model"]) == ("org/tiny", 1.0, 3, 256)
    assert echo_model({"hf_config": TINY, "name": "mine"})["name"] == "mine"


def test_nested_text_config_and_quantisation_methods() -> None:
    """A multimodal config's text_config is read; each quantization method maps to its weight format."""
    m = model_from_hf_config({"architectures": ["FooForConditionalGeneration"], "text_config": TINY})
    assert (m["layers"], m["d_model"], m["head_dim"]) == (2, 256, 64)
    for quant, weights in [
        ({"quant_method": "fp8"}, "fp8"),
        ({"quant_method": "mxfp4"}, "mxfp4"),
        ({"quant_method": "awq", "bits": 4}, "int4"),
        ({"quant_method": "gptq", "bits": 4}, "int4"),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "nvfp4"),
    ]:
        assert model_from_hf_config({**TINY, "quantization_config": quant})["weights"] == weights
    assert model_from_hf_config({**TINY, "torch_dtype": "float32"})["weight_bytes_per_param"] == 4.0
    assert "weights" not in model_from_hf_config({**TINY, "torch_dtype": "bfloat16"})


def test_qwen_layer_pattern_and_shared_expert() -> None:
    """Qwen's mlp_only_layers at the front are dense layers; Qwen2-MoE's shared expert of 4 expert sizes is 4
    shared experts."""
    moe = {**TINY, "num_hidden_layers": 4, "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 64}
    assert model_from_hf_config({**moe, "mlp_only_layers": [0, 1]})["dense_layers"] == 2
    assert model_from_hf_config({**moe, "shared_expert_intermediate_size": 256})["n_shared_experts"] == 4


@pytest.mark.parametrize(
    ("cfg", "path"),
    [
        ({**TINY, "num_attention_heads": "4"}, "num_attention_heads"),
        ({**TINY, "num_hidden_layers": 2.0}, "num_hidden_layers"),
        ({**TINY, "vocab_size": True}, "vocab_size"),
        ({**TINY, "hidden_size": 0}, "hidden_size"),
        ({**TINY, "hidden_size": 2**40}, "hidden_size"),
        ({k: v for k, v in TINY.items() if k != "num_hidden_layers"}, "num_hidden_layers"),
        ({k: v for k, v in TINY.items() if k != "vocab_size"}, "vocab_size"),
        ({**TINY, "num_key_value_heads": 3}, "num_key_value_heads"),
        ({**TINY, "hidden_size": 250}, "head_dim"),
        ({**TINY, "quantization_config": {"quant_method": "bitsandbytes"}}, "quantization_config.quant_method"),
        ({**TINY, "quantization_config": {"quant_method": "gptq", "bits": 8}}, "quantization_config.bits"),
        ({**TINY, "quantization_config": "fp8"}, "quantization_config"),
        ({**TINY, "torch_dtype": "int8"}, "torch_dtype"),
        ({**TINY, "is_encoder_decoder": True}, "is_encoder_decoder"),
        ({**TINY, "architectures": ["BertModel"]}, "architectures"),
        ({**TINY, "layer_types": ["sliding_attention"] * 2}, "layer_types"),
        ({**TINY, "layer_types": ["linear_attention", "full_attention"]}, "layer_types"),
        ({**TINY, "sliding_window": 4096, "max_position_embeddings": 32768}, "sliding_window"),
        ({**TINY, "num_experts": 4, "moe_intermediate_size": 64}, "num_experts_per_tok"),
        ({**MOE4, "decoder_sparse_step": 2}, "decoder_sparse_step"),
        ({**TINY, "num_experts": 4, "num_experts_per_tok": 2, "mlp_only_layers": [1]}, "mlp_only_layers"),
        ({"text_config": {**TINY, "hidden_size": "x"}}, "text_config.hidden_size"),
    ],
)  # fmt: skip
def test_what_it_cannot_read_is_refused_naming_the_config_key(cfg: dict[str, Any], path: str, tmp_path: Path) -> None:
    """A wrong type, a missing field, an unknown quantization or an architecture kvwire cannot model is a
    ScenarioError naming model.hf_config and the key; as a file and as the object alike."""
    path = f"model.hf_config.{path}"
    assert refused({"hf_config": cfg}).path == path
    e = refused({"hf_config": str(write(tmp_path, cfg))})
    assert e.path == path and str(e).startswith(path)


def test_hostile_files(tmp_path: Path) -> None:
    """A missing file, a file that is not JSON, not UTF-8, not an object, or that repeats a key; a hf_config
    that is not a path; a preset beside it."""
    for bad in [str(tmp_path / "missing.json"), str(write(tmp_path, "{not json")), str(write(tmp_path, "[1, 2]"))]:
        e = refused({"hf_config": bad})
        assert e.path == "model.hf_config" and bad in str(e)
    (tmp_path / "utf16.json").write_bytes("{}".encode("utf-16"))
    assert refused({"hf_config": str(tmp_path / "utf16.json")}).path == "model.hf_config"
    dup = write(tmp_path, '{"hidden_size": 1, "hidden_size": 2}', "dup.json")
    assert refused({"hf_config": str(dup)}).path == "model.hf_config.hidden_size"
    assert refused({"hf_config": 3}).path == "model.hf_config"
    assert refused({"hf_config": ""}).path == "model.hf_config"
    assert refused({"hf_config": TINY, "preset": "llama3-8b"}).path == "model.preset"
    assert not list(tmp_path.glob("*.tmp"))  # nothing written beside the files

"""``benches/measured/measure_steps.py`` (issue 25 item 5): the step-time measurement that writes kvwire's
calibration CSV.

Two kinds of tests. The pure helpers (the list parser, the config reader, the CSV writer, the memory estimate,
the command line's errors) are imported from the script as a module and need no PyTorch. The runs of the script
itself (on the CPU, with ``--tiny``, as a subprocess, as a user runs it) and the check of the decoder's KV cache
need PyTorch, and skip, saying so, only where it is not installed; ``.ci/run`` installs it and sets
``KVWIRE_REQUIRE_TORCH=1``, so on CI a missing PyTorch fails them instead.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import kvwire
import pytest
from shared_paths import ROOT

SCRIPT = ROOT / "benches" / "measured" / "measure_steps.py"
HF = ROOT / "tests" / "data" / "hf"
NO_TORCH = "PyTorch is not installed (pip install 'torch>=2.3', or kvwire's extra '.[measure]')"


def need_torch() -> Any:
    """``torch``, or a skip saying it is not installed; a failure instead where ``KVWIRE_REQUIRE_TORCH=1`` (CI)."""
    if os.environ.get("KVWIRE_REQUIRE_TORCH") == "1":
        try:
            import torch
        except ImportError as err:
            pytest.fail(f"{NO_TORCH}, and KVWIRE_REQUIRE_TORCH=1 requires it: {err}")
        return torch
    return pytest.importorskip("torch", reason=NO_TORCH)


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("measure_steps", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


ms = _load_script()


def read_csv(text: str) -> tuple[dict[str, list[str]], list[str], list[dict[str, str]]]:
    """The comment lines (key -> values, in order), the header and the rows of a calibration CSV, read as
    kvwire's reader is told to: skip the lines that start with ``#``. Comments must all come first."""
    comments: dict[str, list[str]] = {}
    lines = text.splitlines()
    n = 0
    while n < len(lines) and lines[n].startswith("#"):
        key, sep, value = lines[n][1:].strip().partition(": ")
        assert sep, f"comment line {lines[n]!r} is not '# key: value'"
        comments.setdefault(key, []).append(value)
        n += 1
    assert not any(line.startswith("#") for line in lines[n:]), "a comment line after the header"
    reader = csv.reader(lines[n:])
    header = next(reader)
    rows = [dict(zip(header, values, strict=True)) for values in reader]
    return comments, header, rows


def run_script(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False, cwd=cwd, timeout=600
    )


# --------------------------------------------------------------------------------------------------
# Pure helpers (no PyTorch)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("128", [128]), ("128,512,2048", [128, 512, 2048]), (" 16 , 1024 ", [16, 1024]), ("8192,1", [8192, 1])],
)
def test_list_parser_reads_positive_lists_in_order(text: str, expected: list[int]) -> None:
    """A comma-separated list of positive whole numbers is read as given (spaces allowed, order kept)."""
    assert ms.parse_positive_int_list(text) == expected


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "empty item"),
        ("128,", "empty item"),
        ("128,,512", "empty item"),
        ("128,abc", "'abc' is not a whole number"),
        ("1.5", "'1.5' is not a whole number"),
        ("-4", "'-4' is not a whole number"),
        ("0,8", "0 is not positive"),
        ("8,8", "lists 8 twice"),
    ],
)
def test_list_parser_refuses_bad_lists(text: str, words: str) -> None:
    """Each kind of bad list is refused with a message that says what is wrong with it."""
    with pytest.raises(ms.argparse.ArgumentTypeError, match=words):
        ms.parse_positive_int_list(text)


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--prompt-tokens", "128,x"], "--prompt-tokens"),
        (["--decode-batch", "0"], "--decode-batch"),
        (["--decode-context", "512,-1"], "--decode-context"),
        (["--prefill-batch", ""], "--prefill-batch"),
        (["--repeats", "0"], "--repeats"),
        (["--warmup", "-1"], "--warmup"),
        (["--max-step-gib", "0"], "--max-step-gib"),
        (["--max-step-gib", "inf"], "--max-step-gib"),
        (["--device", "tpu"], "--device"),
        (["--tiny", "--config", "x.json"], "--config"),
        (["--config", "no/such/config.json"], "--config no/such/config.json: cannot read it"),
        (["--tiny", "--model-name", " "], "--model-name"),
    ],
)
def test_command_line_errors_name_the_flag(argv: list[str], flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A bad value is an argparse error (exit 2) whose message names the flag, before any PyTorch work."""
    with pytest.raises(SystemExit) as exit_info:
        ms.main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert flag in err, err


def test_config_errors_name_the_file_and_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Invalid JSON, a missing key and a mixture-of-experts config are refused naming the file and the reason."""
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    missing = tmp_path / "missing.json"
    missing.write_text(json.dumps({"hidden_size": 64, "num_attention_heads": 4}), encoding="utf-8")
    cases = [
        (bad, "not valid JSON"),
        (missing, "missing num_hidden_layers"),
        (HF / "mixtral-8x7b" / "config.json", "a mixture-of-experts config (num_local_experts = 8)"),
        (HF / "deepseek-v3" / "config.json", "this script times dense decoders only"),
    ]
    for path, words in cases:
        with pytest.raises(SystemExit):
            ms.main(["--config", str(path)])
        err = capsys.readouterr().err
        assert f"--config {path}: " in err and words in err, err


def test_the_default_config_is_llama_3_1_8b() -> None:
    """The built-in default equals the committed Hugging Face config.json of meta-llama/Llama-3.1-8B read by the
    script, and kvwire's ``llama3.1-8b`` preset (an independent transcription) in every dimension; the weight
    count is the published 8,030,261,248, and K/V per token are the preset's bytes."""
    default = ms.ModelConfig.from_hf(ms.LLAMA_3_1_8B)
    from_file, name = ms.load_config(HF / "llama3.1-8b" / "config.json")
    assert from_file == default
    assert name == "llama3.1-8b" == ms.DEFAULT_MODEL_NAME
    preset = kvwire.presets.catalog()["models"]["llama3.1-8b"]
    assert (default.layers, default.hidden, default.heads, default.kv_heads) == (
        preset["layers"],
        preset["d_model"],
        preset["heads"],
        preset["kv_heads"],
    )
    assert (default.head_dim, default.intermediate, default.vocab) == (
        preset["head_dim"],
        preset["d_ff"],
        preset["vocab"],
    )
    assert default.parameters() == 8_030_261_248
    assert default.kv_bytes_per_token(2) == preset["kv_bytes_per_token"] == 131072


def test_head_dim_is_read_when_given() -> None:
    """Qwen3-32B's config gives ``head_dim`` 128, not hidden_size / heads = 80: the script takes the config's."""
    cfg, name = ms.load_config(HF / "qwen3-32b" / "config.json")
    assert (cfg.hidden, cfg.heads, cfg.head_dim, cfg.kv_heads) == (5120, 64, 128, 8)
    assert name == "qwen3-32b"


def _row(**changes: Any) -> Any:
    fields: dict[str, Any] = {
        "phase": "decode",
        "model": "m",
        "tp": 1,
        "batch": 8,
        "prompt_tokens": 0,
        "context_tokens": 512,
        "time_s": 0.0123,
    }
    return ms.Row(**{**fields, **changes})


def test_csv_writer_writes_comments_header_and_rows() -> None:
    """The writer puts ``# key: value`` lines first (a value's newlines folded to one line), then the header
    ``phase,model,tp,batch,prompt_tokens,context_tokens,time_s`` and one line per row, in order."""
    rows = [_row(phase="prefill", batch=1, prompt_tokens=128, context_tokens=0, time_s=0.5), _row()]
    out = io.StringIO()
    ms.write_calibration_csv(out, rows, [("device", "NVIDIA H200"), ("note", "two\nlines")])
    assert out.getvalue() == (
        "# device: NVIDIA H200\n"
        "# note: two lines\n"
        "phase,model,tp,batch,prompt_tokens,context_tokens,time_s\n"
        "prefill,m,1,1,128,0,0.5\n"
        "decode,m,1,8,0,512,0.0123\n"
    )
    comments, header, parsed = read_csv(out.getvalue())
    assert comments == {"device": ["NVIDIA H200"], "note": ["two lines"]}
    assert tuple(header) == ms.HEADER
    assert [r["phase"] for r in parsed] == ["prefill", "decode"]


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"phase": "verify"}, "phase must be one of"),
        ({"time_s": 0.0}, "positive and finite"),
        ({"time_s": math.nan}, "positive and finite"),
        ({"time_s": math.inf}, "positive and finite"),
        ({"batch": 0}, "tp and batch at least 1"),
        ({"model": ""}, "model must be named"),
        ({"prompt_tokens": 3}, "a decode row has prompt_tokens = 0"),
        ({"phase": "prefill", "prompt_tokens": 0}, "a prefill row needs prompt_tokens >= 1"),
    ],
)
def test_csv_writer_refuses_rows_that_break_the_contract(changes: dict[str, Any], words: str) -> None:
    """No file is written with a row the reader could misread (nothing is written at all)."""
    out = io.StringIO()
    with pytest.raises(ValueError, match=words):
        ms.write_calibration_csv(out, [_row(**changes)], [("device", "x")])
    assert out.getvalue() == ""


def test_csv_writer_refuses_a_comment_key_that_is_not_a_word() -> None:
    """Comment keys are lower-case words, so ``# key: value`` always splits at the first ``: ``."""
    with pytest.raises(ValueError, match="lower-case word"):
        ms.write_calibration_csv(io.StringIO(), [], [("bad key:", "x")])


def test_memory_estimate_is_the_kv_cache_and_more() -> None:
    """A decode step's estimate is at least its KV cache (context + the new token), and the default grid's
    largest decode (128 x 8192 of Llama-3.1-8B, 128 GiB of KV) is over an H100's 80 GiB, so it is skipped there."""
    cfg = ms.ModelConfig.from_hf(ms.LLAMA_3_1_8B)
    big = ms.Shape("decode", 128, 0, 8192)
    kv = 128 * 8193 * cfg.kv_bytes_per_token(2)
    need = ms.estimate_step_bytes(cfg, big, 2)
    assert kv <= need <= 1.05 * kv
    assert need > 80 * ms.GIB
    small = ms.estimate_step_bytes(cfg, ms.Shape("decode", 1, 0, 512), 2)
    assert 513 * cfg.kv_bytes_per_token(2) <= small < ms.GIB


def test_grid_is_prefill_then_decode_in_flag_order() -> None:
    """Every prefill (batch x prompt) shape, then every decode (batch x context) shape."""
    shapes = ms.grid([16, 8], [1], [2, 1], [64])
    assert [(s.phase, s.batch, s.prompt_tokens, s.context_tokens) for s in shapes] == [
        ("prefill", 1, 16, 0),
        ("prefill", 1, 8, 0),
        ("decode", 2, 0, 64),
        ("decode", 1, 0, 64),
    ]


# --------------------------------------------------------------------------------------------------
# The script on the CPU (PyTorch)

PROMPTS = (16, 1024)
DECODE_BATCH = (1, 4)
DECODE_CONTEXT = (16, 256)
METADATA = (
    "format",
    "script",
    "script_version",
    "date",
    "device",
    "device_memory_gib",
    "driver",
    "cuda",
    "torch",
    "python",
    "host",
    "model",
    "config",
    "dtype",
    "tp",
    "timer",
    "cuda_graph",
    "repeats",
    "warmup",
    "statistic",
    "seed",
    "attention",
    "run_s",
)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, list[str]], list[str], list[dict[str, str]]]:
    """One CPU run of the script with ``--tiny`` over a small grid, as a user runs it (a subprocess)."""
    torch = need_torch()
    out = tmp_path_factory.mktemp("measure") / "steps.csv"
    r = run_script(
        "--tiny",
        "--device",
        "cpu",
        "--threads",
        "1",
        "--prompt-tokens",
        ",".join(map(str, PROMPTS)),
        "--decode-batch",
        ",".join(map(str, DECODE_BATCH)),
        "--decode-context",
        ",".join(map(str, DECODE_CONTEXT)),
        "--repeats",
        "5",
        "--warmup",
        "2",
        "-o",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    assert f"wrote {len(PROMPTS) + len(DECODE_BATCH) * len(DECODE_CONTEXT)} rows" in r.stderr
    comments, header, rows = read_csv(out.read_text(encoding="utf-8"))
    assert comments["torch"] == [str(torch.__version__)]
    return comments, header, rows


def test_tiny_run_writes_the_header_and_one_row_per_shape(
    tiny_run: tuple[dict[str, list[str]], list[str], list[dict[str, str]]],
) -> None:
    """The CSV has the contract's header and exactly one row per requested shape, with the contract's columns:
    prefill rows carry the prompt and no context, decode rows no prompt and the context, TP 1, the tiny model."""
    _, header, rows = tiny_run
    assert tuple(header) == ("phase", "model", "tp", "batch", "prompt_tokens", "context_tokens", "time_s")
    shapes = [(r["phase"], int(r["batch"]), int(r["prompt_tokens"]), int(r["context_tokens"])) for r in rows]
    expected = [("prefill", 1, p, 0) for p in PROMPTS]
    expected += [("decode", b, 0, c) for b in DECODE_BATCH for c in DECODE_CONTEXT]
    assert shapes == expected
    assert {r["model"] for r in rows} == {"tiny-llama"}
    assert {r["tp"] for r in rows} == {"1"}


def test_tiny_run_times_are_positive_and_finite(
    tiny_run: tuple[dict[str, list[str]], list[str], list[dict[str, str]]],
) -> None:
    """Every ``time_s`` is a positive, finite number of seconds (a step on the CPU takes well under a minute)."""
    _, _, rows = tiny_run
    for r in rows:
        t = float(r["time_s"])
        assert math.isfinite(t) and 0 < t < 60, r


def test_tiny_run_records_its_metadata(
    tiny_run: tuple[dict[str, list[str]], list[str], list[dict[str, str]]],
) -> None:
    """The comment lines at the top name the device, driver, CUDA, torch, date, script version, repeats, warm-up,
    dtype and timer, each once and in the documented order; on the CPU they say it was a CPU run."""
    comments, _, _ = tiny_run
    assert list(comments) == list(METADATA)
    assert all(len(v) == 1 for v in comments.values())
    one = {k: v[0] for k, v in comments.items()}
    assert one["device"].startswith("cpu: ") and one["device"].endswith("(1 torch thread)")
    assert one["driver"] == "n/a (cpu run)" and one["cuda"] == "n/a (cpu run)"
    assert one["script_version"] == ms.SCRIPT_VERSION and one["script"] == "benches/measured/measure_steps.py"
    assert (one["repeats"], one["warmup"], one["dtype"], one["tp"]) == ("5", "2", "bfloat16", "1")
    assert one["timer"] == "time.perf_counter_ns around each run"
    assert one["model"] == "tiny-llama" and "layers=2 hidden=256" in one["config"]
    assert len(one["date"]) == 20 and one["date"].endswith("Z")  # 2026-12-03T09:40:12Z


def test_tiny_run_prefill_time_grows_with_prompt_tokens(
    tiny_run: tuple[dict[str, list[str]], list[str], list[dict[str, str]]],
) -> None:
    """A 1024-token prefill of the tiny model (2 layers, hidden 256: ~3 GFLOP) takes clearly longer than a 16-token
    one (64x fewer tokens, ~50 MFLOP): the script times the work, not only fixed overheads. The run uses one
    PyTorch thread (``--threads 1``): with two, a busy machine can stall the small step on the thread pool's
    barrier (a 16-token prefill once took 84 ms against 56 ms for 1024 tokens with both cores taken by other
    processes). Observed with one thread on a 2-core VM: about 17x quiet, 30x with both cores busy; asserted: more
    than 2x."""
    _, _, rows = tiny_run
    prefill = {int(r["prompt_tokens"]): float(r["time_s"]) for r in rows if r["phase"] == "prefill"}
    assert prefill[1024] > 2 * prefill[16], prefill


def test_skipped_shapes_are_recorded_not_crashed(tmp_path: Path) -> None:
    """A shape over the memory allowed (``--max-step-gib``) is left out of the rows and named in a
    ``# skipped:`` comment; the run goes on to the shapes that fit. The model is named after the config's folder
    (``--config``), as for a Hugging Face download."""
    need_torch()
    folder = tmp_path / "my-tiny"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(ms.TINY), encoding="utf-8")
    out = tmp_path / "steps.csv"
    # decode batch 64 x 4096 tokens of the tiny model: 64 x 4097 x 1 KiB of K/V per token = 256 MiB > 0.1 GiB
    r = run_script(
        "--config",
        str(folder / "config.json"),
        "--device",
        "cpu",
        "--threads",
        "1",
        "--prompt-tokens",
        "8",
        "--decode-batch",
        "1,64",
        "--decode-context",
        "4096",
        "--repeats",
        "1",
        "--warmup",
        "1",
        "--max-step-gib",
        "0.1",
        "-o",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    comments, _, rows = read_csv(out.read_text(encoding="utf-8"))
    assert [(x["phase"], x["batch"], x["context_tokens"]) for x in rows] == [
        ("prefill", "1", "0"),
        ("decode", "1", "4096"),
    ]
    assert {x["model"] for x in rows} == {"my-tiny"}
    (skipped,) = comments["skipped"]
    assert skipped.startswith("decode batch=64 context_tokens=4096: needs about 0.25 GiB"), skipped
    assert "0.10 GiB allowed" in skipped


@pytest.mark.parametrize("kernels", ["cpu", "cuda"])
def test_decode_with_the_kv_cache_matches_a_longer_prefill(kernels: str) -> None:
    """The decoder is a real one: prefilling T tokens into a KV cache and then decoding token T + 1 against it gives
    the logits of prefilling all T + 1 tokens at once (float32, tiny config, GQA with 2 query heads per KV head).
    This checks the cache writes, the rotary positions of decode and the grouping of query heads in decode. With
    ``kernels="cuda"`` the attention runs under the CUDA runs' restriction to fused kernels (on the CPU that is its
    flash kernel), so the restriction itself is exercised here too."""
    torch = need_torch()
    cfg = ms.ModelConfig.from_hf(ms.TINY)
    model = ms.build_model(cfg, device="cpu", dtype="float32", seed=3, positions=64)
    t = 37
    tokens = torch.randint(0, cfg.vocab, (3, t + 1), generator=torch.Generator().manual_seed(5))

    def caches(slots: int) -> list[tuple[Any, Any]]:
        shape = (3, cfg.kv_heads, slots, cfg.head_dim)
        return [(torch.zeros(shape), torch.zeros(shape)) for _ in range(cfg.layers)]

    with torch.inference_mode(), ms.attention_kernels(kernels):
        whole = ms.prefill_forward(model, tokens, caches(t + 1))
        cache = caches(t + 1)
        ms.prefill_forward(model, tokens[:, :t], [(k[:, :, :t], v[:, :, :t]) for k, v in cache])
        stepped = ms.decode_forward(model, tokens[:, t:], cache, t)
    assert whole.shape == stepped.shape == (3, cfg.vocab)
    torch.testing.assert_close(stepped, whole, rtol=1e-4, atol=1e-4)

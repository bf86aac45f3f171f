"""The text report tells the truth at a glance (issue 9 item 3): numbers never run together, the header names
what ran (link overrides, the trace file, where compression runs), and an overloaded run says so in one line
with the binding resource and its ceiling."""

from __future__ import annotations

import re

import kvwire
import polars as pl
from click.testing import CliRunner
from kvwire.cli import main
from kvwire.results.report import render
from shared_paths import DATA, ROOT

MOONCAKE = DATA / "mooncake" / "conversation_trace.jsonl"
NAMES = ["mean", "p50", "p90", "p95", "p99", "p99.9", "max"]


def latency_rows(text: str) -> dict[str, list[str]]:
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("latency ("))
    rows = {}
    for ln in lines[start + 1 : start + 6]:
        name, *cells = ln.split()
        rows[name] = cells
    return rows


def test_mooncake_replay_numbers_do_not_run_together() -> None:
    """The issue's case: ``kvwire run --trace mooncake/conversation_trace.jsonl`` has a mean TTFT of
    1,449,318 ms, wider than the 10-character column, so the cells ran together. The table now switches to
    seconds and sizes its columns: every row splits into exactly seven numbers, which parse and match the
    summary. (The issue's figure is by the reference's TTFT rule, so the run sets it.)"""
    r = CliRunner().invoke(main, ["run", "--trace", str(MOONCAKE), "--set", "metrics.first_token=prefill"])
    assert r.exit_code == 0, r.output
    assert "latency (s)" in r.stdout
    rows = latency_rows(r.stdout)
    assert set(rows) == {"ttft", "tpot", "itl", "e2e", "handoff"}
    for name, cells in rows.items():
        assert len(cells) == 7, (name, cells)
        assert all(re.fullmatch(r"[\d,]+\.\d{3}", c) for c in cells), (name, cells)
    assert rows["ttft"][0] == "1,449.318"
    assert "from conversation_trace.jsonl" in r.stdout  # the header names the trace file


def test_ordinary_runs_stay_in_milliseconds() -> None:
    """Below 100 s the table stays in ms with its usual 10-character columns."""
    text = render(kvwire.simulate({"workload": {"requests": 200}}))
    header = next(ln for ln in text.splitlines() if "latency (" in ln)
    assert header.split()[:2] == ["latency", "(ms)"]
    assert header.endswith("      mean       p50       p90       p95       p99     p99.9       max")
    assert all(len(c) == 7 for c in latency_rows(text).values())


def test_header_names_link_overrides() -> None:
    """``--set link.bandwidth_gb_per_s=10`` still printed ``ib-ndr``; the header now names the changed field."""
    r = CliRunner().invoke(main, ["run", "--set", "workload.requests=30", "--set", "link.bandwidth_gb_per_s=10"])
    assert r.exit_code == 0, r.output
    first = r.stdout.splitlines()[0]
    assert "-> ib-ndr (bandwidth_gb_per_s 10) ->" in first, first
    plain = CliRunner().invoke(main, ["run", "--set", "workload.requests=30"]).stdout.splitlines()[0]
    assert "-> ib-ndr ->" in plain, plain


def test_header_names_where_compression_runs() -> None:
    """A sender-side compression was printed "in transit"; the header now says where it runs, and where (if
    anywhere) it is decompressed."""

    def first_line(handoff: dict[str, str]) -> str:
        res = kvwire.simulate({"link": "eth-25g", "handoff": handoff, "workload": {"requests": 20}})
        return render(res).splitlines()[0]

    assert "fp8_e4m3 compressed on the prefill GPU" in first_line({"compression": "fp8", "compress_at": "sender"})
    assert "in transit" not in first_line({"compression": "fp8", "compress_at": "sender"})
    assert "fp8_e4m3 compressed in transit" in first_line({"compression": "fp8"})
    both = first_line({"compression": "mxfp4", "compress_at": "sender", "decompress_at": "receiver"})
    assert "mxfp4 compressed on the prefill GPU, decompressed on the decode GPU" in both


def test_overloaded_replay_says_so_in_one_line() -> None:
    """The Mooncake replay on one prefill instance offers 3.40 req/s against a prefill ceiling of 2.64 req/s
    (its mean prompt); the report says so in one line, right under the request counts."""
    r = CliRunner().invoke(main, ["run", "--trace", str(MOONCAKE)])
    lines = r.stdout.splitlines()
    assert lines[2].startswith("overloaded: 3.40 req/s offered exceeds the prefill ceiling of 2.64 req/s"), lines[2]
    assert sum(ln.startswith("overloaded") for ln in lines) == 1


def test_readme_sample_is_the_report_of_a_real_run() -> None:
    """README "Quick start" shows ``kvwire run``'s output as "real output": it is exactly the report of the
    default run today (the wall-clock time aside), so it cannot drift when the report changes."""

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("```\nkvwire: ") + 4
    shown = readme[start : readme.index("```", start)].rstrip("\n")
    out = CliRunner().invoke(main, ["run"]).stdout.rstrip("\n")

    def no_wall(text: str) -> str:
        return re.sub(r"steps in [0-9.]+ s", "steps in - s", text)

    assert no_wall(shown) == no_wall(out)


def test_serving_levers_have_their_lines_only_when_on() -> None:
    """The report says what the serving levers did, each line only when its lever is on: the prefix cache's hit
    ratio and token counts (and with ``handoff.skip_cached_prefix`` what was left off the link), paged KV's
    preemptions, and the hand-offs that waited for decode room; the figures are the summary's. A default run
    has none of these lines."""
    rows = kvwire.read_trace(MOONCAKE).head(400)
    sc = {
        "workload": {"external": True},
        "prefix_cache": {"enabled": True},
        "handoff": {"skip_cached_prefix": True},
        "kv": {"policy": "paged", "preemption": "swap"},
    }
    res = kvwire.simulate(sc, requests=rows)
    text = render(res)
    px, pe, kh = (res.summary[k] for k in ("prefix_cache", "preemptions", "kv_hold"))  # type: ignore[literal-required]
    assert px["cached_tokens"] > 0  # the trace's conversations reuse prefixes
    (cache,) = [ln for ln in text.splitlines() if ln.startswith("prefix cache: ")]
    assert f"{px['hit_token_ratio'] * 100:.1f}% of prompt tokens cached" in cache
    assert f"({px['cached_tokens']:,} of {px['prompt_tokens']:,}; {px['hit_requests']:,} requests hit)" in cache
    assert f"{px['link_tokens_skipped']:,} tokens, {px['link_bytes_saved'] / 1e9:,.1f} GB left off the link" in cache
    (paged,) = [ln for ln in text.splitlines() if ln.startswith("paged KV: ")]
    assert paged.startswith(f"paged KV: {pe['count']:,} preemptions ({pe['recompute_tokens']:,} tokens")
    (hold,) = [ln for ln in text.splitlines() if ln.startswith("kv holding: ")]
    assert hold.startswith(f"kv holding: {kh['waited']:,} of {kh['handoffs']:,} hand-offs waited")
    # every completed request with a second token to decode is handed off (one token ends at prefill)
    assert kh["handoffs"] == res.requests.filter(~pl.col("rejected") & (pl.col("output_tokens") >= 2)).height

    plain = render(kvwire.simulate({"workload": {"requests": 200}}))
    assert not any(ln.startswith(("prefix cache:", "paged KV:", "kv holding:")) for ln in plain.splitlines())

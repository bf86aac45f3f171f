"""Closed-loop multi-turn sessions (``workload.sessions``, README "Sessions").

The oracles are independent of the engine: the session workload is rebuilt here with CPython's own
``random`` module (the documented draw order), think times and turn order are read off the per-request table,
a one-turn sessions workload is compared with the open-loop generator's run, and Little's law is checked on
the run's own figures.
"""

from __future__ import annotations

import random
from typing import Any

import kvwire
import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from workloads import draw_length

SESSIONS = {"count": 40, "turns": 10, "think_s": 0.75, "system_prompts": 3, "system_tokens": 1000}
PROMPT = {"dist": "lognormal", "mean": 400.0, "cv": 0.6}


def scenario(sessions: dict[str, Any] | None = None, **workload: Any) -> dict[str, Any]:
    """A sessions scenario (4 sessions/s, 400-token messages, the default outputs) with overrides."""
    w: dict[str, Any] = {
        "seed": 11,
        "arrivals": {"rate_per_s": 4.0},
        "prompt_tokens": PROMPT,
        "sessions": {**SESSIONS, **(sessions or {})},
    }
    return {"workload": {**w, **workload}}


@pytest.fixture(scope="module")
def run() -> kvwire.SimResult:
    return kvwire.simulate(scenario())


def python_sessions(
    seed: int, rate: float, count: int, turns: int, system_tokens: int, max_context: int
) -> list[tuple[int, int, float | None, int, int]]:
    """The sessions workload rebuilt with CPython's ``random``: for each session the gap to its start, then per
    turn the message length (PROMPT) then the output length (the default lognormal 256, cv 0.5); turn 1's
    prompt = system + message, turn k's = previous prompt + previous output + message; a session ends before
    its first turn whose prompt + output exceed the context. Rows (session, turn, arrival of turn 1, prompt,
    output)."""
    rng = random.Random(seed)
    t = 0.0
    rows: list[tuple[int, int, float | None, int, int]] = []
    for s in range(count):
        t += rng.expovariate(rate)
        lengths = [(draw_length(rng, PROMPT["mean"], PROMPT["cv"]), draw_length(rng, 256, 0.5)) for _ in range(turns)]
        prompt, prev_out = system_tokens, 0
        for k, (m, o) in enumerate(lengths):
            prompt += prev_out + m
            if prompt + o > max_context:
                break
            rows.append((s, k + 1, t if k == 0 else None, prompt, o))
            prev_out = o
    return rows


def test_lengths_and_prompt_growth_match_cpython_random(run: kvwire.SimResult) -> None:
    """Every turn's prompt is exactly the previous prompt + previous output + a new message, with the message
    and output lengths of the documented CPython draw order, rows session-major, turn 1 arriving at the
    session's start, and sessions ended before the context is exceeded (turns_not_sent counts them)."""
    max_context = run.scenario["model"]["max_context_tokens"]
    want = python_sessions(11, 4.0, 40, 10, 1000, max_context)
    df = run.requests
    got = list(zip(df["session"], df["turn"], df["prompt_tokens"], df["output_tokens"], strict=True))
    assert got == [(s, k, p, o) for s, k, _, p, o in want]
    firsts = df.filter(pl.col("turn") == 1)["arrival_s"].to_list()
    assert firsts == [a for _, k, a, _, _ in want if k == 1]
    assert run.summary["sessions"]["turns_not_sent"] == 40 * 10 - len(want) > 0
    assert run.summary["sessions"]["ended_by_context"] > 0


def test_turn_order_and_exact_think_times(run: kvwire.SimResult) -> None:
    """Turn k+1 of a session arrives exactly think_s after turn k's last token (float equality: the engine adds
    think_s to the finish time once), so never before turn k finished; turns are numbered 1, 2, ... per
    session with no gap."""
    df = run.requests.sort("id")
    s, k = df["session"].to_numpy(), df["turn"].to_numpy()
    arrival, finish = df["arrival_s"].to_numpy(), df["finish_s"].to_numpy()
    same = s[1:] == s[:-1]
    assert np.array_equal(k[1:][same], k[:-1][same] + 1)
    assert np.all(k[1:][~same] == 1) and k[0] == 1
    assert np.array_equal(arrival[1:][same], finish[:-1][same] + 0.75)
    assert np.all(arrival[1:][same] > finish[:-1][same])
    assert same.sum() > 50


def test_zero_think_time_arrives_at_finish() -> None:
    """With think_s = 0 the next turn arrives at the very instant the previous one finished."""
    df = kvwire.simulate(scenario({"think_s": 0.0, "count": 10})).requests
    s, arrival, finish = df["session"].to_numpy(), df["arrival_s"].to_numpy(), df["finish_s"].to_numpy()
    same = s[1:] == s[:-1]
    assert same.any()
    assert np.array_equal(arrival[1:][same], finish[:-1][same])


def test_one_turn_sessions_equal_the_open_loop_workload() -> None:
    """Sessions of one turn with no system prompt are the open-loop workload with the same seed: the same
    requests and the same run, column for column (one session of one turn is a single generated request)."""
    for n in (1, 50):
        sess = kvwire.simulate(
            {"workload": {"seed": 4, "arrivals": {"rate_per_s": 6.0}, "sessions": {"count": n, "turns": 1}}}
        )
        open_loop = kvwire.simulate({"workload": {"seed": 4, "arrivals": {"rate_per_s": 6.0}, "requests": n}})
        a = sess.requests
        assert a["session"].to_list() == list(range(n)) and set(a["turn"]) == {1}
        assert a.drop("session", "turn").equals(open_loop.requests)
        assert sess.summary["latency"] == open_loop.summary["latency"]


def test_same_seed_same_run_other_seed_differs() -> None:
    """Determinism: the same scenario and seed give identical tables and summaries (the core is
    single-threaded per run); another seed gives another workload."""
    a = kvwire.simulate(scenario())
    b = kvwire.simulate(scenario())
    assert a.requests.equals(b.requests)
    assert {k: v for k, v in a.summary.items() if k != "run"} == {k: v for k, v in b.summary.items() if k != "run"}
    c = kvwire.simulate(scenario(seed=12))
    assert not a.requests.equals(c.requests)


def test_little_law_and_conservation(run: kvwire.SimResult) -> None:
    """Every turn sent is completed or refused; sent + not sent = count x turns; the sessions that completed
    every turn plus those that ended early are all the sessions; Little's law L = lambda W holds on the run
    (both sides from the core's population integral and the table's response times)."""
    s = run.summary["sessions"]
    req = run.summary["requests"]
    assert s["turns_sent"] == run.requests.height == req["total"] == req["completed"] + req["rejected"]
    assert s["turns_sent"] + s["turns_not_sent"] == s["turns_planned"] == 400
    assert s["completed"] + s["ended_early"] == s["count"] == 40
    assert s["ended_by_refusal"] + s["ended_by_context"] == s["ended_early"]
    df = run.requests
    per_session = df.group_by("session").agg(pl.len().alias("n"), pl.col("rejected").any().alias("refused"))
    assert s["completed"] == per_session.filter((pl.col("n") == 10) & ~pl.col("refused")).height
    little = run.summary["little"]
    assert little["l"] == pytest.approx(little["lambda_w"], rel=1e-9)
    horizon = run.summary["run"]["horizon_s"]
    assert little["l"] == pytest.approx(float((df["finish_s"] - df["arrival_s"]).sum()) / horizon, rel=1e-9)


def test_single_session_has_at_most_one_request_in_flight() -> None:
    """Closed loop: with one session, each turn arrives only after the previous one finished, so at most one
    request is in flight at any time (the busy intervals do not overlap)."""
    df = kvwire.simulate(scenario({"count": 1, "turns": 12, "think_s": 0.0, "system_tokens": 0})).requests
    assert df.height >= 5
    arrival, finish = df["arrival_s"].to_numpy(), df["finish_s"].to_numpy()
    events = sorted([(a, 1) for a in arrival] + [(f, -1) for f in finish], key=lambda e: (e[0], e[1]))
    in_flight = np.cumsum([d for _, d in events])
    assert in_flight.max() == 1


def test_refused_turn_ends_its_session() -> None:
    """A turn the decode pool's KV can never hold is refused at arrival and ends its session: it is the
    session's last row, every refused row is over the KV capacity, and the summary counts those sessions."""
    res = kvwire.simulate(scenario({"count": 30}) | {"cost": {"mem_util": 0.21}})
    capacity = res.summary["instances"]["decode-0"]["kv_capacity_tokens"]
    df = res.requests.sort("id")
    refused = df.filter(pl.col("rejected"))
    assert refused.height > 0
    assert (refused["prompt_tokens"] + refused["output_tokens"] > capacity).all()
    assert (
        df.filter(~pl.col("rejected"))["prompt_tokens"] + df.filter(~pl.col("rejected"))["output_tokens"]
    ).max() <= capacity
    last = df.group_by("session").agg(pl.col("turn").max().alias("last"))
    joined = refused.join(last, on="session")
    assert (joined["turn"] == joined["last"]).all()
    assert res.summary["sessions"]["ended_by_refusal"] == refused["session"].n_unique()
    assert res.summary["requests"]["rejected"] == refused.height


def test_offered_rate_is_session_rate_times_turns_per_session(run: kvwire.SimResult) -> None:
    """The ceilings' offered rate of a closed-loop workload is its steady-state request rate: sessions/s x the
    mean turns a session sends."""
    assert run.summary["load"] is not None
    assert run.summary["load"]["offered_req_per_s"] == pytest.approx(4.0 * run.requests.height / 40, rel=1e-12)


@pytest.mark.parametrize(
    ("sc", "path"),
    [
        (scenario({"turns": 0}), "workload.sessions.turns"),
        (scenario({"count": 0}), "workload.sessions.count"),
        (scenario({"think_s": -1.0}), "workload.sessions.think_s"),
        (scenario({"think_s": float("nan")}), "workload.sessions.think_s"),
        (scenario({"system_prompts": 0}), "workload.sessions.system_prompts"),
        (scenario({"count": 10**6, "turns": 10**6}), "workload.sessions"),
        (scenario({"system_tokens": 100_000}), "workload.sessions"),
        (scenario(requests=10), "workload.requests"),
        (
            {
                "workload": {
                    "sessions": SESSIONS,
                    "trace": {"arrival_s": [0.0], "prompt_tokens": [5], "output_tokens": [5]},
                }
            },
            "workload.sessions",
        ),
        (scenario({"turn": 3}), "workload.sessions.turn"),
    ],
)
def test_bad_input_names_the_field(sc: dict[str, Any], path: str) -> None:
    """Bad sessions input raises ScenarioError naming the field (and loses nothing: nothing ran)."""
    with pytest.raises(kvwire.ScenarioError) as e:
        kvwire.simulate(sc)
    assert e.value.path == path, (e.value.path, str(e.value))


def test_sessions_refuse_a_streamed_run_and_a_request_table() -> None:
    """A streamed run (keep_requests=False) and a request table passed beside a sessions scenario are refused
    with the field named."""
    with pytest.raises(kvwire.ScenarioError) as e:
        kvwire.simulate(scenario(), keep_requests=False)
    assert e.value.path == "workload.sessions"
    table = pl.DataFrame({"arrival_s": [0.0], "prompt_tokens": [5], "output_tokens": [5]})
    with pytest.raises(kvwire.ScenarioError) as e:
        kvwire.simulate({"workload": {"sessions": SESSIONS}}, requests=table)
    assert e.value.path == "workload.sessions"


@pytest.mark.parametrize(
    "extra",
    [
        {"mode": "colocated"},
        {"scheduler": {"policy": "chunked", "max_num_batched_tokens": 512}},
        {"kv": {"policy": "paged", "preemption": "swap"}, "cost": {"mem_util": 0.215}},
        {"kv": {"policy": "paged", "preemption": "recompute"}, "cost": {"mem_util": 0.215}},
        {"router": {"disaggregate": {"policy": "conditional", "min_prompt_tokens": 3000}}},
        {"metrics": {"first_token": "decode"}, "prefill": {"instances": 2}, "decode": {"instances": 2}},
    ],
    ids=["colocated", "chunked", "paged-swap", "paged-recompute", "conditional", "2p2d-first-token-decode"],
)
def test_closed_loop_holds_in_every_engine_mode(extra: dict[str, Any]) -> None:
    """In every instance mode (colocated, chunked prefill, paged KV with preemption by swap and by recompute,
    conditional disaggregation, several instances), each turn after the first arrives exactly think_s after
    its predecessor's last token, every turn sent is completed or refused, and a refused turn is the last of
    its session."""
    res = kvwire.simulate(scenario({"count": 25}) | extra)
    df = res.requests.sort("id")
    s, rejected = df["session"].to_numpy(), df["rejected"].to_numpy()
    arrival, finish = df["arrival_s"].to_numpy(), df["finish_s"].to_numpy()
    same = s[1:] == s[:-1]
    assert same.sum() > 25
    assert np.array_equal(arrival[1:][same], finish[:-1][same] + 0.75)
    assert not rejected[:-1][same].any()
    assert np.all(np.isfinite(finish[~rejected])) and np.all(np.isfinite(arrival))
    r = res.summary["requests"]
    assert r["completed"] + r["rejected"] == df.height == res.summary["sessions"]["turns_sent"]


def test_sweep_over_sessions_is_worker_count_independent() -> None:
    """A sweep over a sessions field gives the same rows with 1 and 2 worker threads (wall times aside), and its
    flattened columns carry the sessions summary."""
    base = scenario({"count": 20})
    grid = {"workload.sessions.think_s": [0.5, 3.0]}
    a = kvwire.sweep(base, grid, workers=1)
    b = kvwire.sweep(base, grid, workers=2)
    wall = [c for c in a.columns if c.startswith("run.wall")]
    assert a.drop(wall).equals(b.drop(wall))
    assert a["sessions.turns_planned"].to_list() == [200, 200]
    assert a["sessions.think_s"].to_list() == [0.5, 3.0]


def test_echo_reruns_the_same_sessions() -> None:
    """The resolved scenario a sessions run echoes (every default filled in) validates and reruns to the same
    table: the echo carries workload.sessions in full."""
    a = kvwire.simulate(scenario({"count": 15}))
    assert a.scenario["workload"]["sessions"] == {**SESSIONS, "count": 15}
    assert "requests" not in a.scenario["workload"]
    b = kvwire.simulate(a.scenario)
    assert a.requests.equals(b.requests) and a.scenario == b.scenario


@st.composite
def random_sessions(draw: st.DrawFn) -> dict[str, Any]:
    """Small random sessions scenarios: counts, turns, think time, system prompts, lengths, KV memory (some
    turns refused), mode."""
    sessions = {
        "count": draw(st.integers(1, 12)),
        "turns": draw(st.integers(1, 8)),
        "think_s": draw(st.sampled_from([0.0, 0.01, 1.0, 7.5])),
        "system_prompts": draw(st.integers(1, 4)),
        "system_tokens": draw(st.integers(0, 3000)),
    }
    sc: dict[str, Any] = {
        "workload": {
            "seed": draw(st.integers(0, 2**32)),
            "arrivals": {"rate_per_s": draw(st.sampled_from([0.2, 2.0, 50.0]))},
            "prompt_tokens": {"dist": "uniform", "min": 1, "max": draw(st.integers(1, 2000))},
            "output_tokens": {"dist": "uniform", "min": 0, "max": draw(st.integers(0, 800))},
            "sessions": sessions,
        },
        "cost": {"mem_util": draw(st.sampled_from([0.9, 0.215]))},
    }
    if draw(st.booleans()):
        sc["mode"] = "colocated"
    return sc


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_sessions())
def test_closed_loop_invariants_over_random_scenarios(sc: dict[str, Any]) -> None:
    """Over random sessions scenarios: rows are session-major with turns 1, 2, ... and no gap; turn k + 1 arrives
    exactly think_s after turn k finished; a refused turn is the last of its session; every row sent is
    completed or refused; the summary's turn and session counts add up."""
    try:
        res = kvwire.simulate(sc)
    except kvwire.ScenarioError as e:  # not even one first turn fits the context
        assert e.path == "workload.sessions"
        return
    p = sc["workload"]["sessions"]
    df = res.requests.sort("id")
    s, k = df["session"].to_numpy().astype(np.int64), df["turn"].to_numpy().astype(np.int64)
    rejected = df["rejected"].to_numpy()
    arrival, finish = df["arrival_s"].to_numpy(), df["finish_s"].to_numpy()
    assert np.all(np.diff(s) >= 0) and s.max() < p["count"]
    same = s[1:] == s[:-1]
    assert np.array_equal(k[1:][same], k[:-1][same] + 1) and np.all(k[1:][~same] == 1) and k[0] == 1
    assert np.array_equal(arrival[1:][same], finish[:-1][same] + p["think_s"])
    assert not rejected[:-1][same].any()
    assert np.all(np.isfinite(finish[~rejected])) and np.all(np.isfinite(arrival))
    sm = res.summary["sessions"]
    assert sm["turns_sent"] == df.height == res.summary["requests"]["completed"] + res.summary["requests"]["rejected"]
    assert sm["turns_sent"] + sm["turns_not_sent"] == p["count"] * p["turns"]
    assert sm["completed"] + sm["ended_by_context"] + sm["ended_by_refusal"] == p["count"]

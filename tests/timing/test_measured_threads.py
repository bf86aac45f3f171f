"""The measured source resolved in several threads at once, as the service does (it validates one scenario
while it runs another, and a sweep's workers resolve their points side by side): every resolution succeeds
with the same provenance and tables as one alone, and :data:`kvwire.timing.resolve.LAST_BUILD` is one
resolution's whole record. Needs aiconfigurator-core (``pip install 'kvwire[measured]'``; CI installs it)
and skips with that reason where it is absent."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from kvwire.scenario.load import scenario_json
from kvwire.timing import resolve as res

pytest.importorskip("aiconfigurator_core.sdk", reason="needs aiconfigurator-core: pip install 'kvwire[measured]'")

MEASURED = {"cost": {"timing": {"source": "aiconfigurator", "system": "h100_sxm", "backend": "vllm"}}}


@pytest.fixture
def cold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty cache folder and no table in memory: every resolution below builds."""
    monkeypatch.setenv("KVWIRE_CACHE_DIR", str(tmp_path))
    res._MEMORY.clear()
    yield tmp_path
    res._MEMORY.clear()


def test_concurrent_resolutions_of_a_cold_table_all_succeed(cold: Path) -> None:
    """Three threads resolve the same measured scenario at once on a cold cache (each builds the tables while
    the others do): none fails, all give the tables and provenance a resolution alone gives afterwards (from
    the cache), and LAST_BUILD then holds both pools with how each got its table."""
    start = threading.Barrier(3)

    def resolve(_: int) -> str:
        start.wait()
        return scenario_json(MEASURED)

    with ThreadPoolExecutor(3) as pool:
        texts = list(pool.map(resolve, range(3)))
    assert len(set(texts)) == 1
    assert set(res.LAST_BUILD) == {"prefill", "decode"}
    assert all(set(v) == {"cache", "seconds", "key"} for v in res.LAST_BUILD.values())
    res._MEMORY.clear()
    again = scenario_json(MEASURED)  # from the disk cache the threads wrote
    assert {v["cache"] for v in res.LAST_BUILD.values()} == {"disk"}
    assert again == texts[0]

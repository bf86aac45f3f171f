"""Schemathesis against the served OpenAPI document (``/schema/openapi.json``) of a real server: generated
requests, valid and invalid, for every operation (and stateful sequences that follow the ids responses hand
out) find no server error, no undocumented status code or content type, and no response that violates its
schema, and (checks of ours, in ``schemathesis_hooks.py``) every JSON response is strict JSON and no error calls
the body ``data``. Bounded: a fixed seed and 12 examples per operation, on a server with small limits so that generated
sweeps stay cheap."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import schemathesis_hooks as hooks
from api_support import running

CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
    "negative_data_rejection",
    "missing_required_header",
    "unsupported_method",
    "allow_header_conformance",
    "use_after_free",
    "ensure_resource_availability",
    # ours (schemathesis_hooks.py): strict JSON in every response; no error that names the body 'data'
    "strict_json",
    "errors_name_the_field",
)

LIMITS = {
    "KVWIRE_API_MAX_SWEEP_POINTS": "20",
    "KVWIRE_API_MAX_SYNC_REQUESTS": "3000",
    "KVWIRE_API_MAX_POINT_REQUESTS": "3000",
    "KVWIRE_API_MAX_TRACE_BYTES": "100000",
    "KVWIRE_API_JOB_WORKERS": "1",
}


def test_schemathesis_finds_no_server_errors_or_schema_violations(tmp_path: Path) -> None:
    """``schemathesis run`` (positive and negative generation, coverage, fuzzing and stateful phases) passes
    every check above; the check ``positive_data_acceptance`` is left out because a schema cannot say which
    preset names exist or which models fit a device, so some schema-valid scenarios are rightly refused (422)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KVWIRE_API_")}
    here = str(Path(__file__).parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH", "")) if p)
    env["SCHEMATHESIS_HOOKS"] = "schemathesis_hooks"
    with running(tmp_path / "data", {**env, **LIMITS}) as server:
        cmd = [
            sys.executable, "-c", "from schemathesis.cli import schemathesis; schemathesis()",
            "run", f"{server.url}/schema/openapi.json",
            "--checks", ",".join(CHECKS),
            "--max-examples", "12", "--seed", "1", "--workers", "1",
            "--request-timeout", "60",
        ]  # fmt: skip
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=600, env=env)
        assert out.returncode == 0, out.stdout[-20000:] + out.stderr[-5000:] + server.log()[-5000:]
        assert "Test cases:" in out.stdout


class _Response:
    def __init__(self, status_code: int, content: bytes) -> None:
        self.status_code, self.content = status_code, content
        self.headers = {"Content-Type": ["application/json"]}


def test_our_checks_can_fail() -> None:
    """The checks of ``schemathesis_hooks.py`` refuse what they are for: a response holding ``Infinity`` or
    ``NaN``, an error whose detail is ``'data'``; and pass a strict one."""
    for bad in (b'{"x": Infinity}', b"[NaN]", b'{"a": -Infinity}'):
        with pytest.raises(AssertionError, match="strict JSON"):
            hooks.strict_json(None, _Response(200, bad), None)
    with pytest.raises(AssertionError, match="'data'"):
        hooks.errors_name_the_field(None, _Response(400, b'{"detail": "\'data\'"}'), None)
    assert hooks.strict_json(None, _Response(200, b'{"x": null}'), None)
    assert hooks.errors_name_the_field(None, _Response(400, b'{"detail": "the request body is empty"}'), None)

"""The service's settings: where it keeps its data, how it binds, and every bound it enforces.

Each field can be set by keyword (tests, ``kvwire serve`` options) or by an environment variable
``KVWIRE_API_<FIELD>`` (``KVWIRE_API_MAX_SYNC_REQUESTS=50000``); the bearer token is ``KVWIRE_API_TOKEN``, the
Dask scheduler that runs the jobs ``KVWIRE_DASK_SCHEDULER``, the data directory ``KVWIRE_DATA_DIR`` and the
documentation site served under ``/docs`` ``KVWIRE_DOCS_DIR`` (by default ``site/`` in the current directory
when it holds an ``index.html``, as ``mkdocs build`` leaves it).

>>> s = Settings.from_env(data_dir="/srv/kvwire", environ={"KVWIRE_API_MAX_SWEEP_POINTS": "500"})
>>> s.max_sweep_points, s.host
(500, '127.0.0.1')
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any


class SettingsError(ValueError):
    """A setting that cannot be used (bad number, non-loopback bind without a token, ...)."""


def default_data_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$KVWIRE_DATA_DIR``, else ``$XDG_DATA_HOME/kvwire``, else ``~/.local/share/kvwire``."""
    env = os.environ if environ is None else environ
    if env.get("KVWIRE_DATA_DIR"):
        return Path(env["KVWIRE_DATA_DIR"])
    base = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "kvwire"


#: Settings whose environment variable is not ``KVWIRE_API_<FIELD>``.
ENV_NAMES = {"token": "KVWIRE_API_TOKEN", "dask_scheduler": "KVWIRE_DASK_SCHEDULER"}

#: Where ``mkdocs build`` writes the site, relative to the directory the service starts in.
DEFAULT_DOCS_DIR = Path("site")


def default_docs_dir(environ: Mapping[str, str] | None = None, cwd: Path | None = None) -> Path | None:
    """``$KVWIRE_DOCS_DIR``, else ``site/`` in ``cwd`` (default: the current directory) when it holds an
    ``index.html``, else None (no documentation is served)."""
    env = os.environ if environ is None else environ
    if env.get("KVWIRE_DOCS_DIR"):
        return Path(env["KVWIRE_DOCS_DIR"])
    site = (cwd or Path.cwd()) / DEFAULT_DOCS_DIR
    return site if (site / "index.html").is_file() else None


def is_loopback(host: str) -> bool:
    """Whether binding to ``host`` only accepts connections from this machine.

    >>> is_loopback("127.0.0.1"), is_loopback("localhost"), is_loopback("::1"), is_loopback("0.0.0.0")
    (True, True, True, False)
    """
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve anywhere


@dataclasses.dataclass(frozen=True)
class Settings:
    """Configuration of one service process (see the module docstring for the environment variables)."""

    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 8000
    #: Bearer token required on every endpoint but ``/health`` (``KVWIRE_API_TOKEN``); required to bind to a
    #: non-loopback address.
    token: str | None = None
    #: Simulation worker threads (the limiter); default: the number of cores.
    sim_threads: int = dataclasses.field(default_factory=lambda: os.cpu_count() or 1)
    #: Synchronous simulations allowed to wait for a thread; beyond that the service answers 503 + Retry-After.
    sim_queue: int = 8
    #: Largest request body, bytes (413 above it); trace uploads have their own limit.
    max_body_bytes: int = 10_000_000
    max_trace_bytes: int = 200_000_000
    #: Most requests one synchronous simulation may generate or replay (larger runs: use a sweep job).
    max_sync_requests: int = 200_000
    #: Most requests per sweep point or capacity evaluation, and most points per sweep.
    max_point_requests: int = 2_000_000
    max_sweep_points: int = 10_000
    #: Wall-clock limit of a synchronous simulation (queue wait included) and of a job, seconds.
    run_timeout_s: float = 60.0
    job_timeout_s: float = 6 * 3600.0
    #: Sweep jobs run one at a time by default, each with ``job_workers`` threads (default: the cores).
    max_running_jobs: int = 1
    job_workers: int | None = None
    #: A job interrupted this many times (crash, restart) is marked failed instead of resumed again.
    max_job_restarts: int = 3
    #: Retention: the newest runs, finished jobs and traces kept (older ones are deleted).
    max_runs: int = 1000
    max_jobs: int = 200
    max_traces: int = 100
    #: A built documentation site (``mkdocs build``'s ``site/``) served under ``/docs``; None: no docs.
    docs_dir: Path | None = None
    #: A Dask scheduler (``tcp://host:8786``, ``KVWIRE_DASK_SCHEDULER``, ``kvwire serve --dask``): jobs run on
    #: its cluster (single simulations stay in the service's threads); None: jobs run in this process's threads.
    dask_scheduler: str | None = None
    #: How long the service waits for the scheduler at start before refusing to start, seconds.
    dask_timeout_s: float = 10.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Settings from ``KVWIRE_API_*`` variables, then ``overrides`` (keyword values that are not None; pass
        ``no_docs=True`` to serve no documentation whatever the environment and the current directory hold)."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        no_docs = bool(overrides.pop("no_docs", False))
        for f in dataclasses.fields(cls):
            if f.name in ("data_dir", "docs_dir"):
                continue
            name = ENV_NAMES.get(f.name, f"KVWIRE_API_{f.name.upper()}")
            raw = env.get(name)
            if raw is not None and raw != "":
                values[f.name] = _parse(name, raw, f.type)
        values.update({k: v for k, v in overrides.items() if v is not None})
        data_dir = values.pop("data_dir", None)
        docs_dir = values.pop("docs_dir", None)
        if no_docs:
            docs_dir = None
        elif docs_dir is None:
            docs_dir = default_docs_dir(env)
        settings = cls(
            data_dir=Path(data_dir) if data_dir is not None else default_data_dir(env),
            docs_dir=Path(docs_dir) if docs_dir is not None else None,
            **values,
        )
        settings.check()
        return settings

    def check(self) -> None:
        """Refuse settings that cannot work: non-positive bounds, or a public bind without a token."""
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, int | float) and not isinstance(v, bool) and v <= 0 and f.name not in ("port",):
                raise SettingsError(f"{f.name}: must be positive, got {v}")
        if not 0 <= self.port <= 65535:
            raise SettingsError(f"port: must be in 0..65535, got {self.port}")
        if self.token is not None and not self.token.strip():
            raise SettingsError("KVWIRE_API_TOKEN: must not be empty")
        if self.dask_scheduler is not None and not self.dask_scheduler.strip():
            raise SettingsError("KVWIRE_DASK_SCHEDULER: must not be empty (a scheduler address: tcp://host:8786)")
        if self.docs_dir is not None and not (self.docs_dir / "index.html").is_file():
            why = "is not a directory" if not self.docs_dir.is_dir() else "has no index.html"
            raise SettingsError(
                f"docs: {self.docs_dir} {why}; point it at a built documentation site (mkdocs build writes site/)"
            )
        if not is_loopback(self.host) and not self.token:
            raise SettingsError(
                f"refusing to bind to {self.host}: it is not a loopback address, and the service would accept "
                "requests from other machines without authentication. Set KVWIRE_API_TOKEN to a secret "
                "(clients then send 'Authorization: Bearer <token>'), or bind to 127.0.0.1."
            )


def _parse(name: str, raw: str, annotation: Any) -> Any:
    kind = str(annotation)
    try:
        if kind.startswith("int"):
            return int(raw)
        if kind.startswith("float"):
            return float(raw)
    except ValueError:
        raise SettingsError(f"{name}: expected a number, got {raw!r}") from None
    return raw


__all__ = ["DEFAULT_DOCS_DIR", "Settings", "SettingsError", "default_data_dir", "default_docs_dir", "is_loopback"]

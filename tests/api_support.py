"""Helpers of the service tests: a real ``kvwire-api`` server process on 127.0.0.1, and the in-process client."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
from kvwire_api import create_app
from kvwire_api.config import Settings
from litestar.testing import TestClient

#: Runs that differ only by wall-clock time: compare summaries without these keys.
WALL_CLOCK = {"wall_s"}


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def without_wall_clock(value: Any) -> Any:
    """``value`` with every ``wall_s`` key removed, at any depth (the only figure that differs run to run)."""
    if isinstance(value, dict):
        return {k: without_wall_clock(v) for k, v in value.items() if k not in WALL_CLOCK}
    if isinstance(value, list):
        return [without_wall_clock(v) for v in value]
    return value


class Server:
    """A ``python -m kvwire_api.server`` process (the ``kvwire-api`` entry point) and a client for it."""

    def __init__(
        self,
        data_dir: Path,
        env: Mapping[str, str] | None = None,
        port: int | None = None,
        host: str = "127.0.0.1",
        args: Sequence[str] = (),
    ) -> None:
        self.data_dir = data_dir
        #: More options of the server command (``["--dask", address]``).
        self.args = list(args)
        self.port = port or free_port()
        self.host = host
        self.url = f"http://{host}:{self.port}"
        self.log_path = data_dir.parent / f"server-{self.port}.log"
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 60.0) -> Server:
        cmd = [sys.executable, "-m", "kvwire_api.server", "--host", self.host, "--port", str(self.port)]
        cmd += ["--data-dir", str(self.data_dir), *self.args]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited with {self.proc.returncode}:\n{self.log()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/health", timeout=2.0).status_code == 200:
                    return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the server did not answer /health within {timeout_s} s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=60.0, **kwargs)

    def kill(self) -> None:
        """SIGKILL: the process gets no chance to clean up (a crash)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it does not stop within 20 s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


@contextlib.contextmanager
def running(data_dir: Path, env: Mapping[str, str] | None = None) -> Iterator[Server]:
    """A started server, stopped at the end."""
    server = Server(data_dir, env).start()
    try:
        yield server
    finally:
        server.stop()


def parse_sse(text: str) -> list[dict[str, str]]:
    """Server-Sent Events as dicts of their fields (``id``, ``event``, ``data``); comments are dropped."""
    events = []
    for block in re.split(r"\r?\n\r?\n", text):
        fields: dict[str, str] = {}
        for line in re.split(r"\r?\n", block):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            fields[name] = fields.get(name, "") + value.removeprefix(" ")
        if fields:
            events.append(fields)
    return events


def make_client(tmp_path: Path, **settings: Any) -> TestClient[Any]:
    """The app in process (its lifespan runs inside ``with``), its data under ``tmp_path / "data"``."""
    return TestClient(app=create_app(Settings(data_dir=tmp_path / "data", **settings)))


def wait_for_job(client: httpx.Client, location: str, timeout_s: float = 120.0, **headers: str) -> dict[str, Any]:
    """Poll a job until it is done, failed or cancelled; returns its status document."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job: dict[str, Any] = client.get(location, headers=headers).json()
        if job["status"] in ("done", "failed", "cancelled"):
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {location} did not finish within {timeout_s} s: {job}")


__all__ = ["Server", "free_port", "make_client", "parse_sse", "running", "wait_for_job", "without_wall_clock"]

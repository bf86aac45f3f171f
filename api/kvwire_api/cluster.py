"""Jobs on a Dask cluster: the service's connection to a ``distributed`` scheduler (``kvwire serve --dask ADDR``,
``KVWIRE_DASK_SCHEDULER``).

The client connects once, when the service starts (a scheduler that cannot be reached within
``dask_timeout_s`` is a :class:`ClusterError` naming its address, and the service does not start), and is
closed when the service stops. Each job gets an executor of its own (``client.get_executor(pure=False)``:
tasks of two jobs never share a key, so cancelling one job's task never cancels another's) and runs through
the library's executor path: a sweep's chunks, a capacity search's or best split's simulations. A task whose
worker dies is run again on another worker by the scheduler (``distributed.scheduler.allowed-failures``, 3 by
default, before the job fails).

What the status documents say of the cluster (:meth:`Cluster.describe`) is read from the client's cache of
the scheduler's identity (refreshed by the client every ``distributed.client.scheduler-info-interval``, 2 s),
so ``GET /health`` never waits on the network.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from concurrent.futures import Executor
from typing import Any

from kvwire.planning.sweep import default_workers

from kvwire_api.types import ExecutorDict

#: How much longer than its timeout the service waits for the client (the handshake after the connection).
HANDSHAKE_GRACE_S = 5.0


class ClusterError(RuntimeError):
    """The Dask scheduler cannot be used: unreachable, a malformed address, or ``distributed`` not installed."""


def thread_executor(job_workers: int | None) -> ExecutorDict:
    """What runs jobs without a cluster: this process's threads (``job_workers``, default: the cores)."""
    n = job_workers or default_workers()  # what kvwire.sweep and the searches take for workers=None
    return {"kind": "threads", "scheduler": None, "workers": n, "threads": n}


@dataclasses.dataclass
class Cluster:
    """A connected ``distributed.Client`` and the address it was given."""

    address: str
    client: Any

    @classmethod
    def connect(cls, address: str, timeout_s: float = 10.0) -> Cluster:
        """Connect to the scheduler at ``address``, or raise :class:`ClusterError` saying why (no traceback
        needed: the message names the address and what to check)."""
        try:
            import distributed
        except ModuleNotFoundError:
            raise ClusterError(
                f"dask: running jobs on the cluster at {address} needs the distributed package, which is not "
                "installed: pip install './api[dask]' (or 'dask[distributed]')"
            ) from None
        from distributed.comm.addressing import get_address_host_port

        try:  # before a Client exists: a Client that never connected hangs in its finaliser
            get_address_host_port(address)
        except (ValueError, TypeError) as e:
            raise ClusterError(
                f"dask: {address!r} is not a scheduler address ({_why(e)}); expected e.g. tcp://host:8786"
            ) from None
        # The client is made in a thread of its own: a port that accepts connections but is no scheduler (its
        # dashboard's, say) never finishes the handshake, whatever the client's own timeout.
        made: dict[str, Any] = {}

        def attempt() -> None:
            try:
                made["client"] = distributed.Client(address, timeout=timeout_s, set_as_default=False)  # type: ignore[no-untyped-call]
            except BaseException as e:  # handed to the caller's thread
                made["error"] = e

        thread = threading.Thread(target=attempt, name="kvwire-dask-connect", daemon=True)
        thread.start()
        thread.join(timeout_s + HANDSHAKE_GRACE_S)
        if thread.is_alive():
            raise ClusterError(
                f"dask: nothing at {address} answered as a Dask scheduler within {timeout_s + HANDSHAKE_GRACE_S:g} s "
                "(it accepts connections: is it the scheduler's port, 8786 by default, and not its dashboard's?); "
                "correct the address given by --dask or KVWIRE_DASK_SCHEDULER"
            )
        error = made.get("error")
        if isinstance(error, OSError | TimeoutError):
            raise ClusterError(
                f"dask: cannot reach the scheduler at {address} within {timeout_s:g} s ({_why(error)}); start it "
                "(`dask scheduler`) or correct the address given by --dask or KVWIRE_DASK_SCHEDULER"
            )
        if isinstance(error, ValueError | TypeError):
            raise ClusterError(
                f"dask: {address!r} is not a scheduler address ({_why(error)}); expected e.g. tcp://host:8786"
            )
        if error is not None:
            raise error
        client = made["client"]
        return cls(address=address, client=client)

    def executor(self) -> Executor:
        """An executor for one job: its tasks have keys of their own (``pure=False``)."""
        ex: Executor = self.client.get_executor(pure=False)
        return ex

    def describe(self) -> ExecutorDict:
        """The cluster as the status documents show it: its scheduler, workers and threads (from the client's
        cache: no network call)."""
        identity = getattr(self.client, "_scheduler_identity", None) or {}
        workers = identity.get("n_workers")
        if workers is None:
            workers = len(identity.get("workers") or {})
        threads = identity.get("total_threads")
        if threads is None:
            threads = sum(int(w.get("nthreads", 0)) for w in (identity.get("workers") or {}).values())
        return {"kind": "dask", "scheduler": self.address, "workers": int(workers), "threads": int(threads)}

    def close(self) -> None:
        with contextlib.suppress(Exception):  # a scheduler gone meanwhile: nothing left to close
            self.client.close(timeout=5)


def _why(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


__all__ = ["Cluster", "ClusterError", "thread_executor"]

"""The limiter of synchronous work: a fixed pool of simulation threads and a bounded waiting line.

The event loop never runs a simulation: :meth:`SimSlots.run` hands it to one of ``threads`` worker threads
(the Rust core releases the GIL, so they run in parallel) and awaits it. At most ``queue`` more calls may wait
for a thread; past that :class:`Overloaded` is raised at once (the service answers 503 with ``Retry-After``)
instead of piling work up. A call that waits longer than its timeout raises :class:`TimedOut`; if it had not
started it is withdrawn, and if it had, its ``cancel`` event is set (a simulation given that event stops within
milliseconds, ``kvwire.simulate(..., cancel=)``) and its thread keeps its slot until it returns, so the pool
never runs more than ``threads`` simulations at once. A client that goes away cancels its call the same way.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


class Overloaded(Exception):
    """Every simulation thread is busy and the waiting line is full."""

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(f"the service is at capacity; retry in {retry_after_s} s")
        self.retry_after_s = retry_after_s


class TimedOut(Exception):
    """A synchronous call did not finish within its time limit."""

    def __init__(self, timeout_s: float) -> None:
        super().__init__(f"did not finish within {timeout_s:g} s")
        self.timeout_s = timeout_s


class SimSlots:
    """``threads`` worker threads plus a waiting line of ``queue`` calls (asyncio)."""

    def __init__(self, threads: int, queue: int) -> None:
        self.threads = threads
        self.queue = queue
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kvwire-sim")
        self._lock = threading.Lock()
        self._pending = 0  # submitted and not finished (running + waiting)
        self._running = 0
        self.rejected = 0

    @property
    def running(self) -> int:
        return self._running

    @property
    def waiting(self) -> int:
        return max(0, self._pending - self._running)

    def _track(self, fn: Callable[[], T]) -> T:
        with self._lock:
            self._running += 1
        try:
            return fn()
        finally:
            with self._lock:
                self._running -= 1

    def _finished(self, _: Future[Any]) -> None:
        with self._lock:
            self._pending -= 1

    async def run(self, fn: Callable[[], T], timeout_s: float, *, cancel: threading.Event | None = None) -> T:
        """Run ``fn()`` on a simulation thread and return its result (or raise its exception). ``cancel`` is set
        when the call times out or its client goes away (``fn`` should pass it to ``kvwire.simulate``).

        Raises:
            Overloaded: no thread is free and the waiting line is full.
            TimedOut: ``fn`` did not finish within ``timeout_s`` (waiting included).
        """
        with self._lock:
            if self._pending >= self.threads + self.queue:
                self.rejected += 1
                raise Overloaded(retry_after_s=1)
            self._pending += 1
        try:
            cfut = self._pool.submit(self._track, fn)
        except BaseException:
            with self._lock:
                self._pending -= 1
            raise
        cfut.add_done_callback(self._finished)
        afut = asyncio.wrap_future(cfut)
        afut.add_done_callback(_retrieve)  # an abandoned call's exception is not an "unretrieved" error
        try:
            return await asyncio.wait_for(asyncio.shield(afut), timeout_s)
        except TimeoutError:
            self._stop(cfut, cancel)
            raise TimedOut(timeout_s) from None
        except asyncio.CancelledError:  # the client went away
            self._stop(cfut, cancel)
            raise

    @staticmethod
    def _stop(cfut: Future[Any], cancel: threading.Event | None) -> None:
        """Withdraw a call that has not started; ask a running one to stop (it keeps its thread until then)."""
        cfut.cancel()
        if cancel is not None:
            cancel.set()

    def shutdown(self) -> None:
        """Withdraw waiting calls and let running ones finish in the background."""
        self._pool.shutdown(wait=False, cancel_futures=True)


def _retrieve(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()


__all__ = ["Overloaded", "SimSlots", "TimedOut"]

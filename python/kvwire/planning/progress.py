"""Progress bars for sweeps and searches (``rich``): points done, rate, time elapsed and left.

A bar is a context manager whose value is a ``progress(done, total)`` callable, the shape
:func:`kvwire.sweep` and :func:`kvwire.capacity` take. It draws only on a terminal or in a notebook, and is a
no-op elsewhere (logs, pipes, CI).

>>> from kvwire.progress import progress_bar
>>> with progress_bar("points", enabled=False) as update:
...     update(3, 10)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

ProgressFn = Callable[[int, int], None]


def _noop(done: int, total: int) -> None:
    """Ignore progress."""


@contextmanager
def progress_bar(description: str = "points", *, enabled: bool | None = None) -> Iterator[ProgressFn]:
    """A rich progress bar on standard error; ``enabled=None`` draws it only on a terminal or in Jupyter.

    Args:
        description: the label in front of the bar.
        enabled: force the bar on or off.
    """
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    console = Console(stderr=True)
    if enabled is None:
        enabled = console.is_terminal or console.is_jupyter
    if not enabled:
        yield _noop
        return
    with Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    ) as bar:
        task = bar.add_task(description, total=None, rate="")
        start: list[float] = []

        def update(done: int, total: int) -> None:
            now = bar.get_time()
            if not start:
                start.extend((now, float(done)))
            elapsed = now - start[0]
            rate = (done - start[1]) / elapsed if elapsed > 0 else 0.0
            bar.update(task, completed=done, total=total, rate=f"{rate:6.1f}/s")

        yield update


__all__ = ["ProgressFn", "progress_bar"]

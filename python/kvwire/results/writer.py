"""Write a run's per-request table to a file as its rows arrive (``kvwire.simulate(..., out=PATH)``).

A run that does not keep its table hands the writer each batch of finished rows (the core's columns, in
request-id order); the writer turns a batch into the same Polars rows as ``SimResult.requests`` and appends it
— one Parquet row group per batch (``pyarrow``'s ``ParquetWriter``), or CSV lines — so the table is never held
whole. The file is written under a temporary name beside the target and renamed once complete; a failed run
leaves no file.

>>> import tempfile, pathlib, numpy as np, polars as pl
>>> path = pathlib.Path(tempfile.mkdtemp()) / "rows.csv"
>>> w = RowWriter(path)
>>> cols = {"id": np.array([0], dtype=np.uint64), "arrival_s": np.array([0.5]), "prompt_tokens": np.array([9]),
...         "output_tokens": np.array([1]), "rejected": np.array([False]), "measured": np.array([True]),
...         "over_context": np.array([False]), "local_decode": np.array([False]),
...         "prefill_instance": np.array([0], dtype=np.int32), "decode_instance": np.array([-1], dtype=np.int32),
...         **{c: np.array([np.nan]) for c in ("kv_start_s", "kv_ready_s", "decode_start_s")},
...         "prefill_start_s": np.array([0.5]), "first_token_s": np.array([0.6]), "finish_s": np.array([0.6])}
>>> w(cols)
>>> w.close() == path, pl.read_csv(path)["ttft_s"].round(9).to_list()
(True, [0.1])
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from kvwire.errors import ScenarioError
from kvwire.results.summary import requests_frame

_SUFFIXES = (".parquet", ".csv")


class RowWriter:
    """Appends batches of finished rows to ``path`` (``.parquet`` or ``.csv``); :meth:`close` completes it."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(os.path.abspath(path))
        suffix = self.path.suffix.lower()
        if suffix not in _SUFFIXES:
            raise ScenarioError(f"out: the file name must end in .parquet or .csv, got {self.path.name!r}", "out")
        if not self.path.parent.is_dir():
            raise ScenarioError(f"out: the directory {self.path.parent} does not exist", "out")
        self._csv = suffix == ".csv"
        self._tmp = self.path.with_name(f".{self.path.name}.tmp")
        self._writer: Any = None
        self._file: Any = None
        self.rows = 0

    def require_streaming(self) -> None:
        """Check, before a run that keeps no table, that batches can be appended (Parquet needs pyarrow)."""
        if self._csv:
            return
        try:
            import pyarrow.parquet  # type: ignore[import-untyped]  # noqa: F401
        except ImportError:
            raise ScenarioError(
                "out: writing Parquet as rows finish needs pyarrow: pip install 'kvwire[stream]' (or write .csv)",
                "out",
            ) from None

    def _failed(self, e: Exception) -> ScenarioError:
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        return ScenarioError(f"out: cannot write {self.path}: {why}", "out")

    def whole(self, df: pl.DataFrame) -> None:
        """Write a whole table at once (a run that kept it); on failure (a full disk: Polars reports it as a
        ``ComputeError`` for Parquet) the partial file is removed and a :class:`ScenarioError` names ``out``."""
        try:
            if self._csv:
                df.write_csv(self._tmp)
            else:
                df.write_parquet(self._tmp)
        except (OSError, pl.exceptions.PolarsError) as e:
            self._tmp.unlink(missing_ok=True)
            raise self._failed(e) from None
        self.rows = df.height
        self._file = "whole"

    def __call__(self, columns: Mapping[str, np.ndarray]) -> None:
        """Append one batch of rows (the core's columns)."""
        df = requests_frame(dict(columns))
        try:
            if self._csv:
                if self._file is None:
                    self._file = self._tmp.open("wb")
                    df.write_csv(self._file, include_header=True)
                else:
                    df.write_csv(self._file, include_header=False)
            else:
                import pyarrow.parquet as pq

                table = df.to_arrow()
                if self._writer is None:
                    self._writer = pq.ParquetWriter(self._tmp, table.schema)
                self._writer.write_table(table, row_group_size=max(1, table.num_rows))
        except (OSError, pl.exceptions.PolarsError) as e:
            raise self._failed(e) from None
        self.rows += df.height

    def _close_handles(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._file is not None and self._file != "whole":
            self._file.close()

    def close(self) -> Path:
        """Finish the file and move it to ``path``; returns ``path``."""
        if self._writer is None and self._file is None:
            raise ScenarioError("out: no rows were written", "out")
        try:
            self._close_handles()
            self._tmp.replace(self.path)
        except OSError as e:
            self._tmp.unlink(missing_ok=True)
            raise self._failed(e) from None
        return self.path

    def abort(self) -> None:
        """Drop the partial file (the run failed)."""
        try:
            self._close_handles()
        except OSError:
            pass
        finally:
            self._tmp.unlink(missing_ok=True)


__all__ = ["RowWriter"]

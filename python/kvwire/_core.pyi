"""Type stubs of the compiled core (``rust/kvwire-py``). Use the documented API in :mod:`kvwire` instead."""

import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "__version__",
    "cast",
    "catalog_json",
    "ceilings_json",
    "decode",
    "default_scenario_json",
    "dequantize",
    "echo_json",
    "error",
    "handoff_json",
    "isa",
    "layout_catalog",
    "layout_convert",
    "layout_describe",
    "layout_request_bytes",
    "layout_scale_factor",
    "placement_json",
    "quantize",
    "simulate",
    "simulate_stream",
    "step_times_json",
    "validate",
]

__version__: str

def default_scenario_json() -> str: ...
def catalog_json() -> str: ...
def validate(scenario_json: str) -> None: ...
def handoff_json(scenario_json: str, prompt_tokens: int, streaming: str) -> str: ...
def placement_json(scenario_json: str) -> str: ...
def echo_json(scenario_json: str) -> str: ...
def step_times_json(
    scenario_json: str,
    pool: str,
    phases: list[str],
    batch: list[int],
    prompt_tokens: list[int],
    context_tokens: list[int],
) -> str: ...
def ceilings_json(
    scenario_json: str,
    arrival_s: npt.NDArray[np.float64] | None = None,
    prompt_tokens: npt.NDArray[np.int64] | None = None,
    output_tokens: npt.NDArray[np.int64] | None = None,
) -> str: ...
def simulate(
    scenario_json: str,
    arrival_s: npt.NDArray[np.float64] | None = None,
    prompt_tokens: npt.NDArray[np.int64] | None = None,
    output_tokens: npt.NDArray[np.int64] | None = None,
    cancel: threading.Event | None = None,
    hash_offsets: npt.NDArray[np.int64] | None = None,
    hash_ids: npt.NDArray[np.int64] | None = None,
) -> dict[str, Any]: ...
def simulate_stream(
    scenario_json: str,
    source: Callable[[], Iterator[tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], npt.NDArray[np.int64]]]]
    | None = None,
    sink: Callable[[dict[str, npt.NDArray[Any]]], None] | None = None,
    chunk_rows: int = 65536,
    sink_rows: int = 65536,
    keep_up_to: int | None = None,
    cancel: threading.Event | None = None,
) -> dict[str, Any]: ...
def quantize(
    x: npt.NDArray[Any],
    dtype: str,
    shape: list[int],
    axis: int,
    fmt: str,
    group: int | None = None,
    scale_rule: str = "floor",
    threads: int | None = None,
    tensor_scale: float | None = None,
) -> dict[str, Any]: ...
def dequantize(
    codes: npt.NDArray[np.uint8],
    scales: npt.NDArray[Any] | None,
    zeros: npt.NDArray[np.uint16] | None,
    tensor_scale: float | None,
    group: int,
    shape: list[int],
    axis: int,
    fmt: str,
    out: npt.NDArray[np.float32],
    scale_rule: str = "floor",
    threads: int | None = None,
) -> None: ...
def cast(
    x: npt.NDArray[Any],
    dtype: str,
    element: str,
    saturate: bool,
    out: npt.NDArray[np.uint8],
    threads: int | None = None,
) -> None: ...
def decode(
    codes: npt.NDArray[np.uint8], element: str, out: npt.NDArray[np.float32], threads: int | None = None
) -> None: ...
def error(x: npt.NDArray[np.float32], x_hat: npt.NDArray[np.float32]) -> dict[str, float | int]: ...
def isa() -> str: ...

_LayoutSpec = tuple[str, str, int, int, int, int]

def layout_describe(spec: _LayoutSpec) -> dict[str, Any]: ...
def layout_request_bytes(spec: _LayoutSpec, tokens: int) -> int: ...
def layout_catalog() -> list[dict[str, Any]]: ...
def layout_scale_factor(src: str, dst: str) -> float | None: ...
def layout_convert(
    src: list[npt.NDArray[np.uint8]],
    src_spec: _LayoutSpec,
    dst: list[npt.NDArray[np.uint8]],
    dst_spec: _LayoutSpec,
    tokens: int | None = None,
    src_block_table: npt.NDArray[np.int32] | None = None,
    src_slot_mapping: npt.NDArray[np.int64] | None = None,
    dst_block_table: npt.NDArray[np.int32] | None = None,
    dst_slot_mapping: npt.NDArray[np.int64] | None = None,
    src_heads: tuple[int, int] | None = None,
    dst_heads: tuple[int, int] | None = None,
    scales: npt.NDArray[np.float32] | None = None,
    threads: int | None = None,
) -> int: ...

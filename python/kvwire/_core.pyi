"""Type stubs of the compiled core (``rust/kvwire-py``). Use the documented API in :mod:`kvwire` instead."""

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["__version__", "catalog_json", "default_scenario_json", "simulate", "validate"]

__version__: str

def default_scenario_json() -> str: ...
def catalog_json() -> str: ...
def validate(scenario_json: str) -> None: ...
def simulate(
    scenario_json: str,
    arrival_s: npt.NDArray[np.float64] | None = None,
    prompt_tokens: npt.NDArray[np.int64] | None = None,
    output_tokens: npt.NDArray[np.int64] | None = None,
) -> dict[str, Any]: ...

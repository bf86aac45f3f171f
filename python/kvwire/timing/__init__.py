"""Where step times come from: ``cost.timing`` in a scenario (``docs/concepts/timing.md``).

``{"source": "roofline"}`` (the default) is the cost model the core computes; ``{"source": "aiconfigurator",
"system": "h100_sxm", "backend": "vllm"}`` reads NVIDIA's measured kernel database (the ``aiconfigurator-core``
package, ``pip install 'kvwire[measured]'``): kvwire asks it for a step time at every point of a grid of step
shapes per pool, caches the grid on disk (:mod:`kvwire.timing.cache`) and hands it to the core, which
interpolates (:mod:`kvwire.timing.grid`); ``{"source": "calibrated", "file": "my-h100.json"}`` puts the device
fitted by ``kvwire calibrate`` (:mod:`kvwire.timing.calibration`) in the pools. :func:`resolve_timing` does
this when a scenario becomes the core's JSON.

>>> from kvwire.timing import resolve_timing
>>> resolve_timing({"cost": {"timing": {"source": "roofline"}}})
{'cost': {'timing': {'source': 'roofline'}}}
"""

from kvwire.timing.resolve import SOURCES, resolve_timing

__all__ = ["SOURCES", "resolve_timing"]

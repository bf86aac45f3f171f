"""Preset figures from the spec (``simulator.md`` (a) "Link presets"), typed in by hand once and shared by the
tests that check the simulator against them."""

from __future__ import annotations

#: key: (GB/s per channel, latency µs, pJ/bit).
LINKS: dict[str, tuple[float, float, float]] = {
    "nvlink4": (450.0, 5.0, 5.0),
    "ib-ndr": (50.0, 10.0, 15.0),
    "pcie5": (64.0, 5.0, 6.0),
    "pcie4": (32.0, 5.0, 6.0),
    "eth-100g": (12.5, 20.0, 15.0),
    "eth-25g": (3.125, 20.0, 15.0),
    "cpo-optical": (200.0, 5.0, 3.0),
    "nvlink3": (300.0, 5.0, 5.0),
    "nvlink5": (900.0, 5.0, 5.0),
}

"""Hypothesis profiles. Locally, property tests draw new examples on every run (and keep failures in the
example database); CI runs ``HYPOTHESIS_PROFILE=ci`` (set by ``.ci/run``): the same derandomised examples on
every machine, so a landing never depends on the luck of the draw."""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

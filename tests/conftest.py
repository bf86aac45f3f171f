"""Hypothesis profiles. Locally, property tests draw new examples on every run (and keep failures in the
example database). CI (``.ci/run``) runs the suite under ``HYPOTHESIS_PROFILE=ci``: the same derandomised
examples on every machine, so a landing never depends on the luck of the draw. It then runs the property
tests alone (``pytest -m hypothesis``, the marker Hypothesis puts on every ``@given`` test) a second time under
``HYPOTHESIS_PROFILE=ci-random`` with a fresh ``--hypothesis-seed`` that it prints, so examples the
derandomised run never draws are tried too, and a failure there is reproduced exactly with that seed::

    HYPOTHESIS_PROFILE=ci-random pytest -m hypothesis --hypothesis-seed=SEED tests

Neither profile has a deadline: tests take no wall-clock limits (a slow CI machine is not a failure). The
random profile keeps no example database (each CI run starts clean) and prints the ``@reproduce_failure``
blob of a failure; its example count bounds only tests that do not set their own (``max_examples`` in a
test's ``@settings`` wins; ``tests/test_properties.py`` reads ``KVWIRE_HYPOTHESIS_EXAMPLES``).
"""

from __future__ import annotations

import os

from hypothesis import settings

#: Examples per test under the random profile where a test sets no count of its own.
RANDOM_EXAMPLES = 100

settings.register_profile("ci", derandomize=True, database=None, print_blob=True, deadline=None)
settings.register_profile(
    "ci-random", derandomize=False, database=None, print_blob=True, deadline=None, max_examples=RANDOM_EXAMPLES
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

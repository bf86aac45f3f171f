"""Where the tests find the repository (its root, the examples) and the shared files: ``../shared`` next to the
repository root (README "Data"), never an absolute machine path. A module that imports this fails to collect,
with a message saying what is missing and where it was looked for, when the directory is not there.
"""

from __future__ import annotations

from pathlib import Path

import pytest

#: The repository root: this file is ``<repository>/tests/shared_paths.py``.
ROOT = Path(__file__).resolve().parents[1]
#: The example scenarios and scripts (``<repository>/examples``).
EXAMPLES = ROOT / "examples"
#: ``<repository>/../shared``.
SHARED = ROOT.parent / "shared"
DATA = SHARED / "data"
SPEC = SHARED / "spec"

if not (DATA.is_dir() and SPEC.is_dir()):
    pytest.fail(
        f"kvwire's tests read the shared traces and specs from ../shared next to the repository, expected at "
        f"{SHARED} (with data/ and spec/); it is missing: place (or symlink) the shared directory there",
        pytrace=False,
    )

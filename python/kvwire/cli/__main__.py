"""``python -m kvwire.cli``: the ``kvwire`` command."""

import sys

from kvwire.cli import main

sys.exit(main())

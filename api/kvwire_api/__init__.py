"""kvwire-api: kvwire as an HTTP service (Litestar).

>>> from kvwire_api import create_app
>>> from kvwire_api.config import Settings
>>> import tempfile
>>> app = create_app(Settings(data_dir=tempfile.mkdtemp()))
>>> "/v1/simulations" in {r.path for r in app.routes}
True
"""

from kvwire_api.app import create_app
from kvwire_api.version import __version__

__all__ = ["__version__", "create_app"]

"""The service package's version (one place, read by the app, ``GET /health`` and the package's ``__init__``)."""

__version__ = "0.1.0"

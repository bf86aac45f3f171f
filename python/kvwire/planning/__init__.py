"""Many runs at once, to answer a planning question: grids of scenarios (``grid``: the sweep definition and its
points; ``sweep``: running them on threads or a Dask cluster, resumable Parquet parts), the largest rate
meeting an SLO, the best prefill/decode split and colocated-vs-disaggregated comparisons (``capacity``), the
plots of runs and sweeps (``plot``), progress reporting (``progress``), and the step-time model held against
measurements: a device fitted to them (``calibrate``) and any timing source compared with them (``fidelity``),
and the best deployment of a model on a GPU budget (``plan``).
The public names are ``kvwire.sweep``, ``kvwire.capacity``, ``kvwire.best_split``, ``kvwire.compare``,
``kvwire.plot``, ``kvwire.calibrate``, ``kvwire.fidelity`` and ``kvwire.plan``.

>>> from kvwire.planning.sweep import sweep
>>> sweep is __import__("kvwire").sweep
True
"""

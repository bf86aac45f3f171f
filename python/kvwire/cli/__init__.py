"""The ``kvwire`` command line: one module per command group — ``run`` (run, scenario, presets), ``trace``
(trace-info and the trace options of ``run``), ``handoff``, ``kernels`` (layouts, quant-report), ``planning``
(sweep, capacity, best-split, compare, plot), ``plan``, ``calibration`` (calibrate, fidelity) and ``serve``.
:func:`main` is the entry point.

>>> from click.testing import CliRunner
>>> print(CliRunner().invoke(main, ["scenario", "--toml"]).output.splitlines()[0])
model = "llama3-8b"
"""

from __future__ import annotations

import click

from kvwire._core import __version__
from kvwire.cli.calibration import calibrate_cmd, fidelity_cmd
from kvwire.cli.handoff import handoff_cmd
from kvwire.cli.kernels import layouts_cmd, quant_report_cmd
from kvwire.cli.plan import plan_cmd
from kvwire.cli.planning import best_split_cmd, capacity_cmd, compare_cmd, plot_cmd, sweep_cmd
from kvwire.cli.run import presets_cmd, run_cmd, scenario_cmd, transfer_layer
from kvwire.cli.serve import serve_cmd
from kvwire.cli.trace import trace_info_cmd


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kvwire")
def main() -> None:
    """kvwire: what does moving the KV cache cost? Simulate disaggregated LLM serving."""


for _command in (
    run_cmd,
    scenario_cmd,
    presets_cmd,
    handoff_cmd,
    layouts_cmd,
    quant_report_cmd,
    sweep_cmd,
    capacity_cmd,
    best_split_cmd,
    compare_cmd,
    plan_cmd,
    plot_cmd,
    trace_info_cmd,
    calibrate_cmd,
    fidelity_cmd,
    serve_cmd,
):
    main.add_command(_command)

__all__ = ["main", "transfer_layer"]

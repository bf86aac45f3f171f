r"""Request traces into the request table the simulator takes: one module per format (``azure``, ``burstgpt``,
``mooncake``, ``table`` for kvwire's own), what they share (``source``), detecting a file's format and where a
file goes wrong (``formats``), reading (``read``), windowing and thinning (``ops``), the scenario's file form and
its options (``spec``), what a trace holds (``stats``, behind ``kvwire.trace_info``), Mooncake's block hashes
(``hashes``) and a table as the arrays the core reads (``arrays``).

>>> import tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "t.csv"
>>> _ = p.write_text("arrival_s,prompt_tokens,output_tokens\n0.0,100,10\n0.5,200,20\n")
>>> read_trace(p)["prompt_tokens"].to_list()
[100, 200]
"""

from kvwire.traces.arrays import REQUEST_COLUMNS, request_arrays
from kvwire.traces.formats import FORMATS
from kvwire.traces.ops import mean_rate_per_s, scale_time, scale_to_rate, thin, window
from kvwire.traces.read import TraceScan, read_azure_csv, read_mooncake_jsonl, read_trace, scan_trace
from kvwire.traces.spec import OPTIONS, WINDOW_OPTIONS, TraceFile

__all__ = [
    "FORMATS",
    "OPTIONS",
    "REQUEST_COLUMNS",
    "WINDOW_OPTIONS",
    "TraceFile",
    "TraceScan",
    "mean_rate_per_s",
    "read_azure_csv",
    "read_mooncake_jsonl",
    "read_trace",
    "request_arrays",
    "scale_time",
    "scale_to_rate",
    "scan_trace",
    "thin",
    "window",
]

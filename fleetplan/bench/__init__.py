"""Live measurement: a load generator for OpenAI-compatible servers, GPU power, result files.

Main entries: :class:`BenchConfig` + :func:`run` / :func:`run_sweep` (one result object per rate, in
``vllm bench serve``'s shape plus fleetplan's fields, which ``fleetplan ingest`` reads);
:func:`load_dataset` / :func:`synthetic_requests` (what to send); :func:`write_results`.
"""

from fleetplan.bench.requests import BenchRequest, load_dataset, synthetic_requests
from fleetplan.bench.result import summary_rows, write_results
from fleetplan.bench.runner import BenchConfig, BenchError, run, run_benchmark, run_sweep

__all__ = [
    "BenchConfig",
    "BenchError",
    "BenchRequest",
    "load_dataset",
    "run",
    "run_benchmark",
    "run_sweep",
    "summary_rows",
    "synthetic_requests",
    "write_results",
]

"""Measured runs as replay targets: protocol conditions, data-quality flags, predictions.

Main entries: :func:`runs_from_frame` (store rows -> :class:`MeasuredRun`, with the flags of
:func:`flag_runs`), :func:`predict_run` (replay one run's protocol on the replica model).

Protocol facts of the bundled runs (``/work/shared/data/ionet-vllm-0.8.5/README.md``), named
assumptions here: ``benchmark_serving.py --seed 42`` (so the send times are reproduced exactly),
and the rates of one configuration ran from the highest down against one running server, so a
run after the first finds its prompts in vLLM V1's prefix cache when the KV cache can hold the
previous run's working set (its prompt and output tokens). The first (highest-rate) run of a
series starts cold.

Data quality: a work-conserving server's TTFT does not fall as its load rises. A run whose TTFT
p50 is more than :data:`FLAG_RATIO` times that of a higher-rate run of the same configuration
(e.g. 2xRTX-4090 at 1 req/s: seconds, at 4-16 req/s: 0.2 s) is flagged with the reason; flagged
runs are kept and reported, never used to fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache

import pandas as pd

from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.catalog.models import get_model
from fleetplan.replica.params import ReplicaParams
from fleetplan.replica.priors import kv_capacity_tokens
from fleetplan.replica.protocol import replay
from fleetplan.workload.lengths import LengthModel

VLLM_BENCHMARK_SEED = 42
FLAG_RATIO = 1.25
FIT_METRICS = ("request_throughput", "output_throughput", "ttft_mean_ms", "ttft_p50_ms",
               "ttft_p90_ms", "ttft_p99_ms", "tpot_p50_ms", "itl_p50_ms")
VALIDATED_METRICS = ("request_throughput", "output_throughput", "ttft_mean_ms", "ttft_p50_ms",
                     "ttft_p90_ms", "ttft_p99_ms", "tpot_p50_ms")


@dataclass(frozen=True)
class MeasuredRun:
    """One measured run: its protocol, its measured metrics, and its data-quality flag."""

    run_id: str
    model: str
    config: str
    gpu: str
    gpu_count: int
    request_rate: float
    num_prompts: int
    burstiness: float
    total_input_tokens: int
    total_output_tokens: int
    series_max_rate: float
    measured: dict[str, float] = field(default_factory=dict)
    flagged: bool = False
    flag_reason: str | None = None
    source: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.model, self.config)

    def warm_cache(self) -> bool:
        """Whether this run's prompts are in the prefix cache (see module docstring). The
        server's cache size is vLLM's memory arithmetic for the configuration (a fact of the
        real server, not the fitted effective capacity, so the rule cannot flip during a fit)."""
        working_set = self.total_input_tokens + self.total_output_tokens
        return self.request_rate < self.series_max_rate and (
            server_kv_tokens(self.model, self.config) >= working_set)


@cache
def server_kv_tokens(model: str, config: str) -> int:
    """KV-cache tokens vLLM allocates for ``model`` on ``config`` (first principles)."""
    return kv_capacity_tokens(get_model(model), HardwareConfig.parse(config))


def flag_runs(frame: pd.DataFrame, ratio: float = FLAG_RATIO) -> dict[str, str]:
    """run_id -> reason, for runs inconsistent with any work-conserving server."""
    out: dict[str, str] = {}
    for (_m, _c), g in frame.groupby(["model", "config"], sort=True):
        by_rate = g.groupby("request_rate")["ttft_p50_ms"].median().sort_index()
        rates = list(by_rate.index)
        for i, r in enumerate(rates):
            higher = by_rate.iloc[i + 1:]
            if higher.empty:
                continue
            lo_rate = float(higher.index.to_numpy(dtype=float)[higher.to_numpy().argmin()])
            lo = float(higher.min())
            here = float(by_rate.iloc[i])
            if here > ratio * lo:
                reason = (f"TTFT p50 {here:.0f} ms at {r:g} req/s is {here / lo:.1f}x the "
                          f"{lo:.0f} ms at {lo_rate:g} req/s: a work-conserving server's TTFT "
                          f"does not fall as load rises (tolerance {ratio:g}x)")
                for rid in g.loc[g["request_rate"] == r, "run_id"]:
                    out[str(rid)] = reason
    return out


def runs_from_frame(frame: pd.DataFrame, *, flags: dict[str, str] | None = None,
                    series: pd.DataFrame | None = None) -> list[MeasuredRun]:
    """Typed runs from store rows, flagged by :func:`flag_runs` over ``series`` (default: the
    same rows; pass the whole store when ``frame`` holds new runs to judge against it)."""
    ref = frame if series is None else series
    fl = flag_runs(ref) if flags is None else flags
    max_rate = ref.groupby(["model", "config"])["request_rate"].max().to_dict()
    out = []
    for rec in frame.to_dict("records"):
        key = (str(rec["model"]), str(rec["config"]))
        meas = {m: float(rec[m]) for m in FIT_METRICS if m in rec and pd.notna(rec[m])}
        rid = str(rec["run_id"])
        out.append(MeasuredRun(
            run_id=rid, model=key[0], config=key[1], gpu=str(rec["gpu"]),
            gpu_count=int(rec["gpu_count"]), request_rate=float(rec["request_rate"]),
            num_prompts=int(rec["num_prompts"]), burstiness=float(rec["burstiness"]),
            total_input_tokens=int(rec["total_input_tokens"]),
            total_output_tokens=int(rec["total_output_tokens"]),
            series_max_rate=float(max_rate.get(key, rec["request_rate"])), measured=meas,
            flagged=rid in fl, flag_reason=fl.get(rid),
            source=f"{rec['source_file']}:{rec['source_line']}",
        ))
    return out


def predict_run(params: ReplicaParams, run: MeasuredRun, *, lengths: LengthModel | None = None,
                seeds: Sequence[int] = (0, 1, 2), warm: bool | None = None) -> dict[str, float]:
    """Replay ``run``'s protocol (exact send times, its token totals, its cache state;
    ``warm`` overrides the cache rule of :meth:`MeasuredRun.warm_cache`)."""
    res = replay(params, rate=run.request_rate, num_prompts=run.num_prompts,
                 burstiness=run.burstiness, lengths=lengths, seeds=seeds,
                 arrival_seed=VLLM_BENCHMARK_SEED,
                 totals=(run.total_input_tokens, run.total_output_tokens),
                 warm_prefix_cache=run.warm_cache() if warm is None else warm)
    return {k: v.mean for k, v in res.metrics.items()}

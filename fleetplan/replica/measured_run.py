"""The record of one measured run: its protocol, its measured metrics and its data-quality flag.

Main entry: :class:`MeasuredRun`; :mod:`fleetplan.replica.runs` builds them from the profile
store and replays them, :mod:`fleetplan.replica.burst_tail` learns from their durations.
:func:`server_kv_tokens` is the server's KV capacity by vLLM's memory arithmetic (the prefix
cache a run's replay starts from).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache

from fleetplan.catalog.catalog import Catalog, bundled_catalog
from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.profiles.server import ServerDescription
from fleetplan.replica.priors import kv_capacity_tokens, server_limits


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
    duration_s: float = math.nan
    pinned_outputs: tuple[tuple[int, int], ...] = ()  # (request index, output tokens)
    engine_version: str | None = None  # the vLLM version the run recorded (spec-path prior)
    excluded: tuple[tuple[str, str], ...] = ()  # (metric, why) measured but not believed
    # (prompt, reply) tokens per request in send order, when the run recorded them
    request_lengths: tuple[tuple[int, ...], tuple[int, ...]] | None = None
    # the server it was measured on as recorded at ingest (engine settings, prefix cache:
    # fleetplan.replica.runs.recorded_server); None: a study run, on its series protocol
    server: ServerDescription | None = None
    # the client's cap on requests in flight (vLLM's --max-concurrency), None: no cap
    max_concurrency: int | None = None
    # the prompts' dataset as recorded (sharegpt, random, ...), None: not recorded
    dataset: str | None = None


    @property
    def key(self) -> tuple[str, str]:
        return (self.model, self.config)

    def warm_cache(self) -> bool:
        """The earlier all-or-nothing rule: the prompts are cached when the run is below its
        series' highest rate and the server's KV cache (vLLM's memory arithmetic) holds the
        run's prompt and output tokens. Kept for callers; replays use the LRU state of
        :mod:`fleetplan.replica.prefix_cache`, which agrees with it on the bundled store."""
        working_set = self.total_input_tokens + self.total_output_tokens
        return self.request_rate < self.series_max_rate and (
            server_kv_tokens(self.model, self.config) >= working_set)


@cache
def server_kv_tokens(model: str, config: str, catalog: Catalog | None = None) -> int:
    """KV-cache tokens vLLM allocates for ``model`` on ``config`` (first principles, with the
    engine limits of :data:`~fleetplan.replica.priors.DEFAULT_ENGINE_VERSION`; names of
    ``catalog``, default: the bundled one)."""
    cat = catalog if catalog is not None else bundled_catalog()
    spec, hw = cat.model(model), HardwareConfig.parse(config, cat)
    seqs, batched, _block, util, _note = server_limits(spec, hw)
    return kv_capacity_tokens(spec, hw, gpu_memory_utilization=util,
                              max_num_batched_tokens=batched, max_num_seqs=seqs)

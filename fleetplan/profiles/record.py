"""The typed record of one measured serving run (:class:`BenchmarkRun`).

Its fields are exactly the store's columns (:mod:`fleetplan.profiles.schema`; a test keeps the
two in step), so a record and a store row convert losslessly. Numbers are bounded (counts
0..1e12, GPUs 1..1024, numbers finite, >= 0 and <= 1e12; only ``request_rate`` may be
``inf``); unknown fields are refused.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from fleetplan.profiles.request_lengths import MAX_CELL_CHARS, check_cell
from fleetplan.profiles.schema import INF_ALLOWED
from fleetplan.profiles.vllm import MAX_COUNT, MAX_GPUS, MAX_NUMBER


class BenchmarkRun(BaseModel):
    """One measured serving run: model, hardware, protocol, results (one store row)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=True)

    run_id: str = Field(min_length=1, max_length=500)
    model: str = Field(min_length=1, max_length=500)
    model_id: str = Field(min_length=1, max_length=500)
    gpu: str = Field(min_length=1, max_length=500)
    gpu_count: int = Field(ge=1, le=MAX_GPUS)
    tp_size: int = Field(ge=1, le=MAX_GPUS)
    config: str = Field(min_length=1, max_length=500)
    engine: str = Field(min_length=1, max_length=500)
    engine_version: str | None = Field(default=None, max_length=500)
    date: str | None = Field(default=None, max_length=500)
    source_format: str = Field(min_length=1, max_length=500)
    source_file: str = Field(min_length=1, max_length=500)
    source_line: int = Field(ge=1, le=MAX_COUNT)
    num_prompts: int = Field(ge=1, le=MAX_COUNT)
    request_rate: float = Field(gt=0)
    burstiness: float = Field(gt=0)
    max_concurrency: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    dataset: str | None = Field(default=None, max_length=500)
    duration_s: float = Field(ge=0)
    completed: int = Field(ge=0, le=MAX_COUNT)
    failed: int = Field(ge=0, le=MAX_COUNT)
    total_input_tokens: int = Field(ge=0, le=MAX_COUNT)
    total_output_tokens: int = Field(ge=0, le=MAX_COUNT)
    request_throughput: float = Field(ge=0)
    request_goodput: float | None = Field(default=None, ge=0)
    output_throughput: float = Field(ge=0)
    total_token_throughput: float = Field(ge=0)
    ttft_mean_ms: float = Field(ge=0)
    ttft_std_ms: float | None = Field(default=None, ge=0)
    ttft_p50_ms: float = Field(ge=0)
    ttft_p90_ms: float | None = Field(default=None, ge=0)
    ttft_p95_ms: float | None = Field(default=None, ge=0)
    ttft_p99_ms: float = Field(ge=0)
    ttft_p100_ms: float | None = Field(default=None, ge=0)
    tpot_mean_ms: float = Field(ge=0)
    tpot_std_ms: float | None = Field(default=None, ge=0)
    tpot_p50_ms: float = Field(ge=0)
    tpot_p90_ms: float | None = Field(default=None, ge=0)
    tpot_p95_ms: float | None = Field(default=None, ge=0)
    tpot_p99_ms: float = Field(ge=0)
    tpot_p100_ms: float | None = Field(default=None, ge=0)
    itl_mean_ms: float = Field(ge=0)
    itl_std_ms: float | None = Field(default=None, ge=0)
    itl_p50_ms: float = Field(ge=0)
    itl_p90_ms: float | None = Field(default=None, ge=0)
    itl_p95_ms: float | None = Field(default=None, ge=0)
    itl_p99_ms: float = Field(ge=0)
    itl_p100_ms: float | None = Field(default=None, ge=0)
    e2e_mean_ms: float | None = Field(default=None, ge=0)
    e2e_std_ms: float | None = Field(default=None, ge=0)
    e2e_p50_ms: float | None = Field(default=None, ge=0)
    e2e_p90_ms: float | None = Field(default=None, ge=0)
    e2e_p95_ms: float | None = Field(default=None, ge=0)
    e2e_p99_ms: float | None = Field(default=None, ge=0)
    e2e_p100_ms: float | None = Field(default=None, ge=0)
    gpu_energy_j: float | None = Field(default=None, ge=0)
    gpu_avg_power_w: float | None = Field(default=None, ge=0)
    partial: bool = False
    input_lens: str | None = Field(default=None, max_length=MAX_CELL_CHARS)
    output_lens: str | None = Field(default=None, max_length=MAX_CELL_CHARS)
    engine_args: str | None = Field(default=None, max_length=2000)
    prefix_cache: str | None = Field(default=None, pattern="^(cold|warm)$")

    @field_validator("*", mode="after")
    @classmethod
    def _finite(cls, v: Any, info: ValidationInfo) -> Any:
        if isinstance(v, float) and (
            math.isnan(v) or (math.isinf(v) and info.field_name not in INF_ALLOWED)
        ):
            raise ValueError(f"{v!r} is not a finite number")
        if isinstance(v, float) and math.isfinite(v) and abs(v) > MAX_NUMBER:
            raise ValueError(f"{v!r} is out of range (at most {MAX_NUMBER:g})")
        return v

    @field_validator("input_lens", "output_lens", mode="after")
    @classmethod
    def _lens(cls, v: str | None) -> str | None:
        return v if v is None else check_cell(v, least=1)

    @model_validator(mode="after")
    def _counts_add_up(self) -> BenchmarkRun:
        if self.completed + self.failed > self.num_prompts:
            raise ValueError(f"completed + failed = {self.completed + self.failed} exceeds "
                             f"num_prompts = {self.num_prompts}")
        if self.tp_size > self.gpu_count:
            raise ValueError(f"tp_size {self.tp_size} exceeds gpu_count {self.gpu_count}")
        if (self.input_lens is None) != (self.output_lens is None):
            raise ValueError("input_lens and output_lens: give both or neither")
        if self.input_lens is not None and self.output_lens is not None:
            n_in, n_out = self.input_lens.count(" ") + 1, self.output_lens.count(" ") + 1
            if not n_in == n_out == self.num_prompts:
                raise ValueError(f"input_lens has {n_in} and output_lens {n_out} entries; "
                                 f"need one per request sent (num_prompts = {self.num_prompts})")
        return self

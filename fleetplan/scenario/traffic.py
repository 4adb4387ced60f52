"""What a scenario serves: traffic classes, their arrivals, lengths and latency objectives.

:class:`TrafficClass`: one class of requests. Its arrival process is one member of the registry
in :mod:`fleetplan.workload.arrivals` (``arrivals: {process: gamma, rate_rps: 4}``), or one of
the shorthands that stand for the built-in members: ``rate_rps`` (+ ``burstiness``),
``rate_profile_rps`` (24 hourly rates), ``trace`` (a CSV file). :class:`SLO`: 99th-percentile
latency objectives. :class:`TraceSpec`: an Azure-format trace replayed by a class.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from fleetplan.scenario.base import NAME_RE, Strict
from fleetplan.workload.lengths import (
    LengthDist,
    LengthModel,
    check_max_total,
    protocol_length_model,
)


class SLO(Strict):
    """Latency objectives of a class, each a 99th percentile in milliseconds (at least one)."""

    ttft_p99_ms: float | None = Field(
        default=None, gt=0, le=3.6e6,
        description="time to first token, P99 (ms): queueing + prefill", examples=[500])
    tpot_p99_ms: float | None = Field(
        default=None, gt=0, le=3.6e6,
        description="time per output token after the first, P99 (ms)", examples=[60])
    e2e_p99_ms: float | None = Field(
        default=None, gt=0, le=3.6e7,
        description="end-to-end latency of a request, P99 (ms)", examples=[30000])

    @classmethod
    def _unknown_hint(cls) -> str:
        return "; an SLO names a metric and its percentile, e.g. ttft_p99_ms"

    @model_validator(mode="after")
    def _some(self) -> SLO:
        if self.ttft_p99_ms is None and self.tpot_p99_ms is None and self.e2e_p99_ms is None:
            raise ValueError("an SLO needs at least one of ttft_p99_ms, tpot_p99_ms, e2e_p99_ms")
        return self


class TraceSpec(Strict):
    """An Azure-format trace (``TIMESTAMP,ContextTokens,GeneratedTokens``) replayed by a class."""

    file: str = Field(min_length=1, description="CSV path, relative to the scenario file",
                      examples=["traces/azure-conv-1h.csv"])
    scale_to_rps: float | None = Field(
        default=None, gt=0, le=1e5,
        description="time-scale the trace to this mean rate (req/s); default: as recorded",
        examples=[12.0])
    loop: bool = Field(default=False, description="repeat the trace when the run is longer")


class TrafficClass(Strict):
    """One class of requests: arrivals (exactly one kind), lengths, SLO, routing hints."""

    name: str = Field(pattern=NAME_RE, max_length=64,
                      description="unique name of the class (letters, digits, `_.-`)",
                      examples=["chat"])
    rate_rps: float | None = Field(
        default=None, gt=0, le=1e5,
        description="mean arrival rate (req/s) of a stationary gamma-renewal process "
                    "(shape `burstiness`)", examples=[4.0])
    rate_profile_rps: list[float] | None = Field(
        default=None, min_length=24, max_length=24,
        description="24 hourly mean rates (req/s), hour 0 first; non-homogeneous arrivals "
                    "(the simulation starts at `sim.start_hour`)")
    trace: TraceSpec | None = Field(
        default=None, description="replay a trace: its file path, or a trace record; the "
                                  "trace gives arrivals and lengths", examples=["trace.csv"])
    burstiness: float = Field(default=1.0, gt=0, le=100,
                              description="gamma shape of the gaps; 1.0 = Poisson, < 1 burstier")
    input_tokens: LengthDist | None = Field(
        default=None, description="prompt length distribution (tokens); default: the measured "
                                  "benchmark protocol's")
    output_tokens: LengthDist | None = Field(
        default=None, description="output length distribution (tokens); default: the measured "
                                  "benchmark protocol's")
    max_total_tokens: int | None = Field(default=None, ge=2,
                                         description="prompt + output cap of drawn requests")
    slo: SLO | None = Field(default=None,
                            description="latency objectives; none: the class is served best-effort")
    prefix_cache_hit: float = Field(
        default=0.0, ge=0, le=1, allow_inf_nan=False,
        description="assumption you state: the share of each request's prompt tokens already in "
                    "vLLM's prefix cache when it arrives (shared system prompts, chat history); "
                    "0 = fresh prompts, 1.0 = the measured benchmark's repeated prompts. Cached "
                    "tokens skip prefill (whole KV blocks; the last prompt token is always "
                    "recomputed)")
    overlong: Literal["error", "drop"] = Field(
        default="error", description="requests longer than the context window: error or drop")
    pin: list[str] | None = Field(
        default=None, min_length=1,
        description="slo-aware routing: only these pools (config or config@region)",
        examples=[["1xH100-PCIe@EU27"]])
    split: dict[str, float] | None = Field(
        default=None, description="planned routing: share of this class per pool (config or "
                                  "config@region); shares sum to 1",
        examples=[{"1xH100-PCIe": 0.25, "2xRTX-4090": 0.75}])

    @field_validator("trace", mode="before")
    @classmethod
    def _trace_str(cls, v: Any) -> Any:
        return {"file": v} if isinstance(v, str) else v

    @field_validator("rate_profile_rps")
    @classmethod
    def _profile(cls, v: list[float] | None) -> list[float] | None:
        if v is None:
            return v
        for h, r in enumerate(v):
            if not (math.isfinite(r) and r >= 0):
                raise ValueError(f"hour {h}: {r!r} must be a finite rate >= 0")
        if not any(r > 0 for r in v):
            raise ValueError("at least one hourly rate must be > 0")
        return v

    @field_validator("max_total_tokens")
    @classmethod
    def _cap(cls, v: int | None, info: Any) -> int | None:
        check_max_total(info.data.get("input_tokens"), info.data.get("output_tokens"), v)
        return v

    @field_validator("split")
    @classmethod
    def _split(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        if v is None:
            return v
        for k, s in v.items():
            if not (math.isfinite(s) and 0 <= s <= 1):
                raise ValueError(f"share {k}={s!r} must be within [0, 1]")
        total = sum(v.values())
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"shares sum to {total:.6g}, not 1")
        return v

    @model_validator(mode="after")
    def _one_arrival_kind(self) -> TrafficClass:
        kinds = ("rate_rps", "rate_profile_rps", "trace")
        given = [k for k in kinds if getattr(self, k) is not None]
        if len(given) != 1:
            got = " and ".join(given) if given else "none"
            raise ValueError(f"give exactly one of rate_rps, rate_profile_rps or trace (got {got})")
        if self.trace is not None:
            for k in ("burstiness", "input_tokens", "output_tokens", "max_total_tokens"):
                if k in self.model_fields_set:
                    raise ValueError(f"{k} does not apply to a trace class (the trace gives it)")
        return self

    @property
    def arrival_kind(self) -> Literal["rate", "profile", "trace"]:
        if self.rate_rps is not None:
            return "rate"
        return "profile" if self.rate_profile_rps is not None else "trace"

    def length_model(self) -> LengthModel:
        """Lengths of drawn requests; a missing side takes the measured protocol's distribution."""
        proto = protocol_length_model()
        if self.input_tokens is None and self.output_tokens is None:
            if self.max_total_tokens is None:
                return proto
            return proto.with_max_total(self.max_total_tokens)
        return LengthModel(
            input=self.input_tokens or proto.input, output=self.output_tokens or proto.output,
            max_total=self.max_total_tokens,
            source="scenario class " + self.name + (
                "" if self.input_tokens and self.output_tokens else " (other side: protocol)"))

    def mean_rate_rps(self) -> float | None:
        """Mean offered rate when the scenario states it (trace classes: ``None`` unless scaled)."""
        if self.rate_rps is not None:
            return self.rate_rps
        if self.rate_profile_rps is not None:
            return sum(self.rate_profile_rps) / 24.0
        assert self.trace is not None
        return self.trace.scale_to_rps

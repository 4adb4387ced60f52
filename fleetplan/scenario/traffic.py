"""What a scenario serves: traffic classes, their arrivals, lengths and latency objectives.

:class:`TrafficClass`: one class of requests. Its arrival process is one member of the registry
in :mod:`fleetplan.workload.arrivals` (``arrivals: {process: gamma, rate_rps: 4}``), or one of
the shorthands that stand for the built-in members: ``rate_rps`` (+ ``burstiness``),
``rate_profile_rps`` (24 hourly rates), ``trace`` (a CSV file). :class:`SLO`: 99th-percentile
latency objectives. :class:`TraceSpec`: an Azure-format trace replayed by a class.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from fleetplan.scenario.base import NAME_RE, Strict, catalog_of
from fleetplan.scenario.served import canon_model
from fleetplan.scenario.unions import RegistryUnion
from fleetplan.workload.arrivals import (
    ARRIVALS,
    BURSTINESS_DOC,
    MIN_BURSTINESS,
    PROFILE_DOC,
    RATE_DOC,
    TRACE_FIELDS,
    ArrivalProcess,
    GammaArrivals,
    ProfileArrivals,
    TraceArrivals,
    check_profile,
)
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
    """An Azure-format trace (`TIMESTAMP,ContextTokens,GeneratedTokens`) replayed by a class."""

    file: str = TRACE_FIELDS["file"]
    scale_to_rps: float | None = TRACE_FIELDS["scale_to_rps"]
    loop: bool = TRACE_FIELDS["loop"]


_ARRIVALS = RegistryUnion(tag="process", kind="arrival process", members=lambda: ARRIVALS,
                          shorthand=False)
_SHORTHANDS = ("rate_rps", "rate_profile_rps", "trace")


def _from_shorthand(c: TrafficClass) -> ArrivalProcess:
    """The built-in process a class's ``rate_rps`` / ``rate_profile_rps`` / ``trace`` stands for."""
    burst: dict[str, Any] = {"burstiness": c.burstiness} if "burstiness" in c.model_fields_set \
        else {}
    if c.rate_rps is not None:
        return GammaArrivals(rate_rps=c.rate_rps, **burst)
    if c.rate_profile_rps is not None:
        return ProfileArrivals(rate_profile_rps=list(c.rate_profile_rps), **burst)
    assert c.trace is not None
    return TraceArrivals(**c.trace.model_dump(exclude_unset=True))


def _to_shorthand(p: ArrivalProcess) -> dict[str, Any] | None:
    """The shorthand fields of a built-in process (``None``: a process without a shorthand)."""
    if isinstance(p, GammaArrivals | ProfileArrivals):
        burst = {"burstiness": p.burstiness} if "burstiness" in p.model_fields_set else {}
        if isinstance(p, GammaArrivals):
            return {"rate_rps": p.rate_rps, **burst}
        return {"rate_profile_rps": list(p.rate_profile_rps), **burst}
    if isinstance(p, TraceArrivals):
        return {"trace": TraceSpec(**p.model_dump(exclude_unset=True, exclude={"process"}))}
    return None


class TrafficClass(Strict):
    """One class of requests: its arrivals, lengths, SLO and routing hints.

    Arrivals: exactly one of `arrivals` (a process of the arrivals registry with its
    parameters) or a shorthand for a built-in process: `rate_rps` (+ `burstiness`) for `gamma`,
    `rate_profile_rps` (+ `burstiness`) for `profile`, `trace` for `trace`.
    """
    # Validated, a class holds both forms: ``arrivals`` always, and for a built-in process its
    # shorthand fields too (the ones written back, so copies and dumps keep that spelling).

    name: str = Field(pattern=NAME_RE, max_length=64,
                      description="unique name of the class (letters, digits, `_.-`)",
                      examples=["chat"])
    arrivals: Annotated[ArrivalProcess, _ARRIVALS] | None = Field(
        default=None,
        description="the arrival process and its parameters: `{process: NAME, ...}` with NAME "
                    "from the arrivals registry (`gamma`: `rate_rps`, `burstiness`; `profile`: "
                    "`rate_profile_rps`, `burstiness`; `trace`: `file`, `scale_to_rps`, "
                    "`loop`). Or write one shorthand instead: `rate_rps`, `rate_profile_rps` "
                    "or `trace`", examples=[{"process": "gamma", "rate_rps": 4.0,
                                               "burstiness": 0.5}])
    rate_rps: float | None = Field(default=None, gt=0, le=1e5,
                                   description=f"shorthand for a `gamma` process: {RATE_DOC}",
                                   examples=[4.0])
    rate_profile_rps: list[float] | None = Field(
        fail_fast=True, default=None, min_length=24, max_length=24,
        description=f"shorthand for a `profile` process: {PROFILE_DOC}; a plan is then made "
                    "hour by hour, and a class of one rate beside it runs at that rate every "
                    "hour")
    trace: TraceSpec | None = Field(
        default=None, description="shorthand for a `trace` process: the CSV path, or a trace "
                                  "record; the trace gives arrivals and lengths",
        examples=["trace.csv"])
    burstiness: float = Field(default=1.0, ge=MIN_BURSTINESS, le=100,
                              description=f"with `rate_rps` or `rate_profile_rps`: "
                                          f"{BURSTINESS_DOC}")
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
        fail_fast=True, default=None, min_length=1,
        description="slo-aware routing: only these pools (config or config@region)",
        examples=[["1xH100-PCIe@EU27"]])
    split: dict[str, float] | None = Field(
        fail_fast=True,
        default=None, description="planned routing: share of this class per pool (config or "
                                  "config@region); shares sum to 1",
        examples=[{"1xH100-PCIe": 0.25, "2xRTX-4090": 0.75}])

    model: str | list[str] | None = Field(
        default=None, description="the model that serves this class: a name of `models` "
        "(required when `models` lists several; default: the only model), or a list of "
        "interchangeable variants (e.g. two precisions of one model): `solve` serves the class "
        "with the one that gives the cheapest verified plan",
        examples=["Meta-Llama-3-8B-Instruct"])

    @field_validator("model")
    @classmethod
    def _model(cls, v: str | list[str] | None, info: Any) -> str | list[str] | None:
        if isinstance(v, str):
            return canon_model(v, catalog_of(info))
        if isinstance(v, list):
            return [canon_model(m, catalog_of(info)) for m in v]
        return v

    @field_validator("trace", mode="before")
    @classmethod
    def _trace_str(cls, v: Any) -> Any:
        return {"file": v} if isinstance(v, str) else v

    @field_validator("rate_profile_rps")
    @classmethod
    def _profile(cls, v: list[float] | None) -> list[float] | None:
        if v is not None:
            check_profile(v)
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
        given = [k for k in (*_SHORTHANDS, "arrivals") if getattr(self, k) is not None]
        if len(given) != 1:
            got = " and ".join(given) if given else "none"
            raise ValueError("give exactly one of rate_rps, rate_profile_rps, trace or arrivals "
                             f"(got {got})")
        proc = self.arrivals
        if proc is not None and "burstiness" in self.model_fields_set:
            raise ValueError("burstiness: with arrivals, give it inside (arrivals.burstiness)")
        proc = proc if proc is not None else _from_shorthand(self)
        if proc.draws_lengths:
            for k in ("burstiness", "input_tokens", "output_tokens", "max_total_tokens"):
                if k in self.model_fields_set:
                    raise ValueError(f"{k} does not apply to a {proc.process} class (the "
                                     f"{proc.process} gives it)")
        # the class holds both forms: the process, and a built-in's shorthand fields (the ones
        # written back, so copies and dumps keep the shorthand spelling)
        object.__setattr__(self, "arrivals", proc)
        short = _to_shorthand(proc)
        if short is not None and "arrivals" in self.model_fields_set:
            for k, v in short.items():
                object.__setattr__(self, k, v)
            object.__setattr__(self, "__pydantic_fields_set__",
                               (self.model_fields_set - {"arrivals"}) | set(short))
        return self

    @model_serializer(mode="wrap")
    def _write_shorthand(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict) and _to_shorthand(self.process) is not None:
            data.pop("arrivals", None)
        return data

    @property
    def process(self) -> ArrivalProcess:
        """The class's arrival process (always set once validated)."""
        assert self.arrivals is not None
        return self.arrivals

    @property
    def arrival_kind(self) -> str:
        """``rate``, ``profile`` or ``trace`` for the built-ins; else the process's name."""
        return {"gamma": "rate"}.get(self.process.process, self.process.process)

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
        return self.process.mean_rate_rps()

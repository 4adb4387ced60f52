"""The scenario: what traffic to serve, on which fleet, at what price and carbon (one schema).

A scenario file (YAML or JSON) names the model, the traffic classes (rate, hourly profile or
trace; lengths; SLO), the fleet to simulate, the routing policy, catalog overrides and simulation
settings, plus the optimizer's inputs (candidates, availability, budget, redundancy, carbon cap,
commitment, solver). Main entries: :class:`Scenario`, :func:`load_scenario` (file -> Scenario,
errors naming file, full field path and value), :func:`parse_fleet`
(``2x1xH100-PCIe+4x2xRTX-4090``).

Validation is strict (no coercion of ``"8"`` to 8), refuses unknown fields, and never touches the
disk: trace files are read when the scenario is simulated (:mod:`fleetplan.workload.trace`).
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from fleetplan.catalog.gpus import normalize_gpu
from fleetplan.catalog.grid import DEFAULT_REGION, load_grid
from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.catalog.models import get_model
from fleetplan.catalog.prices import DEFAULT_MARKET, markets
from fleetplan.errors import FleetplanError, InputError
from fleetplan.workload.lengths import (
    LengthDist,
    LengthModel,
    check_max_total,
    protocol_length_model,
)

_NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


class _Strict(BaseModel):
    """Base of every scenario record: strict types, unknown fields refused (with the valid ones)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _unknown_fields(cls, data: Any) -> Any:
        if isinstance(data, dict):
            valid = {f.alias or n for n, f in cls.model_fields.items()} | set(cls.model_fields)
            for key in data:
                if key not in valid:
                    shown = ", ".join(f.alias or n for n, f in cls.model_fields.items())
                    raise PydanticCustomError(
                        "unknown_field", "unknown field (valid: {valid}){hint}",
                        {"field": str(key), "valid": shown, "hint": cls._unknown_hint()},
                    )
        return data

    @classmethod
    def _unknown_hint(cls) -> str:
        return ""


def _check_region(region: str) -> str:
    if region not in load_grid():
        from fleetplan.errors import UnknownNameError

        raise ValueError(str(UnknownNameError("region", region, load_grid())))
    return region


def _canon_config(text: str) -> str:
    try:
        return HardwareConfig.parse(text).name
    except FleetplanError as exc:
        raise ValueError(str(exc)) from None
    except ValidationError as exc:
        raise ValueError(exc.errors()[0]["msg"]) from None


def _canon_gpu(name: str) -> str:
    try:
        return normalize_gpu(name)
    except FleetplanError as exc:
        raise ValueError(str(exc)) from None


# --- traffic -----------------------------------------------------------------------------------


class SLO(_Strict):
    """Latency objectives of a class, each a 99th percentile in milliseconds."""

    ttft_p99_ms: float | None = Field(default=None, gt=0, le=3.6e6)
    tpot_p99_ms: float | None = Field(default=None, gt=0, le=3.6e6)
    e2e_p99_ms: float | None = Field(default=None, gt=0, le=3.6e7)

    @classmethod
    def _unknown_hint(cls) -> str:
        return "; an SLO names a metric and its percentile, e.g. ttft_p99_ms"

    @model_validator(mode="after")
    def _some(self) -> SLO:
        if self.ttft_p99_ms is None and self.tpot_p99_ms is None and self.e2e_p99_ms is None:
            raise ValueError("an SLO needs at least one of ttft_p99_ms, tpot_p99_ms, e2e_p99_ms")
        return self


class TraceSpec(_Strict):
    """An Azure-format trace (``TIMESTAMP,ContextTokens,GeneratedTokens``) replayed by a class."""

    file: str = Field(min_length=1, description="CSV path, relative to the scenario file")
    scale_to_rps: float | None = Field(default=None, gt=0, le=1e5,
                                       description="time-scale the trace to this mean rate")
    loop: bool = Field(default=False, description="repeat the trace when the run is longer")


class TrafficClass(_Strict):
    """One class of requests: arrivals (exactly one kind), lengths, SLO, routing hints."""

    name: str = Field(pattern=_NAME_RE, max_length=64)
    rate_rps: float | None = Field(default=None, gt=0, le=1e5)
    rate_profile_rps: list[float] | None = Field(
        default=None, min_length=24, max_length=24,
        description="24 hourly mean rates (req/s), hour 0 first; non-homogeneous arrivals")
    trace: TraceSpec | None = None
    burstiness: float = Field(default=1.0, gt=0, le=100,
                              description="gamma shape of the gaps; 1.0 = Poisson")
    input_tokens: LengthDist | None = None
    output_tokens: LengthDist | None = None
    max_total_tokens: int | None = Field(default=None, ge=2,
                                         description="prompt + output cap of drawn requests")
    slo: SLO | None = None
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
        description="slo-aware routing: only these pools (config or config@region)")
    split: dict[str, float] | None = Field(
        default=None, description="planned routing: share of this class per pool")

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


# --- fleet ---------------------------------------------------------------------------------------


class Pool(_Strict):
    """``count`` replicas of one hardware configuration in one grid region."""

    config: str
    count: int = Field(ge=1, le=100_000)
    region: str = DEFAULT_REGION

    _c = field_validator("config")(classmethod(lambda cls, v: _canon_config(v)))
    _r = field_validator("region")(classmethod(lambda cls, v: _check_region(v)))

    @property
    def label(self) -> str:
        """``config@region``: how pools are named in outputs, splits and pins."""
        return f"{self.config}@{self.region}"

    @property
    def hardware(self) -> HardwareConfig:
        return HardwareConfig.parse(self.config)


_FLEET_RE = re.compile(r"^\s*(\d+)\s*[xX]\s*(\d+\s*[xX].+?)\s*(?:@\s*([A-Za-z0-9_-]+))?\s*$")


def parse_fleet(text: str) -> list[Pool]:
    """Parse a fleet spec: pools joined by ``+``, each ``<replicas>x<config>[@<region>]``.

    ``2x1xH100-PCIe+4x2xRTX-4090@FRA``: two 1xH100-PCIe replicas (region EU27) and four
    2xRTX-4090 replicas in FRA.
    """
    pools = []
    for part in text.split("+"):
        m = _FLEET_RE.match(part)
        if not m:
            raise InputError(f"--fleet {part.strip()!r}: expected <replicas>x<config>[@REGION], "
                             "e.g. 2x1xH100-PCIe or 4x2xRTX-4090@FRA, joined by +")
        data = {"config": m.group(2), "count": int(m.group(1)),
                "region": m.group(3) or DEFAULT_REGION}
        try:
            pools.append(Pool.model_validate(data))
        except ValidationError as exc:
            msg = exc.errors()[0]["msg"].removeprefix("Value error, ")
            raise InputError(f"--fleet {part.strip()!r}: {msg}") from None
    return pools


# --- optimizer inputs ----------------------------------------------------------------------------


class Embodied(_Strict):
    include: bool = Field(default=True, description="false: hardware already manufactured")
    lifetime_years: float = Field(default=4.0, gt=0, le=30)


class Candidate(_Strict):
    config: str
    regions: list[str] = Field(default_factory=lambda: [DEFAULT_REGION], min_length=1)
    max_replicas: int | None = Field(default=None, ge=0, le=100_000)

    _c = field_validator("config")(classmethod(lambda cls, v: _canon_config(v)))

    @field_validator("regions")
    @classmethod
    def _regions(cls, v: list[str]) -> list[str]:
        return list(_check_region(r) for r in v)


class CarbonCap(_Strict):
    max_g_per_mtok: float | None = Field(default=None, ge=0)
    max_kg_per_day: float | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _exactly_one(self) -> CarbonCap:
        if (self.max_g_per_mtok is None) == (self.max_kg_per_day is None):
            raise ValueError("give exactly one of max_g_per_mtok or max_kg_per_day")
        return self


class Commitment(_Strict):
    mode: Literal["per-hour", "fixed-peak", "base-plus-on-demand"] = "per-hour"
    on_demand_price_factor: float = Field(default=1.0, ge=1.0, le=10.0)


_SOLVER_ALIASES = {"cbc": "PULP_CBC_CMD", "highs": "HiGHS", "glpk": "GLPK_CMD"}


class SolverSettings(_Strict):
    name: str = "CBC"
    time_limit_s: float = Field(default=10.0, gt=0, le=86400)
    gap: float = Field(default=0.01, ge=0, le=1)

    @field_validator("name")
    @classmethod
    def _known(cls, v: str) -> str:
        import pulp

        valid = list(_SOLVER_ALIASES) + list(pulp.listSolvers())
        if v.lower() not in {n.lower() for n in valid}:
            raise ValueError(f"unknown solver {v} (valid: CBC, HiGHS, GLPK or a PuLP solver name)")
        return v


class CapacitySettings(_Strict):
    """How the optimizer measures capacities at SLO on the replica model (noise + safety).

    Read by :mod:`fleetplan.optimize.capacity`; every field is part of the capacity cache key.
    """

    duration_s: float = Field(default=300.0, gt=0, le=86400,
                              description="simulated seconds per run, before the request floor")
    warmup_s: float = Field(default=60.0, ge=0, le=3600, description="excluded from statistics")
    min_requests: int = Field(default=600, ge=50, le=10**6,
                              description="runs last long enough to see this many requests")
    seeds: int = Field(default=2, ge=1, le=32, description="independent runs per rate")
    seed: int = Field(default=0, ge=0, le=2**31, description="first seed")
    slo_margin: float = Field(default=0.05, ge=0, lt=0.5,
                              description="P99 must stay within (1 - margin) x SLO")
    start_rps: float = Field(default=1.0, gt=0, le=1e4, description="first rate of the ladder")
    step: float = Field(default=math.sqrt(2.0), gt=1.05, le=4.0,
                        description="ratio between ladder rates")
    min_rps: float = Field(default=1.0 / 32, gt=0, le=1e4, description="lowest rate tried")
    max_rps: float = Field(default=1024.0, gt=0, le=1e6, description="highest rate tried")
    refine_steps: int = Field(default=3, ge=0, le=10,
                              description="bisections between the last pass and first fail")


class SimSettings(_Strict):
    duration_s: float = Field(default=600.0, gt=0, le=8 * 86400)
    warmup_s: float = Field(default=60.0, ge=0)
    seed: int = Field(default=0, ge=0, le=2**63 - 1)
    replications: int = Field(default=1, ge=1, le=1000)
    start_hour: int = Field(default=0, ge=0, le=23,
                            description="hour of day at t=0 (for rate_profile_rps)")

    @model_validator(mode="after")
    def _warmup(self) -> SimSettings:
        if self.warmup_s >= self.duration_s:
            raise ValueError(f"warmup_s(={self.warmup_s:g}) must be < duration_s"
                             f"(={self.duration_s:g})")
        return self


# --- the scenario --------------------------------------------------------------------------------


class Scenario(_Strict):
    """A complete scenario; see the module docstring and ``fleetplan schema``."""

    model: str
    classes: list[TrafficClass] = Field(min_length=1)
    fleet: list[Pool] | None = Field(default=None, min_length=1)
    routing: str = "least-outstanding"
    context_window: int | None = Field(
        default=None, ge=2, description="served max_model_len (default: the model's, capped by "
        "what one replica's KV cache holds)")
    market: str = DEFAULT_MARKET
    prices_usd_per_gpu_hour: dict[str, Annotated[float, Field(gt=0, le=1000)]] = Field(
        default_factory=dict)
    grid_g_per_kwh: dict[str, Annotated[float, Field(ge=0, le=5000)]] = Field(
        default_factory=dict)
    power_w_per_gpu: dict[str, Annotated[float, Field(gt=0, le=5000)]] = Field(
        default_factory=dict, description="busy power per GPU (W), e.g. {H100-PCIe: 350}; "
        "default: measured in the profiles, else datasheet TDP")
    embodied: Embodied = Field(default_factory=Embodied)
    sim: SimSettings = Field(default_factory=SimSettings)
    candidates: list[Candidate] | None = Field(default=None, min_length=1)
    availability: dict[str, Any] | None = Field(
        default=None, description="max GPUs per GPU type ({H100-PCIe: 8}) or per region and "
        "type ({EU27: {H100-PCIe: 8}})")
    budget_usd_per_hour: float | None = Field(default=None, gt=0)
    redundancy: int = Field(default=0, ge=0, le=100)
    carbon: CarbonCap | None = None
    commitment: Commitment = Field(default_factory=Commitment)
    solver: SolverSettings = Field(default_factory=SolverSettings)
    capacity: CapacitySettings = Field(default_factory=CapacitySettings)

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        try:
            return get_model(v).model
        except FleetplanError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("routing")
    @classmethod
    def _routing(cls, v: str) -> str:
        from fleetplan.fleet.routing import ROUTERS

        if v not in ROUTERS:
            raise ValueError(f"unknown routing policy {v} (valid: {', '.join(sorted(ROUTERS))})")
        return v

    @field_validator("market")
    @classmethod
    def _market(cls, v: str) -> str:
        if v not in markets():
            raise ValueError(f"unknown market {v} (valid: {', '.join(markets())})")
        return v

    @field_validator("prices_usd_per_gpu_hour")
    @classmethod
    def _prices(cls, v: dict[str, float]) -> dict[str, float]:
        return {_canon_gpu(k): p for k, p in v.items()}

    @field_validator("power_w_per_gpu")
    @classmethod
    def _power(cls, v: dict[str, float]) -> dict[str, float]:
        return {_canon_gpu(k): w for k, w in v.items()}

    @field_validator("availability")
    @classmethod
    def _availability(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        if v is None:
            return v
        def count(where: str, n: Any) -> int:
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                raise ValueError(f"{where}: {n!r} must be a whole number of GPUs >= 0")
            return n

        out: dict[str, Any] = {}
        for k, cap in v.items():
            if isinstance(cap, dict):
                _check_region(k)
                out[k] = {_canon_gpu(g): count(f"{k}.{g}", n) for g, n in cap.items()}
            else:
                out[_canon_gpu(k)] = count(k, cap)
        return out

    @model_validator(mode="after")
    def _cross(self) -> Scenario:
        names = [c.name for c in self.classes]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"class names must be unique (repeated: {', '.join(dup)})")
        for i, c in enumerate(self.classes):
            if self.routing == "planned" and self.fleet is not None and c.split is None:
                raise ValueError(f"classes[{i}].split: routing planned needs a split per class")
            if self.routing == "planned" and c.pin is not None:
                raise ValueError(f"classes[{i}].pin: planned routing follows split, not pins")
            if self.fleet is not None:
                for key in (*(c.pin or ()), *(c.split or {})):
                    try:
                        match_pools(key, self.fleet)
                    except InputError as exc:
                        field = "pin" if key in (c.pin or ()) else "split"
                        raise ValueError(f"classes[{i}].{field}: {exc}") from None
        regions = {p.region for p in self.fleet or ()}
        for r in sorted(regions):
            if r not in self.grid_g_per_kwh and r not in load_grid():
                raise ValueError(f"fleet region {r} has no grid intensity")
        return self

    def with_fleet(self, fleet: Sequence[Pool]) -> Scenario:
        """A copy with another fleet (validated again: pins and splits must still match)."""
        data = self.model_dump(mode="python", by_alias=True, exclude_unset=True)
        data["fleet"] = [p.model_dump() for p in fleet]
        return _revalidate(data)

    def with_updates(self, **fields: Any) -> Scenario:
        """A validated copy with some top-level fields replaced (e.g. ``routing="planned"``)."""
        data = self.model_dump(mode="python", by_alias=True, exclude_unset=True)
        data.update({k: _dumpable(v) for k, v in fields.items()})
        return _revalidate(data)

    def class_index(self, name: str) -> int:
        for i, c in enumerate(self.classes):
            if c.name == name:
                return i
        from fleetplan.errors import UnknownNameError

        raise UnknownNameError("class", name, [c.name for c in self.classes])


def _dumpable(v: Any) -> Any:
    if isinstance(v, BaseModel):
        return v.model_dump(mode="python", by_alias=True, exclude_unset=True)
    if isinstance(v, list | tuple):
        return [_dumpable(x) for x in v]
    if isinstance(v, dict):
        return {k: _dumpable(x) for k, x in v.items()}
    return v


def _revalidate(data: dict[str, Any]) -> Scenario:
    data = _plain(data)
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise InputError(format_validation_error(exc, data, "scenario")) from None


def _plain(v: Any) -> Any:
    """Tuples to lists (strict mode wants lists for sequences read back from a dump)."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    return v


def match_pools(key: str, fleet: Sequence[Pool]) -> list[int]:
    """Indices of the pools a split/pin key names: ``config`` (any region) or ``config@region``."""
    config, _, region = key.partition("@")
    try:
        canon = HardwareConfig.parse(config).name
    except (FleetplanError, ValidationError):
        canon = config
    hits = [i for i, p in enumerate(fleet)
            if p.config == canon and (not region or p.region == region)]
    if not hits:
        labels = ", ".join(p.label for p in fleet)
        raise InputError(f"{key} names no pool of the fleet (pools: {labels})")
    return hits


# --- loading and error messages ------------------------------------------------------------------


def _path(loc: tuple[Any, ...], data: Any) -> tuple[str, Any, bool]:
    """Render a pydantic ``loc`` as ``classes[1].slo.ttft_p99_ms``; also the value found there.

    Union tags pydantic inserts (``lognormal``, ``function-after[...]``) are not keys of the
    input: walking the input alongside the loc drops them (a missing last key is kept).
    """
    out, cur, found = "", data, True
    for i, part in enumerate(loc):
        last = i == len(loc) - 1
        if isinstance(part, int) and isinstance(cur, list | tuple) and 0 <= part < len(cur):
            out += f"[{part}]"
            cur = cur[part]
        elif isinstance(cur, dict) and part in cur:
            out += f".{part}" if out else str(part)
            cur = cur[part]
        elif last and isinstance(cur, dict):
            out += f".{part}" if out else str(part)
            found = False
    return out or "(top level)", cur, found


def _show(v: Any) -> str:
    text = json.dumps(v, default=str) if isinstance(v, dict | list) else repr(v)
    return text if len(text) <= 80 else text[:77] + "..."


def format_validation_error(exc: ValidationError, data: Any, source: str) -> str:
    """One line: ``SOURCE: PATH = VALUE: MESSAGE`` for the first error (and a count of the rest)."""
    errs = exc.errors(include_url=False)
    e = errs[0]
    loc = tuple(e["loc"])
    ctx = e.get("ctx") or {}
    if e["type"] == "unknown_field":
        loc = (*loc, ctx["field"])
    path, value, found = _path(loc, data)
    msg = e["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    if e["type"] == "extra_forbidden":
        msg = "unknown field"
    if e["type"] == "missing":
        text = f"{source}: {path}: required field is missing"
    elif path == "(top level)":
        text = f"{source}: {msg}"
    elif found and not isinstance(value, dict):
        text = f"{source}: {path} = {_show(value)}: {msg}"
    else:
        text = f"{source}: {path}: {msg}"
    if len(errs) > 1:
        text += f" (and {len(errs) - 1} more error(s))"
    return text


def _resolve_traces(data: Any, base: Path) -> Any:
    """Trace paths relative to the scenario file's folder (a path operation, no disk access)."""
    if not isinstance(data, dict) or not isinstance(data.get("classes"), list):
        return data
    for c in data["classes"]:
        if not isinstance(c, dict):
            continue
        t = c.get("trace")
        if isinstance(t, str) and not os.path.isabs(t):
            c["trace"] = str(base / t)
        f = t.get("file") if isinstance(t, dict) else None
        if isinstance(t, dict) and isinstance(f, str) and not os.path.isabs(f):
            t["file"] = str(base / f)
    return data


def scenario_from_dict(data: Any, source: str = "scenario",
                       base_dir: str | os.PathLike[str] | None = None) -> Scenario:
    """Validate a parsed scenario; errors become one-line :class:`InputError` messages."""
    if base_dir is not None:
        data = _resolve_traces(copy.deepcopy(data), Path(base_dir))
    if not isinstance(data, dict):
        raise InputError(f"{source}: a scenario is a mapping of fields, not {type(data).__name__}")
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise InputError(format_validation_error(exc, data, source)) from None


def load_scenario(path: str | os.PathLike[str]) -> Scenario:
    """Read and validate a YAML or JSON scenario file (trace paths relative to its folder)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{p}: scenario file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{p}: cannot read scenario ({exc})") from None
    try:
        data = json.loads(text) if p.suffix.lower() == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        first = " ".join(str(exc).split())
        raise InputError(f"{p}: not valid {'JSON' if p.suffix == '.json' else 'YAML'}: "
                         f"{first[:200]}") from None
    return scenario_from_dict(data, str(p), base_dir=p.parent.resolve())


def scenario_json_schema() -> dict[str, Any]:
    """The JSON Schema of a scenario file (``fleetplan schema``)."""
    return Scenario.model_json_schema(by_alias=True)

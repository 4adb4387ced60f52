"""The :class:`Scenario` record: the whole scenario file, with its cross-field checks.

Copies (:meth:`Scenario.with_fleet`, :meth:`Scenario.with_updates`) are validated again, so a
what-if run never holds a scenario the schema would refuse.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import (
    BaseModel,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from fleetplan._load import show_value
from fleetplan.catalog.catalog import Catalog, bundled_catalog
from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.catalog.prices import DEFAULT_MARKET
from fleetplan.errors import FleetplanError, InputError, UnknownNameError
from fleetplan.registry.routing import RoutingPolicy, routing_policies
from fleetplan.scenario.base import Strict, canon_gpu, catalog_of, check_region
from fleetplan.scenario.fleet import Pool, match_pools
from fleetplan.scenario.messages import format_validation_error
from fleetplan.scenario.reliability import Reliability, canon_key, entry, keyed_markets
from fleetplan.scenario.served import (
    ServedModel,
    canon_model,
    check_served,
    class_variants,
    not_for_several,
    served_models,
)
from fleetplan.scenario.settings import (
    Candidate,
    CapacitySettings,
    CarbonCap,
    Commitment,
    Embodied,
    PowerSettings,
    SimSettings,
    SolverSettings,
)
from fleetplan.scenario.traffic import TrafficClass
from fleetplan.scenario.unions import RegistryUnion
from fleetplan.workload.arrivals import check_arrivals

if TYPE_CHECKING:
    from fleetplan.context import DataContext


def _model_names() -> list[str]:
    return list(bundled_catalog().models())


def _markets() -> list[str]:
    return bundled_catalog().markets()


def _valid_values(names: Callable[[], Sequence[str]], *,
                  enum: bool = False) -> Callable[[dict[str, Any]], None]:
    """A ``json_schema_extra`` naming the valid values, read when the schema is generated."""
    def extra(schema: dict[str, Any]) -> None:
        valid = list(names())
        if enum:
            schema["enum"] = valid
        else:
            schema["description"] = f"{schema.get('description', '')} (valid: {', '.join(valid)})"

    return extra


def _names_too(schema: dict[str, Any]) -> None:
    """``candidates`` items: a candidate record or a configuration name."""
    name = {"type": "string", "description": "a configuration name: the candidate with defaults"}
    for alt in schema.get("anyOf", [schema]):
        if alt.get("type") == "array":
            alt["items"] = {"anyOf": [alt["items"], name]}


MAX_FLEET_REPLICAS = 100_000
"""Most replicas of a simulated fleet, over all its pools (one pool's ``count`` bound too)."""
DEFAULT_ROUTING = "least-outstanding"
_ROUTING = RegistryUnion(tag="policy", kind="routing policy", members=routing_policies,
                         shorthand=True)


class Scenario(Strict):
    """A complete scenario file: the model, the traffic classes to serve, the fleet to simulate,
    catalog overrides, simulation settings and the optimizer's inputs."""

    model: str | None = Field(
        default=None,
        description="the served model: the short name or hub id (`deepseek-ai/...`) of a model "
                    "in the catalog (`data/models.csv`); give this or `models`",
        examples=["DeepSeek-R1-Distill-Qwen-14B"],
        json_schema_extra=_valid_values(_model_names))
    models: list[ServedModel] | None = Field(
        fail_fast=True, default=None, min_length=1,
        description="several served models instead of `model`: catalog names, or `{name, "
                    "model_config}` records; each class names its model (`classes[].model`), "
                    "each pool serves one model, and availability, budget and carbon caps "
                    "bind the fleet as a whole",
        examples=[["Meta-Llama-3-8B-Instruct", "DeepSeek-R1-Distill-Qwen-14B"]])
    catalog: str | None = Field(
        default=None, description="a folder of your own catalog tables (any of gpus.csv, "
        "gpu_aliases.csv, prices.csv, models.csv, grid_intensity.csv in the bundled schemas; "
        "relative to the scenario file): its rows add to or replace the bundled ones by name "
        "(default: the bundled catalog only)", examples=["my-catalog"])
    hf_model_config: str | None = Field(
        default=None, alias="model_config", description="a Hugging Face config.json of the "
        "served model, or the folder holding one (relative to the scenario file; never "
        "downloaded): the model joins the catalog under the folder's name, and `model` may be "
        "left out (default: none)", examples=["models/Qwen3-8B"])
    classes: list[TrafficClass] = Field(
        fail_fast=True, min_length=1, description="the traffic classes to serve (names unique)")
    fleet: list[Pool] | None = Field(
        fail_fast=True, default=None, min_length=1,
        description="the fleet `fleetplan simulate` runs (`--fleet` replaces it); `solve` "
                    "chooses its own fleet from `candidates`",
        examples=[[{"config": "1xH100-PCIe", "count": 2}, {"config": "2xRTX-4090", "count": 4,
                                                           "region": "FRA"}]])
    routing: Annotated[RoutingPolicy, _ROUTING] = Field(
        default=DEFAULT_ROUTING, validate_default=True,
        description="which replica serves each request: a policy name, or `{policy: NAME, "
                    "...its parameters}` (valid names: the routing registry, "
                    "`fleetplan.fleet.ROUTERS`). `least-outstanding`: fewest outstanding "
                    "requests; `round-robin`: each class cycles over its replicas; `slo-aware`: "
                    "pools that meet the class's TTFT SLO first, spilling when a queue would "
                    "break it (honours `pin`); `planned`: each class's `split` shares",
        examples=["slo-aware", {"policy": "planned"}])
    context_window: int | None = Field(
        default=None, ge=2, description="served max_model_len in tokens (default: the model's, "
        "capped by what one replica's KV cache holds)", examples=[8192])
    market: str = Field(
        default=DEFAULT_MARKET,
        description="price market of the catalog (`data/prices.csv`): `alternative`, the "
                    "study's May-2025 alternative-provider prices; `hyperscaler`, the study's "
                    "hyperscaler figures", examples=["hyperscaler"],
        json_schema_extra=_valid_values(_markets, enum=True))
    prices_usd_per_gpu_hour: dict[str, Annotated[float, Field(gt=0, le=1000)]] = Field(
        fail_fast=True,
        default_factory=dict, description="your prices in $ per GPU-hour by GPU type, "
        "overriding the market's (default: none)", examples=[{"H100-PCIe": 2.5}])
    grid_g_per_kwh: dict[str, Annotated[float, Field(ge=0, le=5000)]] = Field(
        fail_fast=True,
        default_factory=dict, description="your grid carbon intensities in g CO2e per kWh by "
        "region code, overriding the catalog's (see the region codes; default: none)",
        examples=[{"EU27": 200}])
    power_w_per_gpu: dict[str, Annotated[float, Field(gt=0, le=5000)]] = Field(
        fail_fast=True,
        default_factory=dict, description="busy power per GPU (W), the top of the range "
        "`power` scales (default: datasheet TDP; with `power: {model: tdp}`, measured in the "
        "profiles when they have it)", examples=[{"H100-PCIe": 350}])
    power: PowerSettings = Field(default_factory=PowerSettings,
                                 description="how the GPUs' power is charged (default: "
                                             "`activity`, power that follows the work)",
                                 examples=[{"model": "tdp"}])
    embodied: Embodied = Field(default_factory=Embodied,
                               description="embodied carbon of the GPUs (default: included, "
                                           "over 4 years)")
    sim: SimSettings = Field(default_factory=SimSettings,
                             description="simulation settings (length, warm-up, seed, "
                                         "replications, start hour)")
    candidates: list[Candidate] | None = Field(
        fail_fast=True, default=None, min_length=1,
        description="configurations the optimizer may deploy: names, or candidate records "
                    "(regions, replica cap). Absent: every configuration of `model` measured "
                    "in the profile store, in EU27, without a cap",
        examples=[["1xH100-PCIe", "2xRTX-4090"],
                  [{"config": "1xH100-PCIe", "regions": ["EU27", "FRA"], "max_replicas": 8}]],
        json_schema_extra=_names_too)
    availability: dict[str, Any] | None = Field(
        default=None, description="most GPUs the optimizer may use, per GPU type ({H100-PCIe: "
        "8}) or per region and GPU type ({EU27: {H100-PCIe: 8}}), in every hour (default: "
        "unlimited)", examples=[{"H100-PCIe": 8, "FRA": {"RTX-4090": 16}}])
    budget_usd_per_hour: float | None = Field(
        default=None, gt=0, allow_inf_nan=False, description="most the fleet may cost, $ per "
        "hour (every hour of a diurnal plan; default: no budget)", examples=[40])
    reliability: dict[str, Reliability] | None = Field(
        default=None, description="failures per replica-hour and time to replace, per GPU "
        "type or configuration, or per `config@market` / `GPU@market` (`2xRTX-4090@spot`: "
        "that market's pools only; docs/reliability.md; default: none, replicas never fail)",
        examples=[{"RTX-4090": {"failures_per_replica_hour": 0.05, "replace_s": 600}}])
    redundancy: int = Field(
        default=0, ge=0, le=100, description="spare replicas every pool of the plan keeps "
        "(N+k): its load must fit in its replica count minus this (default 0)", examples=[1])
    carbon: CarbonCap | None = Field(default=None, description="a cap on the plan's carbon "
                                     "(default: none)", examples=[{"max_g_per_mtok": 150}])
    commitment: Commitment = Field(default_factory=Commitment,
                                   description="how a diurnal plan commits replicas over the day "
                                               "(a mode alone, `commitment: fixed-peak`, is "
                                               "that mode with the defaults)")
    solver: SolverSettings = Field(default_factory=SolverSettings,
                                   description="MILP solver and its stop criteria (default: "
                                               "CBC, 10 s, 1% gap)")
    capacity: CapacitySettings = Field(default_factory=CapacitySettings,
                                       description="how capacities at SLO are measured on the "
                                                   "replica model")
    # the context it was loaded with (validate_in): the catalog every lookup of it reads
    _context: DataContext | None = PrivateAttr(default=None)

    @field_validator("commitment", mode="before")
    @classmethod
    def _commitment_mode(cls, v: Any) -> Any:
        return {"mode": v} if isinstance(v, str) else v  # as routing: NAME is its defaults

    @field_validator("candidates", mode="before")
    @classmethod
    def _candidate_names(cls, v: Any) -> Any:
        if isinstance(v, list):
            return [{"config": c} if isinstance(c, str) else c for c in v]
        return v

    @field_validator("candidates")
    @classmethod
    def _one_server_per_config(cls, v: list[Candidate] | None) -> list[Candidate] | None:
        first: dict[str, int] = {}
        servers = [c.server.stated() if c.server is not None else {} for c in v or ()]
        for i, c in enumerate(v or ()):
            j = first.setdefault(c.config, i)
            if servers[i] != servers[j]:
                raise ValueError(f"candidates[{i}].server: {c.config} is listed in candidates"
                                 f"[{j}] with other engine settings; the replicas of one "
                                 "configuration run one server (state the same server: on "
                                 "each listing)")
        return v

    @field_validator("model")
    @classmethod
    def _model(cls, v: str | None, info: ValidationInfo) -> str | None:
        return None if v is None else canon_model(v, catalog_of(info))

    @field_validator("market")
    @classmethod
    def _market(cls, v: str, info: ValidationInfo) -> str:
        markets = catalog_of(info).markets()
        if v not in markets:
            raise ValueError(f"unknown market {v} (valid: {', '.join(markets)})")
        return v

    @field_validator("prices_usd_per_gpu_hour")
    @classmethod
    def _prices(cls, v: dict[str, float], info: ValidationInfo) -> dict[str, float]:
        return {canon_gpu(k, catalog_of(info)): p for k, p in v.items()}

    @field_validator("power_w_per_gpu")
    @classmethod
    def _power(cls, v: dict[str, float], info: ValidationInfo) -> dict[str, float]:
        return {canon_gpu(k, catalog_of(info)): w for k, w in v.items()}

    @field_validator("reliability", mode="before")
    @classmethod
    def _reliability_markets(cls, v: Any) -> Any:
        return keyed_markets(v)

    @field_validator("reliability")
    @classmethod
    def _reliability(cls, v: dict[str, Reliability] | None,
                     info: ValidationInfo) -> dict[str, Reliability] | None:
        return None if v is None else {canon_key(k, catalog_of(info)): r for k, r in v.items()}

    @field_validator("availability")
    @classmethod
    def _availability(cls, v: dict[str, Any] | None,
                      info: ValidationInfo) -> dict[str, Any] | None:
        if v is None:
            return v
        cat = catalog_of(info)
        def count(where: str, n: Any) -> int:
            if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= 10**7:
                raise ValueError(f"{where[:60]}: {show_value(n, 60)} must be a whole "
                                 "number of GPUs within 0..10^7")
            return n

        out: dict[str, Any] = {}
        for k, cap in v.items():
            if isinstance(cap, dict):
                check_region(k, cat)
                out[k] = {canon_gpu(g, cat): count(f"{k}.{g}", n) for g, n in cap.items()}
            else:
                out[canon_gpu(k, cat)] = count(k, cap)
        return out

    def _check_prefix_caching(self) -> None:
        """A server started without prefix caching serves no prompt from it: a class that
        states a share of its prompts cached cannot be planned on one (the share is a class
        property, not a pool's: refused rather than applied where it cannot hold)."""
        hit = next((i for i, c in enumerate(self.classes) if c.prefix_cache_hit > 0), None)
        if hit is None:
            return
        listed = [(f"candidates[{i}]", c.server) for i, c in enumerate(self.candidates or ())]
        listed += [(f"fleet[{i}]", p.server) for i, p in enumerate(self.fleet or ())]
        for where, server in listed:
            if server is not None and server.enable_prefix_caching is False:
                raise ValueError(
                    f"{where}.server.enable_prefix_caching false contradicts classes[{hit}]."
                    f"prefix_cache_hit {self.classes[hit].prefix_cache_hit:g}: a server without "
                    "prefix caching serves no prompt from it")

    @model_validator(mode="after")
    def _cross(self, info: ValidationInfo) -> Scenario:
        cat = catalog_of(info)
        check_served(self)
        self._resolve_markets(cat)
        seen: set[str] = set()
        repeated: set[str] = set()
        for c in self.classes:  # one pass: the 1e5-class file took > 60 s with names.count
            (repeated if c.name in seen else seen).add(c.name)
        dup = sorted(repeated)
        if dup:
            more = f" and {len(dup) - 5} more" if len(dup) > 5 else ""
            raise ValueError(f"class names must be unique (repeated: {', '.join(dup[:5])}{more})")
        self._check_arrivals()
        self._check_prefix_caching()
        replicas = sum(p.count for p in self.fleet or ())
        if replicas > MAX_FLEET_REPLICAS:  # each is simulated: 2e6 of them ran for minutes
            raise ValueError(f"fleet: {replicas} replicas in all, more than the "
                             f"{MAX_FLEET_REPLICAS} fleetplan simulates")
        planned = self.routing.policy == "planned"
        for i, c in enumerate(self.classes):
            if planned and self.fleet is not None and c.split is None:
                raise ValueError(f"classes[{i}].split: routing planned needs a split per class")
            if planned and c.pin is not None:
                raise ValueError(f"classes[{i}].pin: planned routing follows split, not pins")
            if self.fleet is not None:
                for key in (*(c.pin or ()), *(c.split or {})):
                    try:
                        match_pools(key, self.fleet, cat)
                    except InputError as exc:
                        field = "pin" if key in (c.pin or ()) else "split"
                        raise ValueError(f"classes[{i}].{field}: {exc}") from None
        regions = {p.region for p in self.fleet or ()}
        for r in sorted(regions):
            if r not in self.grid_g_per_kwh and r not in cat.grid():
                raise ValueError(f"fleet region {r} has no grid intensity")
        return self

    def _resolve_markets(self, cat: Catalog) -> None:
        """A candidate or fleet pool that names no market takes its ``reliability:`` entry's
        (the documented default): a ``market: spot`` entry makes them spot in name, notes and
        evidence too, as they already were in price and failure rate. Two candidates of one
        configuration, region and market after that are refused, saying which entry made
        them so."""
        if not self.reliability:
            return

        def spot_key(config: str) -> str | None:
            """The ``reliability:`` key (configuration or GPU type) whose ``market: spot``
            entry ``config`` takes, None when its entry is not spot."""
            gpu = HardwareConfig.parse(config, cat).gpu
            spec = entry(self.reliability, config, gpu)
            if spec is None or spec.market != "spot":
                return None
            return config if config in self.reliability else gpu  # type: ignore[operator]

        cands = list(self.candidates or ())
        made: dict[int, str] = {}  # candidate index -> the key that made it spot
        for i, c in enumerate(cands):
            if c.market is None and (key := spot_key(c.config)) is not None:
                cands[i], made[i] = c.model_copy(update={"market": "spot"}), key
        seen: dict[tuple[str, str, str | None], int] = {}
        for i, c in enumerate(cands):
            for region in c.regions:
                j = seen.setdefault((c.config, region, c.market), i)
                if j != i:
                    by = next((k for k in (i, j) if k in made), None)
                    why = ("" if by is None else
                           f" (candidates[{by}] names no market and takes reliability."
                           f"{made[by]}'s, market: {c.market}; give it market: on-demand to "
                           "offer both markets)")
                    raise ValueError(f"candidates[{i}]: {c.config} in {region} on market "
                                     f"{c.market or 'on-demand'} is listed in candidates[{j}] "
                                     f"too{why}")
        if made:
            object.__setattr__(self, "candidates", cands)
        spot = [i for i, p in enumerate(self.fleet or ())
                if p.market is None and spot_key(p.config) is not None]
        if spot:
            fleet = list(self.fleet or ())
            for i in spot:
                fleet[i] = fleet[i].model_copy(update={"market": "spot"})
            object.__setattr__(self, "fleet", fleet)

    def _check_arrivals(self) -> None:
        """Refuse a run that would draw more than MAX_ARRIVALS requests (rate x sim.duration_s),
        with the figure, before any array is allocated (a trace is checked when it is read)."""
        total, dur = 0.0, self.sim.duration_s
        for i, c in enumerate(self.classes):
            n = c.process.expected_arrivals(dur, start_hour=self.sim.start_hour)
            if n is None:
                continue
            try:
                check_arrivals(n, f"classes[{i}] ({c.name}): {n / dur:.6g} req/s x "
                               f"sim.duration_s {dur:g}")
            except FleetplanError as exc:
                raise ValueError(str(exc)) from None
            total += n
        try:
            check_arrivals(total, f"the classes' rates x sim.duration_s {dur:g}")
        except FleetplanError as exc:
            raise ValueError(str(exc)) from None

    def data_context(self) -> DataContext:
        """The data context the scenario was loaded with, its ``catalog`` and ``model_config``
        added (:func:`fleetplan.load_scenario`'s ``context=``; default: the bundled catalog):
        what :func:`fleetplan.simulate` and :func:`fleetplan.solve` read its catalog from."""
        if self._context is None:
            from fleetplan.context import DataContext

            return DataContext()
        return self._context

    @classmethod
    def validate_in(cls, data: Any, context: DataContext | None) -> Scenario:
        """Validate ``data`` against ``context``'s catalog (default: the bundled one); the
        scenario keeps the context (:meth:`data_context`)."""
        cat = context.catalog if context is not None else bundled_catalog()
        sc = cls.model_validate(data, context={"catalog": cat})
        sc._context = context
        return sc

    def with_fleet(self, fleet: Sequence[Pool]) -> Scenario:
        """A copy with another fleet (validated again: pins and splits must still match)."""
        data = self.model_dump(mode="python", by_alias=True, exclude_unset=True)
        data["fleet"] = [p.model_dump() for p in fleet]
        return _revalidate(data, self._context)

    def with_updates(self, **fields: Any) -> Scenario:
        """A validated copy with some top-level fields replaced (e.g. ``routing="planned"``)."""
        data = self.model_dump(mode="python", by_alias=True, exclude_unset=True)
        data.update({k: _dumpable(v) for k, v in fields.items()})
        return _revalidate(data, self._context)

    @property
    def one_model(self) -> str:
        """The served model of a scenario with one (``model:``, or ``models:`` of one entry);
        :class:`InputError` for a scenario with several (a step that plans one model)."""
        names = served_models(self)
        if len(names) > 1:
            raise not_for_several(self, "this step")
        return names[0]

    def for_model(self, name: str) -> Scenario:
        """The one-model scenario of ``name``: its classes (their ``model`` dropped) and its
        fleet pools, every other field as it is (availability, budget and carbon caps included:
        the fleet-wide plan applies them to the whole fleet)."""
        data = self.model_dump(mode="python", by_alias=True, exclude_unset=True)
        data.pop("models", None)
        data["model"] = name
        data["classes"] = [{k: v for k, v in c.items() if k != "model"}
                           for i, c in enumerate(data["classes"])
                           if name in class_variants(self, i)]
        if self.fleet is not None:
            fleet = [{k: v for k, v in d.items() if k != "model"}
                     for d, p in zip(data["fleet"], self.fleet, strict=True) if p.model == name]
            if fleet:
                data["fleet"] = fleet
            else:
                data.pop("fleet")
        return _revalidate(data, self._context)

    def class_index(self, name: str) -> int:
        for i, c in enumerate(self.classes):
            if c.name == name:
                return i
        raise UnknownNameError("class", name, [c.name for c in self.classes])


def _dumpable(v: Any) -> Any:
    if isinstance(v, BaseModel):
        return v.model_dump(mode="python", by_alias=True, exclude_unset=True)
    if isinstance(v, list | tuple):
        return [_dumpable(x) for x in v]
    if isinstance(v, dict):
        return {k: _dumpable(x) for k, x in v.items()}
    return v


def _revalidate(data: dict[str, Any], context: DataContext | None) -> Scenario:
    data = _plain(data)
    try:
        return Scenario.validate_in(data, context)
    except ValidationError as exc:
        raise InputError(format_validation_error(exc, data, "scenario")) from None


def _plain(v: Any) -> Any:
    """Tuples to lists (strict mode wants lists for sequences read back from a dump)."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    return v

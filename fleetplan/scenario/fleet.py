"""The fleet a scenario simulates: pools of replicas, the ``--fleet`` spec, pool matching.

Main entries: :class:`Pool` (``count`` replicas of one configuration in one region),
:func:`parse_fleet` (``2x1xH100-PCIe+4x2xRTX-4090@FRA``) and :func:`match_pools` (the pools a
split or pin key names).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import (
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from fleetplan.catalog.catalog import Catalog
from fleetplan.catalog.grid import DEFAULT_REGION
from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.errors import FleetplanError, InputError
from fleetplan.scenario.base import Strict, canon_config, catalog_of, check_region
from fleetplan.scenario.engine import EngineSettings
from fleetplan.scenario.reliability import Market
from fleetplan.scenario.served import MODEL_MARK, canon_model

SPOT_MARK = "~spot"
"""What a pool name carries after its region for the spot market: ``2xRTX-4090@EU27~spot/200ms``
(on-demand and unmarked pools keep ``config@region/tier``)."""


MAX_POOL_COUNT = 100_000  # replicas one pool may hold (a scenario's fleet, a plan file's)


class Pool(Strict):
    """`count` replicas of one hardware configuration in one grid region."""

    config: str = Field(
        description="hardware configuration of every replica: `<GPUs>x<GPU type>` (tensor "
                    "parallel over that many GPUs), or with a layout after `+` (`+tp4pp2`: two "
                    "pipeline stages of four GPUs; `+tp1dp2`: two data-parallel ranks; "
                    "docs/replica-model.md); names are canonicalised",
        examples=["1xH100-PCIe", "2xRTX-4090", "8xRTX-4090+tp4pp2"])
    count: int = Field(ge=1, le=MAX_POOL_COUNT, description="replicas in the pool",
                       examples=[2])
    region: str = Field(
        default=DEFAULT_REGION,
        description="grid region of the pool (its carbon intensity; see the region table)",
        examples=["FRA"])
    tier_ttft_p99_ms: float | None = Field(
        default=None, gt=0,
        description="the P99 TTFT the pool is run at, in ms (a plan's SLO tier; several tiers "
                    "of one configuration and region are separate pools, named "
                    "`config@region/200ms`; default: no tier)", examples=[200])
    tier_tpot_p99_ms: float | None = Field(
        default=None, gt=0, description="the P99 TPOT of the pool's tier, in ms (default: none)",
        examples=[50])
    market: Market | None = Field(
        default=None, description="`on-demand` or `spot` (interruptible: the spot failure "
        "rate and price, docs/reliability.md); a spot pool is named `config@region~spot`. "
        "Default: the market of the pool's `reliability:` entry (on-demand without one)",
        examples=["spot"])

    model: str | None = Field(
        default=None, description="the model the pool's replicas serve: a name of `models` "
        "(required when `models` lists several; the pool is then named "
        "`model/config@region`; default: the only model)",
        examples=["Meta-Llama-3-8B-Instruct"])
    server: EngineSettings | None = Field(
        default=None, description="engine settings the pool's replicas are started with, as "
        "a candidate's `server:` (a plan's pool records its candidate's; default: the "
        "settings of the scenario's candidate of this configuration, if it states any, else "
        "the engine version's defaults)", examples=[{"max_num_seqs": 64}])

    _c = field_validator("config")(classmethod(
        lambda cls, v, info: canon_config(v, catalog_of(info))))
    _m = field_validator("model")(classmethod(
        lambda cls, v, info: None if v is None else canon_model(v, catalog_of(info))))
    _r = field_validator("region")(classmethod(
        lambda cls, v, info: check_region(v, catalog_of(info))))
    _hardware: HardwareConfig = PrivateAttr()

    @model_validator(mode="after")
    def _keep_hardware(self, info: ValidationInfo) -> Pool:
        # the configuration as the validating catalog reads it (its GPU spec included)
        self._hardware = HardwareConfig.parse(self.config, catalog_of(info))
        return self

    @property
    def label(self) -> str:
        """``config@region`` (``config@region/200ms`` for a tier): how pools are named in
        outputs, splits and pins."""
        return pool_label(self.config, self.region, self.tier_ttft_p99_ms, self.tier_tpot_p99_ms,
                          self.market, self.model)

    @property
    def hardware(self) -> HardwareConfig:
        """The configuration, parsed by the catalog the pool was validated with."""
        return self._hardware


def pool_label(config: str, region: str, ttft_p99_ms: float | None = None,
               tpot_p99_ms: float | None = None, market: str | None = None,
               model: str | None = None) -> str:
    """A pool's name: ``config@region``, with ``/200ms`` (``/200ms-tpot50ms``) for a tier,
    ``~spot`` after the region for a spot pool (``2xRTX-4090@EU27~spot/200ms``) and, in a
    scenario with several models, its model first (``Meta-Llama-3-8B-Instruct/1xH100-PCIe@EU27``).
    """
    lead = "" if model is None else f"{model}{MODEL_MARK}"
    where = f"{lead}{config}@{region}{SPOT_MARK if market == 'spot' else ''}"
    ttft = None if ttft_p99_ms is None or ttft_p99_ms == float("inf") else ttft_p99_ms
    if ttft is None and tpot_p99_ms is None:
        return where
    tier = "any" if ttft is None else f"{ttft:g}ms"
    if tpot_p99_ms is not None:
        tier += f"-tpot{tpot_p99_ms:g}ms"
    return f"{where}/{tier}"


def split_model(name: str) -> tuple[str | None, str]:
    """(model, the rest) of a pool or candidate name: ``M/1xH100-PCIe@EU27/200ms`` ->
    (``M``, ``1xH100-PCIe@EU27/200ms``); (``None``, ``name``) without a model prefix."""
    head, at, tail = name.partition("@")
    model, mark, config = head.rpartition(MODEL_MARK)
    if not mark:
        return None, name
    return model, f"{config}{at}{tail}"


def split_pool_name(name: str) -> tuple[str, str, str | None]:
    """(config, region, market) of a pool name ``config@region[~spot][/tier]`` (market
    ``None`` when unmarked)."""
    config, _, rest = name.partition("@")
    where = rest.partition("/")[0]
    region, mark, market = where.partition("~")
    return config, region, (market if mark else None)


_FLEET_RE = re.compile(r"^\s*(\d+)\s*[xX]\s*(?:([A-Za-z0-9][A-Za-z0-9_.-]*)/)?(\d+\s*[xX].+?)\s*"
                       r"(?:@\s*([A-Za-z0-9_-]+))?(~spot)?\s*$")


_POOL_START = re.compile(r"^\s*\d+\s*[xX]")


def _fleet_parts(text: str) -> list[str]:
    """The pools of a fleet spec: split at ``+``, a part that does not start with a replica
    count (``tp4pp2``, ``IB-NDR-400``) being the layout of the configuration before it."""
    parts: list[str] = []
    for part in text.split("+"):
        if parts and not _POOL_START.match(part):
            parts[-1] += "+" + part
        else:
            parts.append(part)
    return parts


def parse_fleet(text: str, catalog: Catalog | None = None) -> list[Pool]:
    """Parse a fleet spec: pools joined by ``+``, each ``<replicas>x<config>[@<region>][~spot]``.

    ``2x1xH100-PCIe+4x2xRTX-4090@FRA``: two 1xH100-PCIe replicas (region EU27) and four
    2xRTX-4090 replicas in FRA (``4x2xRTX-4090@FRA~spot``: spot replicas). In a scenario with
    several models each pool names its model first: ``2xMeta-Llama-3-8B-Instruct/1xH100-PCIe``.
    A configuration with a layout keeps its own ``+``: ``2x8xRTX-4090+tp4pp2+1x1xH100-PCIe``.
    """
    pools = []
    for part in _fleet_parts(text):
        m = _FLEET_RE.match(part)
        if not m:
            raise InputError(f"--fleet {part.strip()!r}: expected <replicas>x<config>[@REGION], "
                             "e.g. 2x1xH100-PCIe or 4x2xRTX-4090@FRA, joined by + (several "
                             "models: 2xMODEL/1xH100-PCIe)")
        data = {"config": m.group(3), "count": int(m.group(1)),
                "region": m.group(4) or DEFAULT_REGION}
        if m.group(2):
            data["model"] = m.group(2)
        if m.group(5):
            data["market"] = "spot"
        try:
            pools.append(Pool.model_validate(data, context={"catalog": catalog}))
        except ValidationError as exc:
            msg = exc.errors()[0]["msg"].removeprefix("Value error, ")
            raise InputError(f"--fleet {part.strip()!r}: {msg}") from None
    return pools


def match_pools(key: str, fleet: Sequence[Pool], catalog: Catalog | None = None) -> list[int]:
    """Indices of the pools a split/pin key names: ``config`` (any region), ``config@region``
    (every tier there), ``config@region~spot`` (its spot pools) or a full pool name with its
    tier (``config@region/200ms``, either market's without ``~spot``); configurations spelled
    as in ``catalog`` (default: the bundled one)."""
    if "/" in key:
        exact = [i for i, p in enumerate(fleet) if p.label == key]
        if not exact and SPOT_MARK not in key:  # a key that names no market: either market's
            exact = [i for i, p in enumerate(fleet) if p.label.replace(SPOT_MARK, "") == key]
        if exact:
            return exact
    model, rest = split_model(key)
    config, _, region = rest.partition("@")
    region, spot, _m = region.partition("~")
    try:
        canon = HardwareConfig.parse(config, catalog).name
    except (FleetplanError, ValidationError):
        canon = config
    hits = [i for i, p in enumerate(fleet)
            if p.config == canon and (not region or p.region == region)
            and (model is None or p.model == model)
            and (not spot or p.market == "spot")]
    if not hits:
        labels = ", ".join(p.label for p in fleet)
        raise InputError(f"{key} names no pool of the fleet (pools: {labels})")
    return hits

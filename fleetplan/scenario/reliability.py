"""The failure model of a scenario: replicas that fail or are preempted, and come back.

A scenario's ``reliability:`` block maps a GPU type (``RTX-4090``) or a configuration
(``2xRTX-4090``; it wins over its GPU type) to a :class:`Reliability` record: failures (or
preemptions) per replica-hour and the time to replace a failed replica. Absent, or a GPU type it
does not name: that pool never fails (today's behaviour). A record may leave its numbers out to
take the bundled defaults of its GPU's class and market (:data:`DEFAULTS`: stated assumptions,
with their sources, in ``docs/reliability.md``).

The model (:func:`unavailability`, :func:`spares_needed`): each replica alternates between up
times drawn from an exponential distribution with rate ``lambda`` (failures per second) and down
times of exactly ``replace_s``; in steady state it is down with probability
``u = lambda R / (1 + lambda R)``, independently of the others. A pool of ``N`` working replicas
keeps ``k`` spares, the fewest with ``P(Binomial(N + k, u) > k) <= quantile``.

Main entries: :class:`Reliability`, :func:`resolve` (a configuration's record, or ``None``),
:func:`unavailability`, :func:`spares_needed` and :func:`spares_table`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from pydantic import Field, model_validator

from fleetplan.catalog.catalog import Catalog, bundled_catalog
from fleetplan.scenario.base import Strict

SECONDS_PER_HOUR = 3600.0
DEFAULT_QUANTILE = 0.01
CONSUMER_GPUS = frozenset({"RTX-4090", "RTX-5090", "RTX-3090"})
Market = Literal["on-demand", "spot"]
# share off the catalog price of interruptible capacity: an assumption (AWS advertises up to 90%
# off on-demand; marketplace "interruptible" bids commonly sit about half below on-demand)
DEFAULT_SPOT_DISCOUNT = 0.5


@dataclass(frozen=True)
class Default:
    """A bundled default: failure rate per GPU-hour (a replica of g GPUs fails g times as often),
    replacement time, and where the figure comes from."""

    failures_per_gpu_hour: float
    replace_s: float
    source: str


# (GPU class, market) -> default. Sources and their limits: docs/reliability.md.
DEFAULTS: dict[tuple[str, str], Default] = {
    ("datacenter", "on-demand"): Default(
        2e-5, 600.0,
        "Llama 3 report (Dubey et al. 2024, sec. 3.3.4): 419 unexpected interruptions in 54 days "
        "on 16,384 H100s = 2.0e-5 per GPU-hour; replacement 10 min: assumption"),
    ("datacenter", "spot"): Default(
        0.02, 600.0,
        "assumption: an order of magnitude above hardware failures, for reclaimed spot "
        "capacity (AWS Spot Instance Advisor publishes monthly bands only)"),
    ("consumer", "on-demand"): Default(
        0.025, 600.0,
        "assumption (no published churn rate of decentralised consumer-GPU hosts found): one "
        "host in forty per hour leaves, reboots or loses its network; 10 min to replace"),
    ("consumer", "spot"): Default(
        0.1, 600.0,
        "assumption: interruptible (outbid) consumer hosts, four times the bundled on-demand "
        "default (0.025)"),
}


class Reliability(Strict):
    """How often replicas of one GPU type (or configuration) fail, and how long they stay down."""

    failures_per_replica_hour: float | None = Field(
        default=None, ge=0, le=100,
        description="failures or preemptions per replica-hour (default: the bundled figure of "
                    "the GPU's class and market, docs/reliability.md)", examples=[0.05])
    replace_s: float | None = Field(
        default=None, gt=0, le=86400,
        description="seconds until a failed replica is replaced by a fresh one (default 600)",
        examples=[600])
    market: Market = Field(
        default="on-demand", description="on-demand, or spot (interruptible: the bundled "
        "defaults fail more often)")
    quantile: float = Field(
        default=DEFAULT_QUANTILE, gt=0, lt=0.5,
        description="the optimizer keeps the fewest spares k with P(more than k replicas of a "
                    "pool down) <= quantile", examples=[0.01])
    spot_discount: float | None = Field(
        default=None, ge=0, lt=1,
        description="market spot only: share off the catalog price (default 0.5, an "
                    "assumption; docs/reliability.md)", examples=[0.6])

    @model_validator(mode="after")
    def _spot_only(self) -> Reliability:
        if self.spot_discount is not None and self.market != "spot":
            raise ValueError(f"spot_discount = {self.spot_discount:g}: only a market: spot "
                             "entry has a spot price")
        return self

    @property
    def price_factor(self) -> float:
        """What the catalog price is multiplied by (1 on-demand)."""
        if self.market != "spot":
            return 1.0
        return 1.0 - (DEFAULT_SPOT_DISCOUNT if self.spot_discount is None else self.spot_discount)

    def price_source(self) -> str:
        return f"spot: {self.discount_words()}"

    def discount_words(self) -> str:
        """``50% off the catalog price (assumption, docs/reliability.md)``: the spot price's
        rule, without the ``spot:`` a note about a spot pool already says."""
        given = self.spot_discount is not None
        return (f"{1 - self.price_factor:.0%} off the catalog price "
                f"({'scenario reliability block' if given else 'assumption, docs/reliability.md'})")

    def rate_per_hour(self, gpu: str, gpu_count: int) -> float:
        """Failures per replica-hour: given, else the bundled default for ``gpu_count`` GPUs."""
        if self.failures_per_replica_hour is not None:
            return float(self.failures_per_replica_hour)
        return _default(gpu, self.market).failures_per_gpu_hour * gpu_count

    def down_s(self, gpu: str) -> float:
        return float(self.replace_s if self.replace_s is not None
                     else _default(gpu, self.market).replace_s)

    def source(self, gpu: str) -> str:
        if self.failures_per_replica_hour is not None and self.replace_s is not None:
            return "scenario reliability block"
        return f"bundled default ({self.market}): {_default(gpu, self.market).source}"


def gpu_class(gpu: str) -> str:
    return "consumer" if gpu in CONSUMER_GPUS else "datacenter"


def _default(gpu: str, market: str) -> Default:
    return DEFAULTS[(gpu_class(gpu), market)]


MARKETS: tuple[str, ...] = ("on-demand", "spot")


def keyed_markets(block: Any) -> Any:
    """A raw ``reliability:`` block whose ``config@market`` entries take the key's market (an
    entry that names another market is refused)."""
    if not isinstance(block, Mapping):
        return block
    out = {}
    for key, spec in block.items():
        market = str(key).partition("@")[2]
        if market and isinstance(spec, Mapping):
            given = spec.get("market")
            if given is not None and given != market:
                raise ValueError(f"reliability.{key}.market = {given}: the key names market "
                                 f"{market}")
            spec = {**spec, "market": market} if market in MARKETS else spec
        out[key] = spec
    return out


def canon_key(key: str, catalog: Catalog) -> str:
    """A ``reliability:`` key's canonical spelling in ``catalog``: a configuration or a GPU
    type, optionally with ``@<market>`` (``2xRTX-4090@spot``: that configuration's pools of that
    market only)."""
    from fleetplan.scenario.base import canon_config, canon_gpu

    name, at, market = key.partition("@")
    if at and market not in MARKETS:
        raise ValueError(f"reliability key {key}: unknown market {market!r} (valid: "
                         f"{', '.join(MARKETS)})")
    suffix = f"@{market}" if at else ""
    if "x" in name.split("-")[0].lower() and name[:1].isdigit():
        return canon_config(name, catalog) + suffix
    return canon_gpu(name, catalog) + suffix


@dataclass(frozen=True)
class PoolReliability:
    """The failure model of one pool's replicas."""

    failures_per_hour: float
    replace_s: float
    quantile: float
    source: str
    price_factor: float = 1.0  # spot: the catalog price times this (see :func:`pool_price`)

    @property
    def unavailability(self) -> float:
        return unavailability(self.failures_per_hour, self.replace_s)

    @property
    def active(self) -> bool:
        return self.failures_per_hour > 0


def entry(block: Mapping[str, Reliability] | None, config: str,
          gpu: str, market: str | None = None) -> Reliability | None:
    """``config``'s entry of the block (its own, else its GPU type's), or ``None``.

    ``market`` (a pool or candidate that names its market): ``config@market``, else
    ``gpu@market``, else the config's or GPU's entry when it is of that market; else a record of
    that market with the bundled default rate that keeps the entry's ``replace_s`` and
    ``quantile``. A spot pool always fails (absent block: the bundled spot defaults); an
    on-demand pool the block does not name never does. ``None``: the entry's own market (today's
    behaviour: a ``market: spot`` entry makes its GPU type's pools spot)."""
    base = (block.get(config) or block.get(gpu)) if block else None
    if market is None:
        return base
    keyed = (block.get(f"{config}@{market}") or block.get(f"{gpu}@{market}")) if block else None
    if keyed is not None:
        return keyed if keyed.market == market else keyed.model_copy(update={"market": market})
    if base is not None and base.market == market:
        return base
    if base is None and market != "spot":
        return None
    kept = {} if base is None else {"replace_s": base.replace_s, "quantile": base.quantile}
    return Reliability(market=market, **kept)  # type: ignore[arg-type]


def _catalog_spot_row(gpu: str, catalog: Catalog | None) -> tuple[float, str] | None:
    """The catalog's ``spot`` market price of ``gpu`` and its source, if it has one (default:
    the bundled catalog)."""
    for p in (catalog or bundled_catalog()).prices():
        if p.gpu == gpu and p.market == "spot":
            return p.price_usd_per_gpu_hour, f"spot {p.price_date}: {p.source}"
    return None


def resolve(block: Mapping[str, Reliability] | None, config: str, gpu: str,
            gpu_count: int, market: str | None = None) -> PoolReliability | None:
    """The failure model of ``config``'s replicas of ``market`` (:func:`entry`), or ``None``
    when the pool never fails."""
    spec = entry(block, config, gpu, market)
    if spec is None:
        return None
    return PoolReliability(spec.rate_per_hour(gpu, gpu_count), spec.down_s(gpu), spec.quantile,
                           spec.source(gpu), spec.price_factor)


def pool_price(rel: Reliability | None, gpu: str, price: float, source: str,
               overridden: bool, gpus: int = 1,
               catalog: Catalog | None = None) -> tuple[float, str]:
    """A pool's price and its source: ``price`` (per GPU-hour, or per replica-hour of ``gpus``
    GPUs) with its ``source`` for on-demand; for spot, the catalog's ``spot`` row of the GPU
    (times ``gpus``) when there is one (and neither a ``spot_discount`` nor a scenario price is
    given), else ``price`` less the discount. ``catalog``: whose spot rows (default: bundled)."""
    if rel is None or rel.market != "spot":
        return price, source
    row = None if overridden or rel.spot_discount is not None else _catalog_spot_row(gpu, catalog)
    if row is not None:
        return row[0] * gpus, row[1]
    if rel.price_factor == 1.0:
        return price, source
    return price * rel.price_factor, f"{source}; {rel.price_source()}"


def spot_price_source(block: Mapping[str, Reliability] | None, config: str, gpu: str,
                      overridden: bool, catalog: Catalog | None = None) -> str:
    """Where a spot pool's price comes from (the plan's notes, after their own ``spot``), by
    :func:`pool_price`'s rule."""
    spec = entry(block, config, gpu, "spot")
    if spec is None:
        return "catalog price"
    row = None if overridden or spec.spot_discount is not None else _catalog_spot_row(gpu, catalog)
    return spec.discount_words() if row is None else f"catalog spot row, {row[1]}"


def unavailability(failures_per_hour: float, replace_s: float) -> float:
    """Steady-state share of time a replica is down: ``lambda R / (1 + lambda R)``."""
    lr = failures_per_hour / SECONDS_PER_HOUR * replace_s
    return lr / (1.0 + lr)


def _down_tail(working: int, u: float, k: int) -> float:
    """``P(Binomial(working + k, u) > k)``: more than ``k`` of ``working + k`` replicas down."""
    from scipy.stats import binom  # scipy loads only when a plan has churn

    return float(binom.sf(k, working + k, u))


@lru_cache(maxsize=4096)
def spares_needed(working: int, u: float, quantile: float) -> int:
    """The fewest spares ``k`` with ``P(Binomial(working + k, u) > k) <= quantile`` (0 for an
    empty pool or ``u = 0``). Non-decreasing in ``working`` and in ``u``; never capped: a pool
    whose replicas are often down gets as many spares as the quantile needs (``u < 1`` always,
    so the count is finite: the tail falls as ``k`` passes ``u * working / (1 - u)``)."""
    if working <= 0 or u <= 0:
        return 0
    # the tail is non-increasing in k (one more replica adds at most one more down, while the
    # allowance grows by one): bracket by doubling, then bisect
    if _down_tail(working, u, 0) <= quantile:
        return 0
    lo, hi = 0, 1  # tail(lo) > quantile
    while _down_tail(working, u, hi) > quantile:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _down_tail(working, u, mid) > quantile:
            lo = mid
        else:
            hi = mid
    return hi


def spares_table(max_working: int, u: float, quantile: float) -> tuple[int, ...]:
    """``spares_needed(n)`` for ``n = 0 .. max_working``, made non-decreasing (the MILP's step
    function: a pool with more working replicas never needs fewer spares)."""
    out: list[int] = []
    best = 0
    for n in range(max_working + 1):
        best = max(best, spares_needed(n, u, quantile))
        out.append(best)
    return tuple(out)

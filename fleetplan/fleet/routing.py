"""Routing policies: which replica of the fleet serves an arriving request (one registry).

Every policy is a :class:`Router` subclass registered under a name with :func:`register_router`
(duplicates refused); :func:`get_router` fails with the valid names. That registration is the one
step that adds a policy: the scenario's ``routing:`` field validates against :data:`ROUTERS` (the
registry, :mod:`fleetplan.registry.routing`, whose provider this module is) and
``fleetplan schema`` lists its members. A policy's parameters are a :class:`RoutingPolicy` model
(its ``Params``; none given: a model with the name only), written ``routing: {policy: NAME, ...}``
or, with the defaults, ``routing: NAME``; the router receives them as ``self.params``
(:func:`make_router`). Built in (none has parameters today):

- ``round-robin``: each class cycles over its eligible replicas.
- ``least-outstanding``: the eligible replica with the fewest outstanding requests (waiting +
  running); ties go round-robin so no replica is favoured.
- ``slo-aware``: each class prefers the pools that meet its TTFT SLO when unloaded, leaving pools
  that only tighter classes can use to those classes, and goes least-outstanding among them; when
  the chosen replica's predicted TTFT breaks the SLO (its queue would), the request spills to the
  replica with the best prediction in any pool it may use. A class with ``pin`` never leaves its
  pins.
- ``planned``: a fixed share per class and pool (``split``), dealt by smooth weighted
  round-robin (exact shares, no randomness), least-outstanding inside the pool.

Pins restrict the eligible replicas of every policy but ``planned`` (which follows its split).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from pydantic import Field, create_model

from fleetplan.errors import InputError
from fleetplan.registry.routing import ROUTERS, RoutingPolicy, routing_policies

__all__ = [
    "ROUTERS", "LeastOutstanding", "Planned", "RoundRobin", "Router", "RoutingContext",
    "RoutingPolicy", "SloAware", "get_router", "make_router", "register_router",
    "routing_policies",
]


@dataclass
class RoutingContext:
    """What a router may look at. ``outstanding[r]`` is live; the rest is fixed for a run.

    ``replica_pool[r]`` is the pool of replica ``r``; ``eligible[c]`` the replicas class ``c``
    may use; ``split[c]`` the pool shares of class ``c`` (planned routing);
    ``slo_ttft_s[c]`` the class's TTFT objective (``None`` without one); ``unloaded_ttft_s[c][p]``
    the TTFT a request of class ``c`` sees on an idle replica of pool ``p`` (P99 prompt);
    ``predict_ttft_s(r, input_tokens)`` the TTFT a request would see on replica ``r`` now.
    """

    replica_pool: Sequence[int]
    eligible: Sequence[Sequence[int]]
    outstanding: list[int]
    split: Sequence[Sequence[float] | None] = ()
    slo_ttft_s: Sequence[float | None] = ()
    unloaded_ttft_s: Sequence[Sequence[float]] = ()
    predict_ttft_s: Callable[[int, int], float] | None = None
    pinned: Sequence[bool] = ()
    pool_replicas: list[list[int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.pool_replicas:
            n = max(self.replica_pool) + 1 if self.replica_pool else 0
            self.pool_replicas = [[] for _ in range(n)]
            for r, p in enumerate(self.replica_pool):
                self.pool_replicas[p].append(r)


class Router:
    """Base of routing policies: ``route(cls, input_tokens) -> replica index``."""

    name: ClassVar[str] = ""
    Params: ClassVar[type[RoutingPolicy]] = RoutingPolicy
    # True when the pool a request goes to never depends on the fleet's state and the replica
    # within it only on that pool's own replicas: each pool then sees the same requests at the
    # same times whatever the other pools do, and a replication may be simulated as parts of
    # pools apart (fleetplan.fleet.parts), with the same result
    pools_apart: ClassVar[bool] = False

    def __init__(self, ctx: RoutingContext, params: RoutingPolicy | None = None) -> None:
        self.ctx = ctx
        self.params = params if params is not None else type(self).Params(policy=self.name)
        for c, elig in enumerate(ctx.eligible):
            if not elig:
                raise InputError(f"class #{c} has no replica it may be routed to")

    def route(self, cls: int, input_tokens: int) -> int:
        raise NotImplementedError


def register_router(name: str) -> Callable[[type[Router]], type[Router]]:
    """Class decorator adding a policy to the registry; a second policy of one name is refused.

    The class's own ``Params`` (a :class:`RoutingPolicy` whose ``policy`` is ``Literal[name]``)
    are its parameters; without one it gets a parameter-free model named after the class.
    """
    def deco(cls: type[Router]) -> type[Router]:
        if name in ROUTERS:  # refused before its Params are built (the message names both)
            ROUTERS.add(name, cls)
        if "Params" in cls.__dict__:
            tag = cls.Params.model_fields["policy"]
            if tag.default != name:
                raise ValueError(f"routing policy {name!r}: {cls.Params.__name__}.policy must "
                                 f"be Literal[{name!r}] = {name!r}")
        else:
            doc = (cls.__doc__ or f"The {name} routing policy.").strip()
            cls.Params = create_model(
                f"{cls.__name__}Policy", __base__=RoutingPolicy, __doc__=doc,
                policy=(Literal[name],  # type: ignore[valid-type, arg-type]
                        Field(default=name, description="the policy's name")))
            # found by pickle (scenarios travel to worker processes) as ``Router.Params``
            cls.Params.__module__ = cls.__module__
            cls.Params.__qualname__ = f"{cls.__qualname__}.Params"
        cls.name = name
        return ROUTERS.add(name, cls)

    return deco


def make_router(policy: RoutingPolicy | str, ctx: RoutingContext) -> Router:
    """The router of ``policy`` (a name: its defaults) for ``ctx``."""
    if isinstance(policy, str):
        return get_router(policy)(ctx)  # Router.__init__ builds the default parameters
    return get_router(policy.policy)(ctx, policy)


def get_router(name: str) -> type[Router]:
    """The policy registered as ``name``; unknown names fail with the valid ones."""
    router: type[Router] = ROUTERS.lookup(name)
    return router


def _least(outstanding: list[int], replicas: Sequence[int], start: int) -> int:
    """Replica with the fewest outstanding requests, scanning from ``start`` (fair ties)."""
    if start:
        replicas = [*replicas[start:], *replicas[:start]]
    return min(replicas, key=outstanding.__getitem__)


@register_router("round-robin")
class RoundRobin(Router):
    """Each class cycles over its eligible replicas in turn."""

    pools_apart = True  # no state read at all

    def __init__(self, ctx: RoutingContext, params: RoutingPolicy | None = None) -> None:
        super().__init__(ctx, params)
        self._next = [0] * len(ctx.eligible)

    def route(self, cls: int, input_tokens: int) -> int:
        elig = self.ctx.eligible[cls]
        i = self._next[cls]
        self._next[cls] = (i + 1) % len(elig)
        return elig[i]


@register_router("least-outstanding")
class LeastOutstanding(Router):
    """The eligible replica with the fewest outstanding requests (waiting + running); ties go
    round-robin so no replica is favoured."""

    def __init__(self, ctx: RoutingContext, params: RoutingPolicy | None = None) -> None:
        super().__init__(ctx, params)
        self._start = [0] * len(ctx.eligible)

    def route(self, cls: int, input_tokens: int) -> int:
        elig = self.ctx.eligible[cls]
        s = self._start[cls]
        self._start[cls] = (s + 1) % len(elig)
        return _least(self.ctx.outstanding, elig, s)


@register_router("slo-aware")
class SloAware(Router):
    """Least-outstanding over the class's preferred pools; when the chosen replica's predicted
    TTFT breaks the class's SLO, the replica with the best prediction anywhere it may go (each
    pool represented by its least-outstanding replica: one prediction per pool)."""

    def __init__(self, ctx: RoutingContext, params: RoutingPolicy | None = None) -> None:
        super().__init__(ctx, params)
        if ctx.predict_ttft_s is None:
            raise InputError("slo-aware routing needs a TTFT predictor")
        self._predict = ctx.predict_ttft_s
        ncls = len(ctx.eligible)
        meets = []
        for c in range(ncls):
            pools = sorted({ctx.replica_pool[r] for r in ctx.eligible[c]})
            slo = ctx.slo_ttft_s[c] if ctx.slo_ttft_s else None
            ok = {p for p in pools if slo is None or ctx.unloaded_ttft_s[c][p] <= slo}
            meets.append((slo, pools, ok))
        # per class: [(pool, its eligible replicas)] preferred, then spill
        self.preferred: list[list[tuple[int, list[int]]]] = []
        self.spill: list[list[tuple[int, list[int]]]] = []
        for c in range(ncls):
            slo, pools, ok = meets[c]
            reserved: set[int] = set()
            for slo2, _, ok2 in meets:
                if slo2 is not None and (slo is None or slo2 < slo):
                    reserved |= ok2
            pref = (ok - reserved) or ok or set(pools)
            elig = set(ctx.eligible[c])
            groups = [(p, [r for r in ctx.pool_replicas[p] if r in elig]) for p in pools]
            self.preferred.append([g for g in groups if g[0] in pref])
            self.spill.append([g for g in groups if g[0] not in pref])
        self._pref_replicas = [[r for _, reps in g for r in reps] for g in self.preferred]
        self._rr = [0] * ncls

    def _best(self, groups: Sequence[tuple[int, list[int]]],
              input_tokens: int) -> tuple[int, float]:
        best, best_t = -1, 0.0
        for _pool, reps in groups:
            r = _least(self.ctx.outstanding, reps, 0)
            t = self._predict(r, input_tokens)
            if best < 0 or t < best_t:
                best, best_t = r, t
        return best, best_t

    def route(self, cls: int, input_tokens: int) -> int:
        pref = self._pref_replicas[cls]
        s = self._rr[cls]
        self._rr[cls] = (s + 1) % len(pref)
        r = _least(self.ctx.outstanding, pref, s)
        slo = self.ctx.slo_ttft_s[cls] if self.ctx.slo_ttft_s else None
        if slo is None:
            return r
        t = self._predict(r, input_tokens)
        if t <= slo:
            return r
        # the preferred pools' queue would break the SLO: the best prediction anywhere wins
        r2, t2 = self._best([*self.preferred[cls], *self.spill[cls]], input_tokens)
        return r2 if t2 < t else r


@register_router("planned")
class Planned(Router):
    """Smooth weighted round-robin over pools by the class's split; least-outstanding inside."""

    pools_apart = True  # the pool from the split alone; the replica from its pool's counts

    def __init__(self, ctx: RoutingContext, params: RoutingPolicy | None = None) -> None:
        super().__init__(ctx, params)
        self._credit: list[list[float]] = []
        self._weights: list[list[float]] = []
        for c in range(len(ctx.eligible)):
            w = ctx.split[c] if c < len(ctx.split) else None
            if w is None or not any(x > 0 for x in w):
                raise InputError(f"planned routing: class #{c} has no split")
            self._weights.append(list(w))
            self._credit.append([0.0] * len(w))
        # per class: its pools of positive share, in pool order, and the shares' sum
        self._positive = [[(p, wp) for p, wp in enumerate(w) if wp > 0] for w in self._weights]
        self._total = [sum(w) for w in self._weights]
        self._start = [0] * len(ctx.pool_replicas)

    def route(self, cls: int, input_tokens: int) -> int:
        credit = self._credit[cls]
        best = -1
        for p, wp in self._positive[cls]:
            credit[p] += wp
            if best < 0 or credit[p] > credit[best]:
                best = p
        credit[best] -= self._total[cls]
        reps = self.ctx.pool_replicas[best]
        s = self._start[best]
        self._start[best] = (s + 1) % len(reps)
        return _least(self.ctx.outstanding, reps, s)

"""Capacity at SLO: the highest sustained rate one replica serves with a class's P99s in SLO.

The search runs the calibrated replica model in steady state (long runs of gamma arrivals, warm-up
excluded; :func:`fleetplan.replica.protocol.steady_state`), never the benchmark protocol: the
measured "rates" are bursts of 200 requests the server drains afterwards, so sustainable rates
come out far below the nominal ones (one H100 with the 14B model "at 16 req/s" completed 7.2).

Search, for one (replica parameters, length model, burstiness, prefix-cache hit, SLO); the
class's stated ``prefix_cache_hit`` (share of each prompt already in vLLM's prefix cache) is part
of every cache key, since it changes the prefill work per request. The rates form a fixed grid:
the ladder ``start_rps * step**i`` within ``[min_rps, max_rps]`` and ``refine_steps`` levels of
geometric midpoints between neighbours (a resolution of ``step ** (1 / 2**refine_steps)``, 4.4%
by default). A capacity ``c`` is certified: the rate ``c`` passes and the next rate of the grid
fails (or ``c`` is the top of the ladder); capacity 0 means the bottom rate fails, and its P99s
are kept (``probe``) to explain the SLO no candidate meets.

1. Start where the analytic bracket (:mod:`fleetplan.optimize.bracket`: the engine's throughput
   with perfect batching and its unloaded P99 TTFT) puts the SLO's crossing, rounded to a
   multiple of :data:`STRIDE` grid steps (replica parameters that are not a ``ReplicaParams``:
   at ``start_rps``, by whole ladder steps, as a plain ladder climb).
2. Walk by that stride: up while rates pass, else down until one passes (to the bottom).
3. Bisect between the last pass and the first fail, down to neighbouring grid rates.

A rate *passes* when every seed's run is stable (no growing queue) and the largest P99 over the
seeds is within ``(1 - slo_margin) x`` each SLO target; seeds run one by one, the one whose run
failed last first (with common random numbers it tends to fail the next rate too), and the first
that fails decides a fail. A run stops as soon as enough of its requests finished above a limit that
its P99 must end above it (``steady_state(stop_above=)``): the verdict of the whole run, found
sooner; what it proved (:class:`RunBound`, cached) fails any stricter SLO without a run, and the
SLOs of one workload are searched loosest first so that it does. Seeds are the same at every
rate (common random numbers), so the P99-vs-rate curve is a fixed function; the start never
decreases as the SLO loosens and the walk visits the same stride-aligned cells, so the search is
monotone in the SLO: a looser SLO never yields a lower capacity. Where the curve is monotone in
the rate (one crossing), the capacity is the crossing whatever the start: the plain ladder climb
from ``start_rps`` finds the same one. Each seed's run at a rate is cached on disk apart from
the SLO, and :func:`find_capacities` searches the SLOs of one workload (the tiers) on one shared
set of runs, so other SLOs (tiers, the ``slo`` frontier) reuse them. The point one ladder step
below capacity (``below_capacity``, the busy-share chord of the ``tdp`` power model) is run only
for a job that asks for it (``CapacityJob.chord``); otherwise it is the highest passing rate
below capacity the search saw anyway, or none.

Settings: the scenario's ``capacity:`` block (:class:`fleetplan.scenario.CapacitySettings`).
Main entries: :func:`find_capacity`, :func:`find_capacities` (the SLOs of one workload
together) and :func:`search_group` (picklable, for executors). The records
(:class:`CapacityJob`, :class:`PointStats`, :class:`RunBound`, :class:`CapacityResult`) are
:mod:`fleetplan.optimize.capacity_records`'s, re-exported here; cached points and results are
validated when read (:meth:`PointStats.checked`, :meth:`CapacityResult.from_dict`): one that
fails is recomputed (:mod:`fleetplan.optimize.cache`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from fleetplan.errors import InputError
from fleetplan.optimize.bracket import Bracket, bracket
from fleetplan.optimize.cache import DiskCache
from fleetplan.optimize.capacity_records import (
    CapacityJob,
    CapacityResult,
    PointStats,
    RunBound,
    combine,
)
from fleetplan.scenario import CapacitySettings

__all__ = [
    "STRIDE", "CapacityJob", "CapacityResult", "CapacitySettings", "GroupOutcome", "PointFn",
    "PointStats", "RunBound", "SeedFn", "combine", "find_capacities", "find_capacity",
    "run_seed", "search_group", "simulate_point", "simulate_seed",
]


STRIDE = 2  # grid steps per move of the walk from the bracket's start (then bisection)

PointFn = Callable[[CapacityJob, float], PointStats]
SeedFn = Callable[[CapacityJob, float, int], PointStats]


def simulate_seed(job: CapacityJob, rate: float, index: int) -> PointStats:
    """One steady-state run of the replica model at ``rate``: the job's seed number ``index``."""
    got = run_seed(job, rate, index)
    assert isinstance(got, PointStats)
    return got


def run_seed(job: CapacityJob, rate: float, index: int,
             stop_above: dict[str, float] | None = None) -> PointStats | RunBound:
    """:func:`simulate_seed`, stopped early with ``stop_above`` (P99 limits, ms): once one of
    the run's P99s must end above its limit, the result is that :class:`RunBound` instead of
    the run's statistics."""
    from fleetplan.replica.steady import SteadyStatus, steady_state

    s = job.settings
    duration = max(s.duration_s, s.warmup_s + s.min_requests / rate)
    r = steady_state(job.params, rate=rate, lengths=job.lengths, burstiness=job.burstiness,
                     duration_s=duration, warmup_s=s.warmup_s, seed=s.seed + index,
                     prefix_cache_hit=job.prefix_cache_hit, stop_above=stop_above)
    if getattr(r, "status", None) is SteadyStatus.ABOVE:
        assert stop_above is not None
        return RunBound.of(r.stopped_on, stop_above[r.stopped_on])
    t = float(getattr(r, "throughput_rps", rate))
    return PointStats(rate, _finite(getattr(r, "ttft_p99_ms", math.inf)),
                      _finite(getattr(r, "tpot_p99_ms", 0.0)),
                      _finite(getattr(r, "e2e_p99_ms", 0.0)), bool(r.stable),
                      min(float(getattr(r, "utilization", 1.0)), 1.0),
                      t if math.isfinite(t) else 0.0)


def simulate_point(job: CapacityJob, rate: float) -> PointStats:
    """Steady-state runs of the replica model at ``rate`` for every seed of the job."""
    n = job.settings.seeds
    return combine(rate, [simulate_seed(job, rate, i) for i in range(n)], n)


def _finite(v: Any) -> float:
    v = float(v)
    return v if math.isfinite(v) else 1e12


def _limits(job: CapacityJob) -> dict[str, float]:
    """The P99 limits a run of ``job`` fails above (``(1 - slo_margin) x`` each target)."""
    keep = 1.0 - job.settings.slo_margin
    return {k: keep * t for k, t in (("ttft_p99_ms", job.ttft_p99_ms),
                                      ("tpot_p99_ms", job.tpot_p99_ms),
                                      ("e2e_p99_ms", job.e2e_p99_ms)) if t is not None}


def _passes(job: CapacityJob, p: PointStats) -> bool:
    """Whether ``p`` is stable with every P99 within its limit (:func:`_limits`)."""
    return p.stable and not any(getattr(p, name) > lim for name, lim in _limits(job).items())


class _Grid:
    """The search's rates: the ladder ``start_rps x step**i`` within ``[min_rps, max_rps]`` and,
    between neighbours, ``refine_steps`` levels of geometric midpoints (each the midpoint of
    its two neighbours one level up, rounded to 6 digits as every simulated rate is). Index
    ``k = i * 2**refine_steps + j``."""

    def __init__(self, s: CapacitySettings) -> None:
        self.s = s
        self.n = 2 ** s.refine_steps
        i = 0
        while s.start_rps * s.step ** (i + 1) <= s.max_rps:
            i += 1
        self.top = i * self.n
        i = 0
        while s.start_rps * s.step ** (i - 1) >= s.min_rps * (1 - 1e-9):
            i -= 1
        self.bottom = i * self.n
        self._rates: dict[int, float] = {}

    def rate(self, k: int) -> float:
        got = self._rates.get(k)
        if got is None:
            i, j = divmod(k, self.n)
            if j == 0:
                got = _round(self.s.start_rps * self.s.step ** i)
            else:
                d = j & -j
                got = _round(math.sqrt(self.rate(k - d) * self.rate(k + d)))
            self._rates[k] = got
        return got

    def index(self, rps: float) -> int:
        """The grid index nearest ``rps`` (clamped to the grid; ``rps <= 0``: the bottom)."""
        if rps <= 0:
            return self.bottom
        k = round(math.log(rps / self.s.start_rps) / math.log(self.s.step) * self.n)
        return min(max(k, self.bottom), self.top)


def _round(rate: float) -> float:
    return float(f"{rate:.6g}")


class _Points:
    """Simulated points of one (replica, workload, run settings), shared by the searches of
    several SLOs. With ``seed_fn`` each seed's run is cached on its own, and a point is judged
    seed by seed: the first seed whose run fails the SLO decides a fail (the worst P99 over the
    seeds can only be higher), so a failing rate usually costs one run; a pass needs them all.
    A run judged against an SLO stops as soon as one of its P99s must end above the SLO's
    limit (:func:`fleetplan.replica.steady.steady_state`'s ``stop_above``; only with the default
    :func:`simulate_seed`): what it proved is kept as a :class:`RunBound` (in memory and in the
    cache's ``bound`` namespace), which fails any stricter SLO without a run; a looser one runs
    it again. The verdicts are those of whole runs. With ``point_fn`` (synthetic curves in
    tests) whole points are cached."""

    def __init__(self, job: CapacityJob, cache: DiskCache, point_fn: PointFn | None,
                 seed_fn: SeedFn) -> None:
        self.job, self.cache = job, cache
        self.point_fn, self.seed_fn = point_fn, seed_fn
        self._simulated: set[float] = set()  # rates with at least one run simulated here
        self._runs: dict[tuple[float, int], PointStats] = {}
        self._bounds: dict[tuple[float, int], RunBound] = {}
        self._points: dict[float, PointStats] = {}
        self._failed = 0  # the seed whose run failed last (tried first)

    def _run(self, rate: float, i: int,
             limits: dict[str, float] | None) -> tuple[PointStats | None, bool]:
        """(seed ``i``'s run at ``rate``, simulated now); ``None`` for a run known to fail
        ``limits`` (a bound). ``limits=None``: the whole run, never a bound."""
        got = self._runs.get((rate, i))
        if got is not None:
            return got, False
        key = self.job.run_key(rate, i)
        hit = self.cache.get("point", key, PointStats.checked)
        if hit is not None:
            got = PointStats.checked(hit)
            self._runs[(rate, i)] = got
            return got, False
        early = limits is not None and self.seed_fn is simulate_seed
        if early:
            assert limits is not None
            bound = self._bounds.get((rate, i))
            if bound is None:
                stored = self.cache.get("bound", key, RunBound.checked)
                bound = RunBound.checked(stored) if stored is not None else None
            if bound is not None:
                self._bounds[(rate, i)] = bound
                if bound.fails(limits):
                    return None, False
            res = run_seed(self.job, rate, i, stop_above=limits)
        else:
            res = self.seed_fn(self.job, rate, i)
        if not isinstance(res, PointStats):
            merged = res.merged(self._bounds.get((rate, i)))
            self._bounds[(rate, i)] = merged
            self.cache.put("bound", key, merged.to_dict())
            return None, True
        self.cache.put("point", key, res.to_dict())
        self._runs[(rate, i)] = res
        return res, True

    def _seed_order(self, seeds: int) -> list[int]:
        """The seeds in the order a point tries them: the one whose run failed last first (with
        common random numbers a seed that fails one rate tends to fail the next; a pass needs
        every seed anyway), then the others by index. The verdict is the same in any order."""
        return [self._failed] + [i for i in range(seeds) if i != self._failed]

    @property
    def simulations(self) -> int:
        """Rates at which this object simulated at least one run."""
        return len(self._simulated)

    def judge(self, job: CapacityJob, rate: float, full: bool = False,
              whole: bool = False) -> tuple[bool, PointStats]:
        """(passes ``job``'s SLO, the point's statistics over the seeds run). ``full``: run
        every seed, whole, even after a failing one (the point's complete statistics);
        ``whole``: no early stop (a fail at the grid's bottom needs its whole runs anyway)."""
        got = self._points.get(rate)
        if got is not None:
            return _passes(job, got), got
        if self.point_fn is not None:
            hit = self.cache.get("point", self.job.point_key(rate), PointStats.checked)
            if hit is not None:
                got = PointStats.checked(hit)
            else:
                self._simulated.add(rate)
                got = self.point_fn(self.job, rate)
                self.cache.put("point", self.job.point_key(rate), got.to_dict())
            self._points[rate] = got
            return _passes(job, got), got
        seeds = self.job.settings.seeds
        limits = None if full or whole else _limits(job)
        runs: dict[int, PointStats] = {}
        ok, simulated, complete = True, False, True
        for i in self._seed_order(seeds):
            run, new = self._run(rate, i, limits)
            simulated = simulated or new
            if run is None:  # stopped early: above the SLO's limit
                ok = complete = False
                self._failed = i
                break
            runs[i] = run
            if not _passes(job, run):
                ok = False
                self._failed = i
                if not full:
                    break
        if simulated:
            self._simulated.add(rate)
        point = combine(rate, [runs[i] for i in sorted(runs)], seeds)
        if not complete:
            point = replace(point, stable=False)
        elif len(runs) == seeds:
            self._points[rate] = point
        return ok, point


def _search(job: CapacityJob, pts: _Points, grid: _Grid, start: int,
            stride: int) -> CapacityResult:
    """Walk the grid from ``start`` by ``stride`` (up while rates pass, else down until one
    passes), then bisect between the last pass and the first fail. ``start`` and the walk stay
    on multiples of ``stride``, so two SLOs whose starts are ordered like the SLOs walk the same
    cells of the grid: a looser SLO (more passes at every rate) never ends lower."""
    before = pts.simulations
    seen: dict[int, PointStats] = {}  # passing points of this search, by index

    def passes(k: int) -> bool:
        ok, p = pts.judge(job, grid.rate(k), whole=k == grid.bottom)
        if ok:
            seen[k] = p
        return ok

    k = min(max(stride * round(start / stride), grid.bottom), grid.top)
    good: int | None
    bad: int | None
    if passes(k):
        good, bad = k, None
        while good + stride <= grid.top:
            if not passes(good + stride):
                bad = good + stride
                break
            good += stride
    else:
        good, bad = None, k
        while bad - stride >= grid.bottom:
            if passes(bad - stride):
                good = bad - stride
                break
            bad -= stride
    if good is None:
        _ok, probe = pts.judge(job, grid.rate(grid.bottom), full=True)
        return CapacityResult(0.0, None, None, probe, pts.simulations - before)
    if bad is not None:
        lo, hi = good, bad
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if passes(mid):
                lo = mid
            else:
                hi = mid
        good = lo
    lower = [i for i in seen if i < good]
    below: PointStats | None = None
    if lower:
        below = seen[max(lower)]
    elif good > grid.bottom and job.chord:
        below = pts.judge(job, grid.rate(max(good - grid.n, grid.bottom)), full=True)[1]
    at = seen[good]
    probe = seen[min(seen)] if seen else at
    return CapacityResult(at.rate_rps, at, below, probe, pts.simulations - before)


def find_capacities(jobs: Sequence[CapacityJob], *, cache: DiskCache | None = None,
                    point_fn: PointFn | None = None,
                    seed_fn: SeedFn = simulate_seed) -> list[CapacityResult]:
    """The capacities at SLO of ``jobs``, which differ only in their SLOs (the tiers of one
    class workload on one configuration): one grid, each simulated run shared by every SLO.
    Results are cached on disk by every input (module docstring); the search of each SLO
    starts at the analytic bracket (:mod:`fleetplan.optimize.bracket`)."""
    if not jobs:
        return []
    first = jobs[0]
    if any(j.point_key(1.0) != first.point_key(1.0) or j.settings != first.settings
           for j in jobs):
        raise InputError("find_capacities: the jobs must differ only in their SLOs "
                         f"(first: {first.config}, {first.lengths.source or 'lengths'})")
    cache = cache if cache is not None else DiskCache(first.cache_root)
    grid = _Grid(first.settings)
    pts = _Points(first, cache, point_fn, seed_fn)
    keep = 1.0 - first.settings.slo_margin
    out: dict[int, CapacityResult] = {}
    brackets: list[Bracket | None] = []  # computed on the first cache miss

    def looseness(i: int) -> tuple[float, ...]:
        j = jobs[i]
        return tuple(math.inf if t is None else t
                     for t in (j.ttft_p99_ms, j.tpot_p99_ms, j.e2e_p99_ms))

    # loosest SLO first: a run it stopped early fails every stricter SLO without a new run
    for n in sorted(range(len(jobs)), key=looseness, reverse=True):
        job = jobs[n]
        hit = cache.get("capacity", job.key(), CapacityResult.from_dict)
        if hit is not None:
            out[n] = CapacityResult.from_dict(hit)
            continue
        if not brackets:
            brackets.append(bracket(first.params, first.lengths, first.prefix_cache_hit))
        br = brackets[0]
        if br is None:  # no replica parameters: the ladder from its first rate
            res = _search(job, pts, grid, 0, grid.n)
        else:
            start = grid.index(br.start_rps(job.ttft_p99_ms, keep))
            res = _search(job, pts, grid, start, min(STRIDE, grid.n))
        cache.put("capacity", job.key(), res.to_dict())
        out[n] = res
    return [out[n] for n in range(len(jobs))]


def find_capacity(job: CapacityJob, *, cache: DiskCache | None = None,
                  point_fn: PointFn | None = None,
                  seed_fn: SeedFn = simulate_seed) -> CapacityResult:
    """The capacity at SLO of ``job`` (cached on disk by every input; see module docstring).
    ``point_fn(job, rate)`` replaces the simulation of a whole point (all seeds), ``seed_fn(job,
    rate, i)`` that of one seed's run."""
    return find_capacities([job], cache=cache, point_fn=point_fn, seed_fn=seed_fn)[0]


@dataclass(frozen=True)
class GroupOutcome:
    """What :func:`search_group` sends back: the results (as dicts, in the jobs' order) and
    the cache entries it refused and recomputed (path, reason)."""

    results: tuple[dict[str, Any], ...]
    rejected: tuple[tuple[str, str], ...]


def search_group(jobs: Sequence[CapacityJob]) -> GroupOutcome:
    """Executor entry (top level, picklable): :func:`find_capacities` on the jobs' cache,
    with the entries that failed validation there (reported by the caller, not the worker)."""
    if not jobs:
        return GroupOutcome((), ())
    cache = DiskCache(jobs[0].cache_root)
    res = find_capacities(jobs, cache=cache)
    return GroupOutcome(tuple(r.to_dict() for r in res), tuple(cache.rejected))

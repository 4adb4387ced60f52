"""An experiment, not adopted: the tensor-parallel RTX 4090 first-token delays as a backlog of
the engine's outputs behind a delivery path that is slower than the engine's light-load step.

Usage: python scripts/try_output_backlog.py [--folds] [--cv CV] [--draw-seed N] [--jobs N]
  e.g. python scripts/try_output_backlog.py --folds --draw-seed 7   (~15 s on 2 cores)

The hypothesis (docs/replica-model.md, "Tried in the fifth round"): each step's outputs pass
one path on their way to the client (the engine process's sending thread, the API server), in
order, one step's outputs after another. While the engine is stepping, handing on one step's
outputs takes that path ``a + b x n`` seconds (``n`` the step's outputs), drawn from a gamma law
of that mean and cv 1 (``--cv``; 0: fixed); when the engine runs out of work the path empties at
once. If ``a`` is a little longer than the engine's step at light load, outputs queue up for as
long as the engine stays busy and a first token reaches the client late by the queue: seconds
at 1 req/s, where busy periods are long and steps short, less as steps lengthen with load. A
plausible cause, not established: with tensor parallelism vLLM 0.8.5's engine-core process
waits for its workers in a Python spin loop, so its sending thread gets the interpreter lock
only now and then.

Every tensor-parallel RTX 4090 configuration of the bundled store is replayed with the bundled
calibration's parameters, except ``overhead_s`` at its 5 ms prior (the committed fits hold the
delays there) and ``c_step`` / ``c_seq`` refitted to the measured TPOT p50 of the runs used (the
token gaps are on time in every run, flagged or not). ``a`` (a multiple of that ``c_step``) and
``b`` are chosen on a grid by the rms log error of TTFT p50 / p90 / p99 over the 1 and 4 req/s
runs, the flagged runs whose first tokens the hypothesis explains. By default the 16 req/s run
is held out of both fits and predicted, with the values chosen per configuration and pooled over
all six; ``--folds`` holds out, in turn, every run that ``fleetplan validate --cv`` holds out
(the unflagged 4 and 16 req/s runs) and prints its errors with and without the backlog.
"""

from __future__ import annotations

import argparse
import itertools
import math
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import least_squares

import fleetplan.replica.protocol as protocol
from fleetplan.profiles.store import load_profiles
from fleetplan.replica.engine import ReplicaEngine
from fleetplan.replica.params import ReplicaParams, replica_params
from fleetplan.replica.runs import MeasuredRun, predict_run
from fleetplan.validate.core import error_pct, load_runs

TTFT = ("ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms")
FIT_RATES = (1.0, 4.0)
HELD_OUT = 16.0
RATIOS = tuple(float(r) for r in np.round(np.arange(0.90, 1.5001, 0.02), 3))  # a / c_step
PER_OUTPUT_US = (0.0, 50.0, 100.0, 150.0, 200.0, 250.0, 300.0)  # b
_complete = ReplicaEngine._complete
_run_metrics = protocol.run_metrics
_captured: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []


def traced_complete(self: ReplicaEngine, now: float) -> None:
    """``ReplicaEngine._complete`` that also records each step it applies: start, end and
    outputs (decoders plus prefill chunks, an upper bound on its first tokens)."""
    n, a, b, t0 = self._plan_n, self._plan_A, self._plan_B, self._plan_t0
    k = np.arange(n + 1)
    bounds = t0 + k * a + b * k * (k - 1) / 2.0
    outs = self._sched.n_dec + (len(self._plan_pf) if self._plan_pf else 0)
    self.__dict__.setdefault("trace", []).append(
        np.column_stack((bounds[:-1], bounds[1:], np.full(n, outs))))
    _complete(self, now)


def capturing_metrics(reqs: Any, engine: ReplicaEngine, end_min_s: float) -> dict[str, float]:
    """``protocol.run_metrics`` that keeps the run's steps and first tokens for later."""
    steps = np.concatenate(engine.__dict__["trace"])
    _captured.append((steps, np.array([r.first_token_s for r in reqs]),
                      np.array([r.arrival_s for r in reqs])))
    return _run_metrics(reqs, engine, end_min_s)


def delivered(steps: np.ndarray, a: float, b: float, draws: np.ndarray) -> np.ndarray:
    """When each step's outputs reach the client (module docstring); ``draws``: unit-mean
    variates, one per step (the same for every ``a``, ``b``: common random numbers)."""
    start, end, outs = steps[:, 0], steps[:, 1], steps[:, 2]
    need = ((a + b * outs) * draws).tolist()
    out = np.empty(end.size)
    cuts = np.flatnonzero(start[1:] - end[:-1] > 1e-7) + 1  # the engine idle in between
    for seg in np.split(np.arange(end.size), cuts):
        ready = -math.inf
        got = []
        for i in seg.tolist():
            ready = max(end[i], ready) + need[i]
            got.append(ready)
        out[seg] = np.minimum(got, end[seg[-1]])  # the path empties when the engine runs dry
    return out


@dataclass
class Sim:
    """One run simulated once (length seed 0): what the backlog needs."""

    rate: float
    measured: tuple[float, ...]
    steps: np.ndarray
    first: np.ndarray
    arrival: np.ndarray
    draws: np.ndarray
    engine: dict[str, float]  # the replay's metrics without the backlog

    def ttft(self, a: float, b: float) -> tuple[float, ...]:
        """TTFT p50 / p90 / p99 (ms) with the backlog (a, b in seconds)."""
        dl = delivered(self.steps, a, b, self.draws)
        idx = np.clip(np.searchsorted(self.steps[:, 1], self.first - 1e-9), 0, dl.size - 1)
        t = (dl[idx] - self.arrival) * 1e3
        return tuple(float(np.percentile(t, q)) for q in (50, 90, 99))


def simulate(p: ReplicaParams, run: MeasuredRun, cv: float, draw_seed: int) -> Sim:
    """Replay ``run`` once with the engine traced."""
    ReplicaEngine._complete = traced_complete  # type: ignore[method-assign]
    protocol.run_metrics = capturing_metrics  # type: ignore[assignment]
    _captured.clear()
    m = predict_run(p, run, seeds=(0,))
    steps, first, arrival = _captured[0]
    rng = np.random.default_rng(draw_seed)
    draws = rng.gamma(1 / cv**2, cv**2, len(steps)) if cv > 0 else np.ones(len(steps))
    return Sim(run.request_rate, tuple(run.measured[k] for k in TTFT), steps, first, arrival,
               draws, m)


def refit_steps(p: ReplicaParams, runs: list[MeasuredRun]) -> ReplicaParams:
    """``c_step`` and ``c_seq`` fitted to the runs' measured TPOT p50 (log residuals, length
    seed 0), ``overhead_s`` at 5 ms."""
    base = p.model_copy(update={"overhead_s": 5e-3})

    def resid(x: np.ndarray) -> np.ndarray:
        q = base.model_copy(update={"c_step": math.exp(x[0]), "c_seq": math.exp(x[1])})
        return np.array([math.log(predict_run(q, r, seeds=(0,))["tpot_p50_ms"]
                                  / r.measured["tpot_p50_ms"]) for r in runs])

    x0 = np.log([p.c_step * 0.6, max(p.c_seq, 2e-5)])
    fit = least_squares(resid, x0, diff_step=0.05, max_nfev=30,
                        bounds=(np.log([1e-3, 1e-6]), np.log([0.2, 5e-3])))
    return base.model_copy(update={"c_step": math.exp(fit.x[0]), "c_seq": math.exp(fit.x[1])})


def loss(sims: list[Sim], a: float, b: float) -> float:
    """rms log error of TTFT p50 / p90 / p99 over ``sims`` with the backlog (a, b)."""
    errs = [math.log(pr / m) for s in sims
            for pr, m in zip(s.ttft(a, b), s.measured, strict=True)]
    return math.sqrt(sum(e * e for e in errs) / len(errs))


def choose(items: list[tuple[ReplicaParams, list[Sim]]]) -> tuple[float, float, float]:
    """The grid's (a / c_step, b in us) of least summed squared loss over ``items``' runs at
    the fit rates, and that loss's rms over the configurations."""
    def total(g: tuple[float, float]) -> float:
        return sum(loss([s for s in sims if s.rate in FIT_RATES], g[0] * p.c_step, g[1] * 1e-6)
                   ** 2 for p, sims in items)

    least, best = min((total(g), g) for g in itertools.product(RATIOS, PER_OUTPUT_US))
    return best[0], best[1], math.sqrt(least / len(items))


def prepare(job: tuple[ReplicaParams, list[MeasuredRun], MeasuredRun, float, int]
            ) -> tuple[ReplicaParams, list[Sim]]:
    """Steps refitted without the held-out run; the runs at the fit rates and the held-out one
    (last) simulated."""
    p0, runs, held, cv, draw_seed = job
    p = refit_steps(p0, [r for r in runs if r is not held])
    used = [r for r in runs if r is not held and r.request_rate in FIT_RATES] + [held]
    return p, [simulate(p, r, cv, draw_seed) for r in used]


def show(t: tuple[float, ...]) -> str:
    return "/".join(f"{v:.0f}" for v in t)


def pct(pred: tuple[float, ...], meas: tuple[float, ...]) -> str:
    return "/".join(f"{error_pct(m, p):+.0f}" for p, m in zip(pred, meas, strict=True))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--folds", action="store_true",
                    help="hold out each run that validate --cv holds out, in turn")
    ap.add_argument("--cv", type=float, default=1.0, help="spread of the path's time per step")
    ap.add_argument("--draw-seed", type=int, default=7, help="seed of those times")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    runs = [r for r in load_runs(load_profiles()) if r.gpu == "RTX-4090" and r.gpu_count > 1]
    series = {k: sorted((r for r in runs if r.key == k), key=lambda r: r.request_rate)
              for k in sorted({r.key for r in runs})}
    if args.folds:
        held = [(k, h) for k, rs in series.items() for h in rs
                if not h.flagged and h.request_rate in (4.0, 16.0)]
    else:
        held = [(k, next(r for r in rs if r.request_rate == HELD_OUT))
                for k, rs in series.items()]
    jobs = [(replica_params(*k), series[k], h, args.cv, args.draw_seed) for k, h in held]
    with ProcessPoolExecutor(args.jobs) as ex:
        done = list(ex.map(prepare, jobs))
    if args.folds:
        print("held out: TTFT p50/p90/p99 % error, engine alone; with the backlog chosen on "
              "the fold's other 1 and 4 req/s runs | throughput / TPOT p50 % error (engine)")
        for (_, h), (p, sims) in zip(held, done, strict=True):
            ratio, per_out, _ = choose([(p, sims[:-1])])
            t = sims[-1]
            other = ("request_throughput", "tpot_p50_ms")
            print(f"  {h.model:30s} {h.config:11s} {h.request_rate:3g}  "
                  f"{pct(tuple(t.engine[k] for k in TTFT), t.measured)}; "
                  f"{pct(t.ttft(ratio * p.c_step, per_out * 1e-6), t.measured)}  "
                  f"(a {ratio:.2f} x c_step, b {per_out:.0f} us) | "
                  + pct(tuple(t.engine[k] for k in other), tuple(h.measured[k] for k in other)))
        return
    pooled = choose(done)
    print(f"pooled over {len(done)} configurations: a = {pooled[0]:.2f} x c_step, b = "
          f"{pooled[1]:.0f} us (rms log error on the 1 and 4 req/s runs {pooled[2]:.2f})")
    for (key, _), (p, sims) in zip(held, done, strict=True):
        own = choose([(p, sims)])
        print(f"\n{key[0]} on {key[1]}: steps {p.c_step * 1e3:.1f} ms + {p.c_seq * 1e6:.0f} us"
              f" per sequence; own choice a = {own[0]:.2f} x c_step, b = {own[1]:.0f} us "
              f"(rms log {own[2]:.2f})")
        print("  rate  measured TTFT p50/p90/p99 ms   engine alone   own choice   pooled")
        for s in sims:
            cells = [show(tuple(s.engine[k] for k in TTFT)),
                     show(s.ttft(own[0] * p.c_step, own[1] * 1e-6)),
                     show(s.ttft(pooled[0] * p.c_step, pooled[1] * 1e-6))]
            tag = "held out" if s.rate == HELD_OUT else "fitted"
            print(f"  {s.rate:4g}  {show(s.measured):>22s}   " + "   ".join(cells)
                  + f"   ({tag})")


if __name__ == "__main__":
    main()

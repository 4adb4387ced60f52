"""Experiment (issue 42): leave-one-rate-out of the tensor-parallel RTX 4090 runs under variants.

Runs ``fleetplan.validate.cv.leave_one_rate_out`` on the tensor-parallel RTX 4090
configurations (``--all``: every configuration; burst tails learned from the whole store, as
the full cross-validation does) and prints each held-out run's throughput and TPOT p50 error,
their median |error| per server kind, and (without ``--all``) the in-sample errors of the
same variant's fits. Variants (combinable) are monkeypatches of the calibration:

- ``base``: the code as it is;
- ``nottft``: an engine-first fit's engine stage leaves out the TTFT figures of its unflagged
  runs (they go to the delay stage only);
- ``thr3``: ``nottft`` with the throughput weight x3 in the engine stage;
- ``noitl``: an engine-first fit leaves out every run's ITL p50;
- ``cold``: every run replayed with a cold prefix cache;
- ``lighttau``: burst-tail pins fitted with the series' lowest-rate TPOT as the per-token time
  instead of each run's own TPOT p50 (changes every server kind's pins);
- ``kindprior``: an engine-first fit starts from, and is pulled toward, a prior whose step
  coefficients take the median efficiency of the other engine-first configurations of its GPU
  type (committed calibration) instead of the default assumptions;
- ``early``: one more pinned reply, :data:`EARLY` (request, tokens) per prompt set, in the runs
  of the R1-distill models (which answer to ``max_tokens``; changes every server kind's runs
  of those prompt sets; the values come from ``experiments/burst_early_long_reply.py``).

``--output-cv X`` (with any variant) replays every run with the protocol's reply lengths drawn at
coefficient of variation ``X`` instead of :data:`fleetplan.workload.lengths.PROTOCOL_CV_OUTPUT`
(a wider spread keeps more long replies in flight as a burst drains).

Usage: python experiments/tp4090_loro_variants.py VARIANT [VARIANT ...] [--all] [--jobs 1]
[--output-cv X]
(about 20 s for the tensor-parallel RTX 4090 folds, 2-3 min with ``--all``, on one core).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from fleetplan.catalog.catalog import bundled_catalog
from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.profiles.store import load_profiles
from fleetplan.replica import burst_tail, calibrate, priors
from fleetplan.replica import runs as runs_mod
from fleetplan.replica.calibration_file import load_calibration_file
from fleetplan.replica.measured_run import MeasuredRun
from fleetplan.replica.params_record import ReplicaParams
from fleetplan.validate import cv
from fleetplan.validate.core import load_runs
from fleetplan.workload import lengths

ENGINE = ("request_throughput", "tpot_p50_ms", "itl_p50_ms")
VARIANTS = ("base", "nottft", "thr3", "noitl", "cold", "lighttau", "early", "kindprior")
# a long reply sent mid-burst, per prompt set (experiments/burst_early_long_reply.py: the
# (request, tokens) that brings the committed calibrations' 16 / 32 req/s throughput right)
EARLY = {"200:41650": (100, 1100), "200:41169": (120, 1100)}
_weights = calibrate.fit_weights
_with_tails = runs_mod.with_burst_tails
_observations = burst_tail._observations
STEP_NAMES = ("c_step", "c_prefill_tok", "c_seq", "c_kv_tok")


def _nottft(run: MeasuredRun, first: bool, thr: float = 1.0) -> dict[str, float]:
    w = _weights(run, first)
    if first and not run.flagged:
        w = {m: v for m, v in w.items() if m in ENGINE}
    if first and "request_throughput" in w:
        w["request_throughput"] *= thr
    return w


def _thr3(run: MeasuredRun, first: bool) -> dict[str, float]:
    return _nottft(run, first, thr=3.0)


def _noitl(run: MeasuredRun, first: bool) -> dict[str, float]:
    w = _weights(run, first)
    if first:
        w.pop("itl_p50_ms", None)
    return w


def _light_obs(runs: Sequence[MeasuredRun], seed: int
               ) -> dict[str, list[tuple[float, float, float]]]:
    """burst_tail's observations with each run's TPOT replaced by its series' lowest-rate one."""
    low: dict[tuple[str, str], tuple[float, float]] = {}
    for r in runs:
        if (not r.flagged and r.measured.get("tpot_p50_ms", 0) > 0
                and (r.key not in low or r.request_rate < low[r.key][0])):
            low[r.key] = (r.request_rate, r.measured["tpot_p50_ms"] / 1e3)
    out = {}
    for fam, rows in _observations(runs, seed).items():
        new = []
        for rate, t, tail in rows:
            match = [r for r in runs if r.request_rate == rate and not r.flagged
                     and abs(r.measured.get("tpot_p50_ms", 0) / 1e3 - t) < 1e-12]
            new.append((rate, low[match[0].key][1] if match else t, tail))
        out[fam] = new
    return out


def _early_tails(runs: Sequence[MeasuredRun],
                 tails: dict[str, burst_tail.BurstTail]) -> list[MeasuredRun]:
    out = []
    for r in _with_tails(runs, tails):
        extra = EARLY.get(burst_tail.family_key(r.num_prompts, r.total_input_tokens))
        if extra and r.pinned_outputs and "R1-Distill" in r.model:
            r = dataclasses.replace(r, pinned_outputs=r.pinned_outputs + (extra,))
        out.append(r)
    return out


def _kind_prior() -> Callable[..., ReplicaParams]:
    """``calibrate.prior_params`` for ``kindprior``: an engine-first server's prior takes, per step
    coefficient, the median efficiency (fitted / ideal: the committed calibration's
    ``ratios_to_ideal``) of the *other* engine-first configurations of its GPU type."""
    cat = bundled_catalog()
    ratios = {e.key: {n: e.ratios_to_ideal[n] for n in STEP_NAMES}
              for e in load_calibration_file().configs
              if priors.engine_first(HardwareConfig.parse(e.params.config, cat))}
    orig = priors.prior_params

    def prior(spec: Any, hw: HardwareConfig, **kw: Any) -> ReplicaParams:
        others = [r for (m, c), r in ratios.items() if (m, c) != (spec.model, hw.name)
                  and c.split("x", 1)[1] == hw.name.split("x", 1)[1]]
        if not priors.engine_first(hw) or kw.get("efficiency") or not others:
            return orig(spec, hw, **kw)
        eff = {n: statistics.median(r[n] for r in others) for n in STEP_NAMES}
        return orig(spec, hw, efficiency=eff, **kw)
    return prior


def patch(variants: Sequence[str]) -> None:
    """Apply the named variants (module docstring) to the imported package."""
    for v, fn in (("nottft", _nottft), ("thr3", _thr3), ("noitl", _noitl)):
        if v in variants:
            calibrate.fit_weights = fn  # type: ignore[assignment]
    if "cold" in variants:
        runs_mod.runs_before = lambda rate, top: 0  # type: ignore[assignment]
    if "lighttau" in variants:
        burst_tail._observations = _light_obs
    if "kindprior" in variants:
        calibrate.prior_params = _kind_prior()  # type: ignore[assignment]
    if "early" in variants:
        runs_mod.with_burst_tails = _early_tails  # type: ignore[assignment]
        cv.with_burst_tails = _early_tails  # type: ignore[assignment]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("variant", nargs="+", choices=VARIANTS)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--all", action="store_true", help="every configuration of the store")
    ap.add_argument("--output-cv", type=float, default=None,
                    help="the protocol's reply-length spread (default: the committed one)")
    args = ap.parse_args()
    patch(args.variant)
    if args.output_cv is not None:  # every caller takes the default model (workers fork)
        defaults = list(lengths.protocol_length_model.__defaults__ or ())
        defaults[1] = args.output_cv  # (cv_input, cv_output, mean_input, mean_output)
        lengths.protocol_length_model.__defaults__ = tuple(defaults)
    runs = load_runs(load_profiles())
    sel = runs if args.all else [r for r in runs if r.gpu == "RTX-4090" and r.gpu_count > 1]
    t = time.time()
    res = cv.leave_one_rate_out(sel, jobs=args.jobs, tail_pool=runs)
    held = [x for x in res.runs if not x.flagged]
    print(f"variant {args.variant}: {len(held)} held-out runs in {time.time() - t:.0f} s")
    kinds: dict[tuple[str, str], list[float]] = {}
    for rec in held:
        e = [rec.metrics[m].error_pct or 0.0 for m in ENGINE[:2]]
        print(f"  {rec.model[:28]:28s} {rec.config:11s} {rec.request_rate:4g} "
              f"thr {e[0]:+6.1f} tpot {e[1]:+6.1f}")
        kind = f"{rec.gpu} {'TP' if rec.gpu_count > 1 else '1'}"
        for m, err in zip(ENGINE[:2], e, strict=True):
            kinds.setdefault((kind, m), []).append(abs(err))
    for (kind, m), errs in sorted(kinds.items()):
        print(f"  {kind:14s} {m:20s} median |err| {statistics.median(errs):5.1f} "
              f"(n {len(errs)})")
    if args.all:
        return
    tails = burst_tail.infer_burst_tails(runs, seed=runs_mod.VLLM_BENCHMARK_SEED)
    fits = calibrate.fit_many(list(calibrate.group_runs(runs_mod.with_burst_tails(sel, tails))
                                   .values()), jobs=args.jobs)
    print("  in-sample, rate: thr / tpot %")
    for f in fits:
        print(f"  {f.params.model[:28]:28s} {f.params.config:11s} " + " ".join(
            f"{rr.request_rate:g}{'F' if rr.flagged else ''}:"
            f"{rr.error_pct.get('request_throughput', 0):+.0f}/"
            f"{rr.error_pct.get('tpot_p50_ms', 0):+.0f}" for rr in f.runs))


if __name__ == "__main__":
    main()

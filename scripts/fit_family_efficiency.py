"""Fit the step-cost efficiencies of each GPU family on other people's runs, judge the fit
leave-one-dataset-out, and write what the product reads.

Usage: python scripts/fit_family_efficiency.py [--max-rows N] [--max-nfev N] [--dry-run]

For every GPU family (:func:`fleetplan.replica.families.gpu_family`) with runs in
``data/external/`` on GPU types the bundled store never measured, the parts of
:data:`fleetplan.replica.families.PARTS` are fitted by least squares (scipy) on the replica
model's own replays of those runs (``scripts/eval_external.py``'s ``predict_row``): residuals
are ``ln(predicted / measured)`` of throughput and TPOT p50 (TTFT is not fitted, only judged:
``--ttft-weight`` adds it), with a weak pull (0.1 per part, in log) towards the pooled
efficiencies of the bundled calibration, so a part no run exercises (all-reduces on one GPU)
stays there. Two stages (:func:`fit_family`): a dense step's parts on the dense models' runs,
then the time per mixture-of-experts layer on the MoE models' runs.

A family is **kept** only where, held out, it predicts its own runs no worse (median |error| of
throughput and TPOT p50) than the spec path without it, over all its runs and on each dataset
they come from (a fit that helps one server stack at another's expense has learned a stack, not
the GPUs): leave-one-GPU-out where its runs are of two GPU types or more, else
leave-one-model-out where they are of two models or more; a family nothing can check is not
kept. The kept fits (on every run of the family) are
``data/family_efficiency.json``; every run's error, held out where a kept family predicts it,
gives the per-dataset table of docs/validation.md (bands judged leave-one-dataset-out) and the
``external`` fold of ``data/spec_errors.json`` (the bands of GPU types never measured here,
:mod:`fleetplan.validate.external_bands`). The other runs (of GPU types measured here, or of a
family without a kept fit) count as the product predicts them with the kept fits: an MoE
model's step takes the time per MoE layer of its GPU's family or of that family's sibling
(:func:`fleetplan.replica.families.moe_layer_family`), and no fit saw them. Every file is
written atomically; ``--dry-run`` prints only.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TTFT_WEIGHT = 0.0
# Where the fit of a family's host time per sequence starts (and the weak pull leans): the
# bundled calibrations' c_seq holds theirs, near 0 (vLLM 0.8.5's V1 on H100 PCIe: c_seq 0.9-1.0
# x the ideal compute per token); a log-space part needs a start above 0, and the fit's bounds
# (x20 either way) reach 0.25-100 us from here
SEQ_HOST_START_S = 5e-6
# Where the fit of a family's time per mixture-of-experts layer and step starts: the bundled
# calibrations have no MoE model; 20 us is between what the RTX 3090 rig's Qwen3.6 MoE on a
# recent vLLM and gpt-oss-20b / Mixtral on older ones ask for (docs/replica-model.md, "a fixed
# time per layer and step"); bounds 1-400 us
MOE_LAYER_START_S = 20e-6
PULL = 0.1
RESIDUAL_LABELS = {"throughput": 1.0, "TPOT p50": 1.0, "TTFT p50": TTFT_WEIGHT}
VALIDATION_DOC = ROOT / "docs" / "validation.md"
SECTION = "## Other people's runs (data/external)"


def _eval_module() -> Any:
    spec = importlib.util.spec_from_file_location("eval_external", ROOT / "scripts" /
                                                  "eval_external.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["eval_external"] = mod
    spec.loader.exec_module(mod)
    return mod


def _pooled_parts() -> dict[str, float]:
    """The parts today's spec path implies for a GPU type never measured: the pooled
    efficiency ratios of the bundled calibration (c_step's for the step parts, c_prefill_tok's
    for the token parts, the assumed host time x c_step's)."""
    from fleetplan.replica.calibration_file import load_calibration_file
    from fleetplan.replica.params import learned_efficiency
    from fleetplan.replica.priors import STEP_HOST_S

    ratios, _how = learned_efficiency(load_calibration_file().configs, "-", 1)
    step, tok = (ratios or {}).get("c_step", 1.25), (ratios or {}).get("c_prefill_tok", 2.0)
    return {"weights_bw": step, "comm_step": step, "host_s": STEP_HOST_S * step,
            "compute": tok, "comm_tok": tok, "seq_host_s": SEQ_HOST_START_S,
            "moe_layer_s": MOE_LAYER_START_S}


class Predictor:
    """Replays external runs with given family fits in place of the bundled table."""

    def __init__(self) -> None:
        from fleetplan.replica.calibration_file import load_calibration_file

        self.ev = _eval_module()
        self.res = self.ev.Resolver()
        # GPU types with a calibrated configuration keep their own efficiencies (no family fit)
        self.calibrated_gpus = {e.gpu for e in load_calibration_file().configs if e.calibrated}

    def outcomes(self, runs: Sequence[Any], fits: dict[str, Any]) -> list[Any]:
        import fleetplan.replica.params as params_mod
        from fleetplan.replica.families import gpu_family, moe_layer_family

        saved = params_mod.family_efficiency, params_mod.moe_layer_family
        params_mod.family_efficiency = lambda gpu, path=None: fits.get(gpu_family(gpu))
        params_mod.moe_layer_family = lambda gpu, table=None: moe_layer_family(gpu, fits)
        try:
            return [self.ev.predict_row(r, self.res, engine_args=True) for r in runs]
        finally:
            params_mod.family_efficiency, params_mod.moe_layer_family = saved


def _family_of(run: Any, res: Any) -> str | None:
    from fleetplan.replica.families import gpu_family

    try:
        return gpu_family(res.catalog.gpu(run.gpu))
    except Exception:  # a GPU the catalog lacks: refused by the evaluation anyway
        return None


def _subsample(runs: Sequence[Any], n: int) -> list[Any]:
    """At most ``n`` runs, one per distinct (model, config, load) first, evenly spread."""
    seen: dict[tuple[Any, ...], Any] = {}
    for r in runs:
        seen.setdefault((r.model, r.config, r.load_kind, r.load_value, r.num_prompts,
                         r.input_tokens_mean, r.output_tokens), r)
    distinct = list(seen.values())
    if len(distinct) <= n:
        return distinct
    step = len(distinct) / n
    return [distinct[int(i * step)] for i in range(n)]


def _dense(run: Any, res: Any) -> bool:
    """Whether ``run``'s model is dense (not a mixture of experts)."""
    spec, why = res.model(run.model)
    return why is None and not res.spec_of(spec).is_moe


def _latent(run: Any, res: Any) -> bool:
    """Whether ``run``'s model has multi-head latent attention (DeepSeek-V2/V3/R1). No family
    part is fitted on such runs: on DeepSeek-R1 (8 x H200, 8 x MI300X) vLLM's prefill ran 2-10 x
    slower than the spec path, by release (0.7.x far slower than 0.11), and the time per MoE
    layer, the only part their MoE stage frees, took it up: fitted on them it doubled (NVLink
    family 120 -> 243 us; AMD 295 us -> the fit's bound, 400 us) and slowed every other MoE
    model's steps. They are judged like any run, and band MoE models (docs/validation.md)."""
    spec, why = res.model(run.model)
    return why is None and res.spec_of(spec).is_mla


def fit_family(pred: Predictor, family: str, runs: Sequence[Any], base: dict[str, float],
               max_nfev: int, max_rows: int, moe_only: bool = False) -> tuple[Any, float, float]:
    """The family's :class:`~fleetplan.replica.families.FamilyFit` and its loss before and
    after (mean squared weighted log residual), in two stages: the parts of a dense step on
    the dense models' runs (at most ``max_rows`` of them), then, those held, the time per
    mixture-of-experts layer on the MoE models' runs. Fitted together, an MoE model's own
    kernel time leaked into the dense parts: on MI300X, gpt-oss-20b's slow steps pulled the
    fixed host time to 4-10 ms a step, and the FP8 Llamas held out went from 12 % to 19-29 %
    throughput error. A stage without runs keeps ``base``. ``moe_only``: the second stage
    alone, on the spec path's dense step (:attr:`FamilyFit.moe_only`)."""
    import numpy as np
    from scipy.optimize import least_squares

    from fleetplan.replica.families import PARTS, FamilyFit

    split: dict[bool, list[Any]] = {True: [], False: []}  # dense: the runs
    for r in runs:
        if not _latent(r, pred.res):  # not fitted on: see _latent
            split[_dense(r, pred.res)].append(r)
    dense = [] if moe_only else _subsample(split[True], max_rows)
    moe = _subsample(split[False], max_rows)
    x = np.log([base[k] for k in PARTS])
    x0 = x.copy()

    def make(x: Any) -> FamilyFit:
        return FamilyFit(family, {k: float(math.exp(v)) for k, v in zip(PARTS, x, strict=True)},
                         len(runs), (), (), moe_only=moe_only)

    def residuals(x: Any, rows: Sequence[Any], free: list[int]) -> Any:
        out = []
        for o in pred.outcomes(rows, {family: make(x)}):
            for label, w in RESIDUAL_LABELS.items():
                if o.refused is None and label in o.errors and o.errors[label] > -1:
                    out.append(w * math.log1p(o.errors[label]))
        out.extend(PULL * (x[free] - x0[free]))
        return np.asarray(out)

    every = list(range(len(PARTS)))
    r0 = residuals(x, dense + moe, every)
    for rows, free in ((dense, [i for i, k in enumerate(PARTS) if k != "moe_layer_s"]),
                       (moe, [PARTS.index("moe_layer_s")])):
        if not rows:
            continue

        def stage(v: Any, rows: Sequence[Any] = rows, free: list[int] = free) -> Any:
            y = x.copy()
            y[free] = v
            return residuals(y, rows, free)

        sol = least_squares(stage, x[free], bounds=(x0[free] - math.log(20),
                                                    x0[free] + math.log(20)),
                            max_nfev=max_nfev, x_scale=1.0, diff_step=0.05)
        x[free] = sol.x
    return make(x), float(np.mean(r0 ** 2)), float(np.mean(residuals(x, dense + moe,
                                                                      every) ** 2))


def fit_all(pred: Predictor, runs: Sequence[Any], base: dict[str, float], max_rows: int,
            max_nfev: int, say: Callable[[str], None]) -> dict[str, Any]:
    """One fit per family with runs among ``runs`` (refused runs left out)."""
    baseline = pred.outcomes(runs, {})
    usable = [o.run for o in baseline if o.refused is None
              and not any("calibrated pair" in n for n in o.notes)]
    by_family: dict[str, list[Any]] = {}
    for r in usable:
        fam = _family_of(r, pred.res)
        if fam is not None and r.gpu not in pred.calibrated_gpus:
            by_family.setdefault(fam, []).append(r)
    fits = {}
    for fam, rows in sorted(by_family.items()):
        t = time.monotonic()
        fit, before, after = fit_family(pred, fam, rows, base, max_nfev, max_rows)
        fits[fam] = replace(fit, datasets=tuple(sorted({r.source for r in rows})),
                            gpus=tuple(sorted({r.gpu for r in rows})))
        say(f"  {fam}: {len(rows)} runs, loss {before:.3f} -> "
            f"{after:.3f} in {time.monotonic() - t:.0f} s; "
            + ", ".join(f"{k} {v:.3g}" for k, v in fit.parts.items()))
    return fits


def _check_family(pred: Predictor, fam: str, rows: list[Any], base: dict[str, float],
                  args: Any, say: Callable[[str], None],
                  moe_only: bool = False) -> tuple[str, list[Any]]:
    """How ``fam`` predicts its own runs held out (``rows``: today's outcomes of its runs):
    leave-one-GPU-out where it has two GPU types, else leave-one-model-out where it has two
    models; ``("", [])`` when neither can be done."""
    for key, check in (("gpu", "leave-one-GPU-out"), ("model", "leave-one-model-out")):
        groups = sorted({getattr(o.run, key) for o in rows})
        if len(groups) < 2:
            continue
        held: list[Any] = []
        for g in groups:
            say(f"  {fam}: {check}, {g} held out")
            rest = [o.run for o in rows if getattr(o.run, key) != g]
            fit, _b, _a = fit_family(pred, fam, rest, base, args.max_nfev, args.max_rows,
                                     moe_only)
            held += pred.outcomes([o.run for o in rows if getattr(o.run, key) == g],
                                  {fam: fit})
        return check, held
    return "", []


def _judge(held: Sequence[Any], rows: Sequence[Any]) -> tuple[list[str], bool]:
    """The figures of a family's held-out outcomes against today's (``rows``), and whether it
    is worse: over all its runs, or on any one dataset they come from (a fit that helps one
    server stack at another's expense has learned a stack, not a GPU family, and a planner's
    stack may be either)."""
    figures, worse = [], False
    for label in ("throughput", "TPOT p50"):
        a, b = _medians(held, label), _medians(rows, label)
        if a is not None and b is not None:
            figures.append(f"{label} {100 * a:.0f}% held out against {100 * b:.0f}% today")
            worse |= a > b + 1e-9
    sources = sorted({o.run.source for o in rows})
    for src in sources if len(sources) > 1 else ():
        for label in ("throughput", "TPOT p50"):
            a = _medians([o for o in held if o.run.source == src], label)
            b = _medians([o for o in rows if o.run.source == src], label)
            if a is not None and b is not None and a > b + 1e-9:
                figures.append(f"worse on `{src}`: {label} {100 * a:.1f}% held out "
                               f"against {100 * b:.1f}% today")
                worse = True
    return figures, worse


def _medians(outs: Sequence[Any], label: str) -> float | None:
    errs = [abs(o.errors[label]) for o in outs if o.refused is None and label in o.errors]
    return statistics.median(errs) if errs else None


def main(argv: list[str] | None = None) -> int:
    from fleetplan._io import atomic_write_text
    from fleetplan.profiles.external import load_external_runs
    from fleetplan.validate.external_bands import (
        ExternalOutcome,
        dataset_rows,
        external_fold,
        external_markdown,
        widening,
    )

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-rows", type=int, default=24,
                    help="runs fitted per family and stage (dense, MoE)")
    ap.add_argument("--max-nfev", type=int, default=40, help="loss evaluations per fit")
    ap.add_argument("--ttft-weight", type=float, default=TTFT_WEIGHT,
                    help="weight of TTFT p50 residuals")
    ap.add_argument("--dry-run", action="store_true", help="print, write nothing")
    args = ap.parse_args(argv)
    RESIDUAL_LABELS["TTFT p50"] = args.ttft_weight
    t0 = time.monotonic()

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    pred = Predictor()
    runs = list(load_external_runs().runs)
    sources = sorted({r.source for r in runs})
    base = _pooled_parts()
    say(f"{len(runs)} runs of {len(sources)} datasets; pooled parts: "
        + ", ".join(f"{k} {v:.3g}" for k, v in base.items()))
    today = pred.outcomes(runs, {})
    say("every family, on every run:")
    final = fit_all(pred, runs, base, args.max_rows, args.max_nfev, say)
    # a family is kept only where, held out, it predicts its runs no worse than today's path
    verdicts: dict[str, str] = {}
    used = {id(o.run): o for o in today}  # run ids repeat within a source: the record itself
    for fam in sorted(final):
        rows = [o for o in today if o.refused is None and not any(
            "calibrated pair" in n for n in o.notes) and o.run.gpu not in pred.calibrated_gpus
            and _family_of(o.run, pred.res) == fam]
        check, held = _check_family(pred, fam, rows, base, args, say)
        if not check:
            verdicts[fam] = ("not kept: its runs are of one GPU type and one model "
                             f"({rows[0].run.gpu}, {rows[0].run.model}), so nothing checks it "
                             "held out")
            del final[fam]
            continue
        figures, worse = _judge(held, rows)
        verdicts[fam] = (f"{'not kept' if worse else 'kept'}: {check}, "
                         + "; ".join(figures) + f" (median abs. error, {len(rows)} runs)")
        if worse and not all(_dense(o.run, pred.res) for o in rows):
            # its time per MoE layer alone, on the spec path's dense step: kept where held out
            # its runs are no worse (its dense models' runs are today's, unchanged)
            check, held = _check_family(pred, fam, rows, base, args, say, moe_only=True)
            figures, worse = _judge(held, rows) if check else ([], True)
            moe = f"{check}, " + "; ".join(figures)
            verdicts[fam] = (f"{verdicts[fam]}; nor its time per MoE layer alone: {moe}" if worse
                             else f"kept for its time per MoE layer alone: {moe}; its whole "
                             f"fit {verdicts[fam]}")
            if not worse:
                fit, _b, _a = fit_family(pred, fam, [o.run for o in rows], base,
                                         args.max_nfev, args.max_rows, moe_only=True)
                final[fam] = replace(fit, datasets=final[fam].datasets, gpus=final[fam].gpus)
        if worse:
            del final[fam]
        else:
            used.update({id(o.run): o for o in held})
        say(f"  {fam}: {verdicts[fam]}")

    # every other run as the product predicts it with the kept fits: a GPU type measured here
    # or of a family without a kept fit takes the spec path, and an MoE model's step the time
    # per MoE layer of its family or its family's sibling (fleetplan.replica.families.
    # moe_layer_family; none of those runs was fitted on)
    rest = [o.run for o in today if used[id(o.run)] is o]
    used.update({id(o.run): o for o in pred.outcomes(rest, final)})

    def rows_of(outs: Sequence[Any]) -> list[ExternalOutcome]:
        return [ExternalOutcome.from_dict({
            "source": o.run.source, "config": getattr(o, "config", None) or o.run.config,
            "refused": o.refused, "errors": o.errors,
            "mla": o.refused is None and _latent(o.run, pred.res)}) for o in outs]

    # what the product predicts for each run, held out where a kept family fit is used
    band_rows = rows_of(list(used.values()))
    today_rows = rows_of(today)
    widen = widening([o for o in band_rows if not o.mla])
    # latent-attention models: two datasets, each judged by the other's spread
    widen_mla = widening([o for o in band_rows if o.mla], min_datasets=2)
    command = "python scripts/fit_family_efficiency.py"
    lines = [SECTION, "",
             "Public `vllm serve` benchmarks other people measured on their own hardware "
             "(`data/external/`, [data-sources.md](data-sources.md)), predicted from specs "
             "(nothing calibrated on them), with their servers, engine settings and workloads "
             "as recorded. A GPU type the bundled store never measured may take the "
             "efficiencies its family was fitted to on these runs "
             "(`data/family_efficiency.json`, `fleetplan.replica.families`); a family is kept "
             "only where, held out (leave-one-GPU-out, else leave-one-model-out), it predicts "
             "its runs no worse than the spec path without it, over all its runs and on "
             "each dataset they come from (table below), and a kept "
             "family's runs count here with their held-out errors. Per dataset: median |error| "
             "of the uncalibrated prediction per metric, and how many measured values the 80% "
             "band holds when it is read from the *other* datasets' errors (its width, hi / "
             "lo, in brackets). Each dataset brings its own bias, so the other datasets' "
             "10-90% spread is widened, per metric, by the least factor at which these "
             "leave-one-dataset-out bands hold 80% of all held-out values (one factor per "
             "metric, chosen on these same folds): "
             + ", ".join(f"{k} x{v:g}" for k, v in widen.items()) + ". Models of multi-head "
             "latent attention (DeepSeek-R1) are banded apart, from their own runs: a run of "
             "one is judged by the other datasets' runs of such models, widened by their own "
             "factors ("
             + ", ".join(f"{k} x{v:g}" for k, v in widen_mla.items()) + "; two datasets, "
             "each judged by the other), and the others by the others "
             "(`fleetplan.validate.external_bands`). The bands of GPU types the bundled store "
             "never measured, of every MoE model and of latent-attention models are these "
             "(`data/spec_errors.json`, fold `external`).", ""]
    lines += external_markdown(dataset_rows(band_rows, widen, widen_mla), command=command)
    lines += ["", "**GPU families** (`data/family_efficiency.json` holds the kept ones):", "",
              "| family | verdict |", "| --- | --- |"]
    lines += [f"| `{f}` | {v} |" for f, v in sorted(verdicts.items())]
    lines += ["", "The spec path without any family fit, for comparison:", ""]
    lines += external_markdown(dataset_rows(today_rows, widen, widen_mla),
                               command=command)[:-2]
    print("\n".join(lines))
    if args.dry_run:
        return 0
    fam_doc = {"source": (f"{command}: least squares on the replica model's replays of "
                          f"data/external runs ({', '.join(sources)}); kept where held out "
                          "no worse than without"),
               "families": {f: fit.to_dict() for f, fit in sorted(final.items())}}
    atomic_write_text(ROOT / "data" / "family_efficiency.json",
                      json.dumps(fam_doc, indent=1, sort_keys=True) + "\n")
    errors_path = ROOT / "data" / "spec_errors.json"
    spec = json.loads(errors_path.read_text(encoding="utf-8"))
    spec["folds"]["external"] = external_fold(band_rows, widen, widen_mla)
    spec["external_source"] = (f"{command}: errors of "
                               f"{sum(o.refused is None for o in band_rows)} runs of "
                               "data/external, held out where a family fit predicts them")
    atomic_write_text(errors_path, json.dumps(spec, indent=1) + "\n")
    doc = VALIDATION_DOC.read_text(encoding="utf-8")
    head = doc.split(SECTION)[0].rstrip("\n")
    atomic_write_text(VALIDATION_DOC, head + "\n\n" + "\n".join(lines) + "\n")
    say(f"wrote data/family_efficiency.json, data/spec_errors.json (external fold), "
        f"docs/validation.md in {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""How the spec path fares on other people's runs: per-dataset errors, error bands judged by
leave-one-dataset-out, and the error table that bands of never-measured GPUs are read from.

The runs are those of ``data/external/`` (public benchmarks measured by others on their own
hardware, :mod:`fleetplan.profiles.external`), each predicted without any fit to it
(``scripts/eval_external.py``, which writes one :class:`ExternalOutcome` per run). Errors are
signed, ``e = predicted / measured - 1`` (the measured value is the predicted one / ``(1 +
e)``), as in :mod:`fleetplan.validate.bands`.

- :func:`dataset_rows`: per dataset (source), how many runs were predicted, the median
  ``|e|`` of throughput, TTFT p50 and p99 and TPOT p50, and the **leave-one-dataset-out** 80%
  band: the 10th and 90th percentiles of ``e`` over the *other* datasets' runs, judged by how
  many of this dataset's measured values it holds (``e`` between them) and its width ``(1 +
  e90) / (1 + e10)``. A band read from the dataset's own errors would hold 80% by
  construction; held out, it says what a planner on new hardware gets.
- :func:`external_fold`: the quantiles over every dataset, per GPU type and pooled (``all``):
  the ``external`` fold of ``data/spec_errors.json``, from which
  :meth:`fleetplan.validate.bands.ErrorTable.quantiles` reads the band of a GPU type the
  bundled store never measured.
- :func:`external_markdown`: the table of ``docs/validation.md``'s section on these runs.

Models of multi-head latent attention (DeepSeek-V2/V3/R1) are banded apart: their band is read
from the errors of such models' runs (the ``mla`` row of the fold), every other model's from the
other runs (``all`` and ``<gpu>``), and a held-out dataset's run is judged by the other
datasets' runs of its kind (of every kind where the others have fewer than two of it), with a
widening factor of its kind (:func:`widening`). vLLM served DeepSeek-R1 1.4-7 times fewer
requests a second than the spec path predicts (its prefill 2-10 x slower, by release: 0.7.x far
slower than 0.11), where the other models are within tens of percent (docs/validation.md): one
band over both would be too wide for the others and still too narrow for them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.validate.bands import EXTERNAL_FOLD, ErrorQuantiles

__all__ = ["EXTERNAL_FOLD", "DatasetRow", "ExternalOutcome", "LabelRow", "dataset_rows",
           "external_fold", "external_markdown", "widening"]
# eval_external's labels -> the metrics of the error table they bound (throughput is output
# tokens/s where the source states it, else requests/s: either bounds both)
LABEL_METRICS: dict[str, tuple[str, ...]] = {
    "throughput": ("request_throughput", "output_throughput"),
    "TTFT p50": ("ttft_p50_ms",),
    "TTFT p99": ("ttft_p99_ms",),
    "TPOT p50": ("tpot_p50_ms",),
}
LABELS = tuple(LABEL_METRICS)
MIN_GPU_RUNS = 8  # fewer runs of one GPU type: its band is the pooled one
# a metric measured in fewer datasets has no leave-one-dataset-out band: a held-out dataset's
# band must be read from the spread of two others at least (one other is one stack's bias)
MIN_DATASETS = 3
BAND = (0.1, 0.9)
P10_FLOOR = -0.9999  # the lowest 10th-percentile error a fold row keeps (external_fold)


@dataclass(frozen=True)
class ExternalOutcome:
    """One run of ``data/external`` as ``scripts/eval_external.py --json`` writes it: its
    source, GPU type, whether it was refused, and per label the signed error."""

    source: str
    gpu: str
    refused: str | None
    errors: Mapping[str, float] = field(default_factory=dict)
    mla: bool = False  # the run's model has multi-head latent attention

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ExternalOutcome:
        gpu = d.get("gpu") or HardwareConfig.split(str(d["config"]))[1]  # layout left out
        return cls(str(d["source"]), str(gpu), d.get("refused"),
                   {str(k): float(v) for k, v in (d.get("errors") or {}).items()},
                   bool(d.get("mla", False)))


@dataclass(frozen=True)
class LabelRow:
    """One metric of one dataset: median ``|e|`` over ``n`` runs and the held-out band's
    coverage (``inside`` of ``n``, None without other datasets' errors) and width."""

    median_abs: float | None
    n: int
    inside: int | None = None
    width: float | None = None


@dataclass(frozen=True)
class DatasetRow:
    source: str
    runs: int
    predicted: int
    metrics: Mapping[str, LabelRow]


def _errors(outcomes: Iterable[ExternalOutcome], label: str) -> list[float]:
    return [o.errors[label] for o in outcomes if o.refused is None and label in o.errors]


def band_of(errors: Sequence[float], widen: float = 1.0) -> tuple[float, float]:
    """The 10th and 90th percentiles of signed errors (linear between order statistics),
    widened ``widen`` times about their middle in ``ln(1 + e)`` (1: as measured), the 10th at
    least :data:`P10_FLOOR`."""
    q10, q90 = (float(v) for v in np.quantile(np.asarray(errors, dtype=float), BAND))
    if widen != 1.0:
        lo, hi = math.log1p(max(q10, P10_FLOOR)), math.log1p(q90)
        mid, half = (lo + hi) / 2, (hi - lo) / 2 * widen
        q10, q90 = math.expm1(mid - half), math.expm1(mid + half)
    # an error of -1 (a prediction of 0) would put the band's top at infinity: the lowest
    # error kept is P10_FLOOR (the measured value up to 10,000 x the prediction)
    return max(q10, P10_FLOOR), q90


def _datasets(outcomes: Sequence[ExternalOutcome], label: str) -> int:
    """How many datasets measured ``label`` on a predicted run."""
    return len({o.source for o in outcomes if _errors([o], label)})


def dataset_rows(outcomes: Sequence[ExternalOutcome],
                 widen: Mapping[str, float] | None = None,
                 widen_mla: Mapping[str, float] | None = None) -> list[DatasetRow]:
    """Per dataset: runs, predicted, and per label the median ``|e|`` and the
    leave-one-dataset-out band's coverage and width (``widen``: per label, how many times the
    other datasets' 10-90% spread the band spans, :func:`widening`; default 1; ``widen_mla``:
    the same for runs of latent-attention models, default ``widen``). Each run is judged by the
    other datasets' runs of its kind (of every kind where they have fewer than two of it); the
    width is the median of the dataset's runs' band widths."""
    sources = sorted({o.source for o in outcomes})
    rows = []
    for s in sources:
        mine = [o for o in outcomes if o.source == s]
        others = [o for o in outcomes if o.source != s]
        metrics = {}
        for label in LABELS:
            errs = _errors(mine, label)
            if not errs:
                continue
            inside = width = None
            held_in, widths = 0, []
            for mla in (False, True):
                factors = widen_mla if mla and widen_mla is not None else widen
                # a label the factors lack has no held-out band (too few datasets: widening)
                if factors is not None and label not in factors:
                    continue
                own = _errors([o for o in mine if o.mla is mla], label)
                held = _errors([o for o in others if o.mla is mla], label)
                if len(held) < 2:
                    held = _errors(others, label)
                if not own or len(held) < 2:
                    continue
                lo, hi = band_of(held, (factors or {}).get(label, 1.0))
                held_in += sum(lo <= e <= hi for e in own)
                widths += [(1.0 + hi) / (1.0 + lo)] * len(own)
            if widths:
                inside, width = held_in, statistics.median(widths)
            metrics[label] = LabelRow(statistics.median(abs(e) for e in errs), len(errs),
                                      inside, width)
        rows.append(DatasetRow(s, len(mine), sum(o.refused is None for o in mine), metrics))
    return rows


def widening(outcomes: Sequence[ExternalOutcome], target: float = 0.8,
             limit: float = 6.0, min_datasets: int = MIN_DATASETS) -> dict[str, float]:
    """Per label, the least factor (steps of 0.05, at most ``limit``) by which the other
    datasets' 10-90% spread must be widened for the leave-one-dataset-out bands to hold
    ``target`` of all held-out values; a label measured in fewer than ``min_datasets``
    datasets is left out (no band of it can be judged held out). Each dataset brings its own
    bias, so a spread that holds 80% of the pooled runs holds fewer of a dataset it was not
    read from. Call it on the runs of one kind (latent-attention models or the others)."""
    out = {}
    for label in LABELS:
        factor = 1.0
        while True:
            rows = dataset_rows(outcomes, {label: factor})
            got = [m for r in rows if (m := r.metrics.get(label)) is not None
                   and m.inside is not None]
            n = sum(m.n for m in got)
            if not n or sum(m.inside or 0 for m in got) / n >= target or factor >= limit:
                break
            factor = round(factor + 0.05, 2)
        if n and _datasets(outcomes, label) >= min_datasets:
            out[label] = factor  # (a metric of too few datasets has no band to judge: left out)
    return out


def external_fold(outcomes: Sequence[ExternalOutcome], widen: Mapping[str, float] | None = None,
                  widen_mla: Mapping[str, float] | None = None
                  ) -> dict[str, dict[str, dict[str, Any]]]:
    """``{gpu | "all" | "mla": {metric: {p10, p50, p90, n, median_abs_pct}}}`` over every
    dataset: the runs of latent-attention models under ``mla`` (pooled over GPU types, widened
    by ``widen_mla``), the others per GPU type and pooled under ``all`` (widened by ``widen``);
    the 10th and 90th percentiles widened per label (:func:`widening`; recorded as
    ``widened``; a label the factors lack is left out); a GPU type with fewer than
    :data:`MIN_GPU_RUNS` runs of a metric has no row of its own."""
    groups: dict[str, list[ExternalOutcome]] = {"all": [], "mla": []}
    for o in outcomes:
        if o.mla:
            groups["mla"].append(o)
        else:
            groups["all"].append(o)
            groups.setdefault(o.gpu, []).append(o)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for key, group in sorted(groups.items()):
        factors = widen_mla if key == "mla" else widen
        row: dict[str, dict[str, Any]] = {}
        for label, metrics in LABEL_METRICS.items():
            if factors is not None and label not in factors:
                continue  # never judged held out: GPU types keep the store's own table
            errs = _errors(group, label)
            if len(errs) < (2 if key in ("all", "mla") else MIN_GPU_RUNS):
                continue
            q = ErrorQuantiles.of(errs).to_dict()
            k = (factors or {}).get(label, 1.0)
            lo, hi = band_of(errs, k)
            q.update(p10=round(max(min(lo, q["p50"]), P10_FLOOR), 4),  # (band_of's floor)
                     p90=round(max(hi, q["p50"]), 4), widened=k)
            q["median_abs_pct"] = round(100 * statistics.median(abs(e) for e in errs), 1)
            for m in metrics:
                row[m] = dict(q)
        if row:
            out[key] = row
    return out


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"


def external_markdown(rows: Sequence[DatasetRow], *, command: str,
                      held_out: str = "dataset") -> list[str]:
    """The per-dataset table (lines of Markdown; ``held_out``: what a row is, ``dataset`` or
    ``GPU type``, each judged by the bands of the others)."""
    head = [held_out, "predicted / runs"]
    for label in LABELS:
        head += [f"{label} median abs. error", f"{label} band holds (width)"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    totals: dict[str, list[int]] = {label: [0, 0] for label in LABELS}
    for r in rows:
        cells = [f"`{r.source}`", f"{r.predicted} / {r.runs}"]
        for label in LABELS:
            m = r.metrics.get(label)
            if m is None:
                cells += ["-", "-"]
                continue
            cells.append(f"{_pct(m.median_abs)} (n={m.n})")
            if m.inside is None or m.width is None:
                cells.append("-")
            else:
                cells.append(f"{m.inside}/{m.n} (x{m.width:.2f})")
                totals[label][0] += m.inside
                totals[label][1] += m.n
        lines.append("| " + " | ".join(cells) + " |")
    held = "; ".join(f"{label} {k}/{n} ({100 * k / n:.0f}%)" for label, (k, n) in totals.items()
                     if n)
    lines += ["", f"Leave-one-{held_out.split()[0]}-out bands over all rows hold: "
              f"{held or 'none'}. Regenerated by `{command}`."]
    return lines

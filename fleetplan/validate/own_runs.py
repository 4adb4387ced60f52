"""How a calibrated pair reproduces its own measured runs: what a calibrated prediction carries.

A spec-path (uncalibrated) prediction carries error bands from held-out runs
(:mod:`fleetplan.validate.bands`). A calibrated one has its own runs to answer for: the
calibration file keeps, per configuration, every run's in-sample error and the runs it flagged
and did not fit (:class:`~fleetplan.replica.calibration_file.FitRunReport`). Where the step model
cannot describe a server (the tensor-parallel RTX 4090 delivery delays of
docs/replica-model.md: in-sample TTFT p99 -83 % at 16 req/s, its 1 and 4 req/s runs flagged), a
prediction that said only "calibrated: true" would claim more than the data do.

Main entry: :func:`own_runs` (the record of one calibration entry; ``None`` for no entry),
``to_dict`` (the ``own_runs`` field of ``fleetplan predict --format json``) and ``caption``
(the line under its table); :func:`flagged_rates` (the flagged rates of a calibrated pair in
the calibration read, a data context's or the default one, which ``solve`` and ``simulate``
name in their notes). The figures are in-sample: how far the fit misses runs it was fitted to,
a floor on its error at rates it was not (docs/validation.md has the held-out ones).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fleetplan.replica.calibration_file import (
    CalibrationEntry,
    CalibrationSource,
    load_calibration_file,
)

#: The metrics whose worst in-sample error a calibrated prediction reports. Not throughput:
#: the file's figures are the fit's replay over its two length seeds
#: (:data:`fleetplan.replica.calibrate.FIT_SEEDS`), and a burst's throughput is decided by the
#: few long replies at its end, which one seed alone moves by -21 to +29 % (14B on one H100 at
#: 32 req/s); docs/validation.md's five-seed figures are the ones to read for throughput.
OWN_RUN_METRICS = ("ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "tpot_p50_ms")


@dataclass(frozen=True)
class WorstError:
    """The largest in-sample |error| of one metric over the fitted runs, signed, and its rate."""

    error_pct: float
    request_rate: float


#: The figure of a flagged run that judges the fit's light-load steps: its token gaps. A flagged
#: run's first tokens came late, so its TTFT says nothing of the server's steps; its gaps
#: between tokens do (an engine-first fit, fleetplan.replica.priors.engine_first, fits them
#: where they were not delivered in bunches; docs/replica-model.md). Before those fits, a fit
#: made only from high-rate runs put the per-sequence cost into the fixed step, and this is
#: where it showed (14B on 4 x RTX 4090: ITL p50 replayed +133 % at 1 req/s).
FLAGGED_GAP_METRIC = "itl_p50_ms"


@dataclass(frozen=True)
class OwnRuns:
    """A calibration entry's runs: fitted rates, flagged ones (with why and their token-gap
    error), worst errors."""

    fitted_rates: tuple[float, ...]
    flagged: tuple[tuple[float, str], ...]  # (request rate, flag reason)
    worst: dict[str, WorstError]
    #: ITL p50 error % of each flagged run, by request rate (None where the file has none)
    flagged_gap_error_pct: tuple[float | None, ...] = ()

    def _gaps(self) -> tuple[float | None, ...]:
        """:attr:`flagged_gap_error_pct`, one per flagged run (None where not given)."""
        return self.flagged_gap_error_pct or (None,) * len(self.flagged)

    def slowest_flagged_gap(self) -> float | None:
        """The largest token-gap error of the flagged runs where it is above
        :data:`LIGHT_LOAD_SLOW_PCT` (the fit's step is slow at light load), else ``None``."""
        worst = max((g for g in self._gaps() if g is not None), default=None)
        return worst if worst is not None and worst > LIGHT_LOAD_SLOW_PCT else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "fitted_rates": list(self.fitted_rates),
            "flagged": [{"request_rate": r, "flag_reason": why, "itl_p50_error_pct": gap}
                        for (r, why), gap in zip(self.flagged, self._gaps(), strict=True)],
            "worst_error_pct": {m: {"error_pct": w.error_pct, "request_rate": w.request_rate}
                                for m, w in self.worst.items()},
            "note": "in-sample: the fit's replay of the runs it was fitted to, over its length "
                    "seeds, as the calibration file records it (docs/validation.md has five-seed "
                    "and held-out errors)",
        }

    def caption(self) -> str:
        """One or two lines for a table's caption."""
        rates = ", ".join(f"{r:g}" for r in self.fitted_rates) or "none"
        worst = ", ".join(f"{_LABEL[m]} {w.error_pct:+.0f} % ({w.request_rate:g} req/s)"
                          for m, w in self.worst.items())
        line = f"its own runs: fitted at {rates} req/s; worst in-sample error {worst}"
        if self.flagged:
            line += (f"\nflagged, not fitted: {', '.join(f'{r:g}' for r, _ in self.flagged)} "
                     f"req/s ({self.flagged[0][1]}): its measured TTFT there is above any "
                     "work-conserving server's, so expect TTFT above this prediction near "
                     "those rates (their first tokens are left out of the fit; "
                     "docs/replica-model.md)")
            if self.slowest_flagged_gap() is not None:
                gaps = [(r, g) for (r, _), g in zip(self.flagged, self._gaps(), strict=True)
                        if g is not None]
                line += ("\nits token gaps there replay "
                         + ", ".join(f"{g:+.0f} % ({r:g} req/s)" for r, g in gaps)
                         + " (ITL p50, replayed against measured): at light load this "
                         "prediction's token gaps may run that much above the server's")
        return line


#: A flagged run's replayed token gaps above this (%) get a line of their own in the caption:
#: twice the TPOT target of docs/validation.md, well outside its noise floor.
LIGHT_LOAD_SLOW_PCT = 10.0

_LABEL = {"ttft_p50_ms": "TTFT p50",
          "ttft_p90_ms": "TTFT p90", "ttft_p99_ms": "TTFT p99", "tpot_p50_ms": "TPOT p50"}


def own_runs(entry: CalibrationEntry | None) -> OwnRuns | None:
    """The record of ``entry``'s runs (None without an entry or without runs)."""
    if entry is None or not entry.runs:
        return None
    fitted = [r for r in entry.runs if r.used_in_fit and not r.flagged]
    worst: dict[str, WorstError] = {}
    for m in OWN_RUN_METRICS:
        errs = [(r.error_pct[m], r.request_rate) for r in fitted if m in r.error_pct]
        if errs:
            e, rate = max(errs, key=lambda t: (abs(t[0]), -t[1]))
            worst[m] = WorstError(float(e), float(rate))
    flagged_runs = sorted((r for r in entry.runs if r.flagged), key=lambda r: r.request_rate)
    flagged = tuple((float(r.request_rate), r.flag_reason or "flagged") for r in flagged_runs)
    gaps = tuple(float(r.error_pct[FLAGGED_GAP_METRIC]) if FLAGGED_GAP_METRIC in r.error_pct
                 else None for r in flagged_runs)
    return OwnRuns(tuple(sorted({float(r.request_rate) for r in fitted})), flagged, worst, gaps)


#: What a flagged run means for a prediction, in the notes of ``solve`` and ``simulate``.
FLAGGED_MEANING = ("TTFT that falls as load rises, which no work-conserving server does; on the "
                   "bundled tensor-parallel RTX 4090 servers a delivery delay, "
                   "docs/replica-model.md")


def _of(model: str, config: str, calibration: CalibrationSource) -> OwnRuns | None:
    """The record of ``model`` on ``config`` (canonical names, as a scenario's or a plan's) in
    ``calibration`` (a data context's; ``None``: the default file; None: not calibrated)."""
    from fleetplan.catalog.models import normalize_model

    return own_runs(load_calibration_file(calibration).entry(normalize_model(model), config))


def flagged_rates(model: str, config: str, *,
                  calibration: CalibrationSource = None) -> tuple[float, ...]:
    """The request rates of ``model`` on ``config`` that ``calibration`` (a data context's,
    else the default file) flagged and did not fit (empty for an uncalibrated pair or one
    without flags)."""
    rec = _of(model, config, calibration)
    return tuple(r for r, _ in rec.flagged) if rec is not None else ()


def slow_light_load_step(model: str, config: str, *,
                         calibration: CalibrationSource = None) -> float | None:
    """The largest replayed token-gap error (ITL p50, %) of the runs ``calibration`` (a data
    context's, else the default file) flagged for ``model`` on ``config``, where it is above
    :data:`LIGHT_LOAD_SLOW_PCT` (the fit's token gaps are slow at light load); else ``None``."""
    rec = _of(model, config, calibration)
    return rec.slowest_flagged_gap() if rec is not None else None


#: What a slow light-load step means, in the notes of ``solve`` and ``simulate``.
SLOW_STEP_MEANING = ("the replica model's token gaps follow its time per output token, while "
                     "these servers' measured gaps at light load ran below theirs "
                     "(docs/replica-model.md)")


def rates_text(rates: tuple[float, ...]) -> str:
    return ", ".join(f"{r:g}" for r in rates) + " req/s"

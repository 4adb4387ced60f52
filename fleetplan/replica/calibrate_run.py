"""Calibrate a profile store as ``fleetplan calibrate`` does, as one library call.

:class:`CalibrateRequest` is the typed argument record (which runs, the file to write, the fit's
settings); it refuses bad input when built, one line naming the field (its CLI flag where the
CLI passes ``names``). :func:`run_calibration` fits it: a run whose model or GPU the catalog
does not know, and (when no one configuration was asked for) a configuration whose fit fails,
is refused alone, one line each to ``on_refused``, and the others are fitted.
:class:`CalibrationOutcome` holds the fits; :meth:`CalibrationOutcome.save` writes them into the
target file (the only side effect), and :meth:`~CalibrationOutcome.to_dict` is the JSON of
``fleetplan calibrate --format json``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleetplan._progress import Progress
from fleetplan._request import RequestRecord
from fleetplan.catalog.catalog import Catalog
from fleetplan.errors import FleetplanError, InputError
from fleetplan.profiles.store import ProfileStore
from fleetplan.replica.calibrate import FIT_SEEDS, check_fit_seeds
from fleetplan.replica.calibration import DEFAULT_MAX_NFEV, Calibration
from fleetplan.replica.params_record import C_DELIVER_MAX_S

MIN_MAX_NFEV, MAX_MAX_NFEV = 5, 1000


@dataclass(frozen=True, kw_only=True)
class CalibrateRequest(RequestRecord):
    """One calibration asked for: the runs of ``store`` (default: yours, else the bundled
    ones), only ``model`` / ``config`` when given, written into ``out`` (default: your
    calibration file, started from the bundled one). ``jobs``: processes; ``max_nfev``:
    simulations per configuration fit (5-1000); ``host_time_us``: the host time per streamed
    output for every fit, or ``fit_host_time`` to choose it from the runs (not both);
    ``fit_seeds``: the length seeds every fit replays. ``names``: how the errors call each
    field (default its own name; the CLI passes its flags)."""

    model: str | None = None
    config: str | None = None
    out: Path | None = None
    store: Path | None = None
    jobs: int | None = None
    max_nfev: int = DEFAULT_MAX_NFEV
    host_time_us: float | None = None
    fit_host_time: bool = False
    fit_seeds: tuple[int, ...] = FIT_SEEDS

    def __post_init__(self) -> None:
        n = self.name
        if self.fit_host_time and self.host_time_us is not None:
            raise InputError(f"{n('host_time_us')} and {n('fit_host_time')}: give a host time "
                             "or let the runs choose it, not both")
        if self.jobs is not None and (isinstance(self.jobs, bool) or self.jobs < 1):
            raise InputError(f"{n('jobs')} {self.jobs!r} must be a whole number >= 1")
        if not MIN_MAX_NFEV <= self.max_nfev <= MAX_MAX_NFEV:
            raise InputError(f"{n('max_nfev')} {self.max_nfev!r} must be from {MIN_MAX_NFEV} "
                             f"to {MAX_MAX_NFEV}")
        top = C_DELIVER_MAX_S * 1e6
        if self.host_time_us is not None and not (
                math.isfinite(self.host_time_us) and 0 <= self.host_time_us <= top):
            raise InputError(f"{n('host_time_us')} {self.host_time_us!r} must be from 0 to "
                             f"{top:g}")
        check_fit_seeds(self.fit_seeds)


@dataclass
class CalibrationOutcome:
    """What :func:`run_calibration` fitted: ``calibrations`` (one, or one per configuration
    when some were refused), the ``refused`` lines, the ``target`` file and where a new one
    starts from (``start``: the bundled calibration, when the default target is new)."""

    request: CalibrateRequest
    target: Path
    calibrations: list[Calibration]
    refused: list[str]
    start: Path | None = None

    def save(self) -> Path:
        """Write the fits into :attr:`target` atomically; configurations not refitted keep
        their entries (a new default target starts as a copy of the bundled file)."""
        from fleetplan._io import write_bytes_atomic
        from fleetplan.replica.calibration import write_calibration

        if self.start is not None and not self.target.exists():
            write_bytes_atomic(self.target, self.start.read_bytes())
        for cal in self.calibrations:  # each merges into the file
            write_calibration(cal, self.target)
        return self.target

    def rows(self) -> list[dict[str, Any]]:
        """One row per fitted configuration: its runs and fitted parameters (display units)."""
        cals, rows = self.calibrations, []
        for f in (f for cal in cals for f in cal.fits):
            p = f.params
            rows.append({
                "model": p.model, "config": p.config, "calibrated": p.calibrated,
                "runs": len(f.runs), "flagged": sum(r.flagged for r in f.runs),
                # replayed with each request's recorded tokens instead of drawn lengths
                "runs_with_recorded_lengths": sum(
                    r.key == (p.model, p.config) and r.request_lengths is not None
                    for cal in cals for r in cal.runs),
                "loss": f.loss, "c_step_ms": p.c_step * 1e3,
                "c_prefill_tok_us": p.c_prefill_tok * 1e6, "c_seq_us": p.c_seq * 1e6,
                "c_kv_tok_ns": p.c_kv_tok * 1e9, "overhead_ms": p.overhead_s * 1e3,
                "host_time_us": p.c_deliver * 1e6, "kv_capacity_tokens": p.kv_capacity_tokens,
            })
        return rows

    def flagged(self) -> list[dict[str, Any]]:
        """The runs no work-conserving server can produce, with the reason."""
        return [{"model": r.model, "config": r.config, "request_rate": r.request_rate,
                 "flag_reason": r.flag_reason}
                for cal in self.calibrations for r in cal.runs if r.flagged]

    def excluded(self) -> list[dict[str, Any]]:
        """One metric of an otherwise usable run that its own figures contradict
        (``runs.bunched_itl``), left out of the fit."""
        return [{"model": r.model, "config": r.config, "request_rate": r.request_rate,
                 "metric": metric, "reason": why}
                for cal in self.calibrations for r in cal.runs for metric, why in r.excluded]

    def host_time_choice(self) -> Any:
        """How the host time was chosen (``fit_host_time``), else None."""
        return next((c.host_time for c in self.calibrations if c.host_time is not None), None)

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``fleetplan calibrate --format json``."""
        doc: dict[str, Any] = {"out": str(self.target), "configs": self.rows(),
                               "flagged": self.flagged(), "excluded": self.excluded(),
                               "fit_seeds": list(self.request.fit_seeds)}
        c = self.host_time_choice()
        if c is not None:
            doc["host_time_search"] = {"host_time_us": c.host_time_s * 1e6,
                                       "configs": c.configs,
                                       "points": [p.to_dict() for p in c.points]}
        return doc


def run_calibration(request: CalibrateRequest, *, progress: Progress | None = None,
                    on_refused: Callable[[str], None] | None = None,
                    catalog: Catalog | None = None) -> CalibrationOutcome:
    """Fit the runs ``request`` selects (their models and GPUs read in ``catalog``, default: the
    bundled one), from the store the request names (default: yours, else the bundled one).
    Each refused run or configuration is a line to ``on_refused`` as it is found and in the
    outcome's ``refused``; with none fitted, ``calibrations`` is empty. Writes nothing: see
    :meth:`CalibrationOutcome.save`. An error of the one configuration asked for
    (``request.config``) is raised: it is the answer."""
    from fleetplan.profiles.store import load_profiles
    from fleetplan.replica.calibration import check_merge_seeds, selected_keys
    from fleetplan.replica.calibration_file import default_calibration_path, user_calibration_path

    say = on_refused or (lambda line: None)
    st, refused = load_profiles(request.store).split_known(catalog)  # unknown: refused alone
    for line in refused:
        say(line)
    target = request.out if request.out is not None else user_calibration_path()
    bundled = default_calibration_path()
    start = bundled if request.out is None and bundled.is_file() else None
    outcome = CalibrationOutcome(request, target, [], refused, start)
    if refused and not len(st):
        return outcome
    into = target if target.exists() else start
    if into is not None:  # before the fits: a file records one set of length seeds
        check_merge_seeds(into, selected_keys(st, request.model, request.config, catalog),
                          request.fit_seeds, name=str(target) if into == target
                          else f"{target} (to start from the bundled {into})")
    try:
        outcome.calibrations = [_fit(st, request, progress, catalog=catalog)]
    except FleetplanError:
        if request.config is not None:
            raise  # the one configuration asked for: its error is the answer
        outcome.calibrations = _fit_apart(st, request, progress, say, refused, catalog)
    return outcome


def _fit(st: ProfileStore, request: CalibrateRequest, progress: Progress | None, *,
         model: str | None = None, config: str | None = None,
         max_nfev: int | None = None, grid: bool | None = None,
         catalog: Catalog | None = None) -> Calibration:
    from fleetplan.replica.calibration import calibrate_store
    from fleetplan.replica.host_time import HOST_TIME_GRID_S

    use_grid = request.fit_host_time if grid is None else grid
    return calibrate_store(
        st, model=request.model if model is None else model,
        config=request.config if config is None else config, jobs=request.jobs,
        max_nfev=request.max_nfev if max_nfev is None else max_nfev, progress=progress,
        c_deliver=None if request.host_time_us is None or use_grid
        else request.host_time_us * 1e-6,
        host_time_grid=HOST_TIME_GRID_S if use_grid else None, fit_seeds=request.fit_seeds,
        catalog=catalog)


def _fit_apart(st: ProfileStore, request: CalibrateRequest, progress: Progress | None,
               say: Callable[[str], None], refused: list[str],
               catalog: Catalog | None) -> list[Calibration]:
    """Find the configuration(s) at fault, refuse them alone, fit the others."""
    from fleetplan.catalog.models import normalize_model

    cals, bad = [], []
    for key in sorted({(r["model"], r["config"]) for r in
                       st.frame[["model", "config"]].to_dict("records")
                       if request.model is None
                       or r["model"] == normalize_model(request.model)}):
        try:  # with a grid, a short fit finds the fault: the search comes after
            cals.append(_fit(st, request, progress, catalog=catalog, model=key[0], config=key[1],
                             max_nfev=MIN_MAX_NFEV if request.fit_host_time else None,
                             grid=False))
        except FleetplanError as exc:
            line = (f"{st.path or 'store'}: {key[0]} on {key[1]}: {exc}; this "
                    "configuration is refused, the others are fitted")
            say(line)
            refused.append(line)
            bad.append(key)
    if cals and request.fit_host_time:  # one host time for the others together, as asked
        keys = list(zip(st.frame["model"], st.frame["config"], strict=True))
        rest = ProfileStore(st.frame[[k not in bad for k in keys]].reset_index(drop=True),
                            st.path)
        cals = [_fit(rest, request, progress, catalog=catalog)]
    return cals

"""Validate as ``fleetplan validate`` does, as one library call.

:class:`ValidateRequest` is the typed argument record (which runs, the calibration, whether to
cross-validate and with which refit seeds); it refuses bad input when built, one line naming
the field (its CLI flag where the CLI passes ``names``). :func:`run_validation` predicts every
run with the calibration (:func:`fleetplan.validate.core.validate`) and, with ``cv``, adds
the leave-one-rate-out and leave-one-config-out cross-validations
(:mod:`fleetplan.validate.cv`). A file, record or run that cannot be read or replayed is refused
alone, one line to ``on_refused`` as it is found, and the others are validated.
:class:`ValidationOutcome` holds the :class:`~fleetplan.validate.records.ValidationResult`
(None when nothing was left to validate) and the refused lines.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from fleetplan._progress import Progress
from fleetplan._request import RequestRecord
from fleetplan.catalog.catalog import Catalog
from fleetplan.errors import FleetplanError, InputError
from fleetplan.profiles.server import ServerDescription
from fleetplan.replica.calibrate import FIT_SEEDS, check_fit_seeds
from fleetplan.replica.calibration_file import CalibrationFile
from fleetplan.replica.runs import MeasuredRun
from fleetplan.validate.records import ValidationResult

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True, kw_only=True)
class ValidateRequest(RequestRecord):
    """One validation asked for: ``runs`` (result files or folders; none: the store's own
    runs) predicted with ``calibration``'s parameters (default: yours, else the bundled one),
    never fitted to them. ``cv``: also the cross-validations over ``store``'s runs, their
    refits on ``jobs`` processes replaying the length ``fit_seeds`` (only with ``cv``).
    ``server``: the server ``runs`` were measured on, as the user describes it
    (:class:`~fleetplan.profiles.server.ServerDescription`; a file's own statement is read
    where the user states none, a contradiction refuses the run). A run of ``runs`` that the
    store does not hold is replayed on a cold prefix cache unless ``server`` says warm.
    ``names``: how the errors call each field (default its own name; the CLI passes its
    flags)."""

    runs: tuple[Path, ...] = ()
    cv: bool = False
    store: Path | None = None
    calibration: Path | None = None
    jobs: int | None = None
    fit_seeds: tuple[int, ...] | None = None
    server: ServerDescription | None = None

    def __post_init__(self) -> None:
        n = self.name
        if self.server is not None and self.server.stated and not self.runs:
            raise InputError(f"{self.server.stated_flags()[0]} describes the server of the "
                             "result files given: name them (the store's runs record their "
                             "own servers)")
        if self.fit_seeds is not None and not self.cv:
            raise InputError(f"{n('fit_seeds')} sets the seeds of {n('cv')}'s refits: give "
                             f"{n('cv')} too")
        if self.fit_seeds is not None:
            check_fit_seeds(self.fit_seeds)
        if self.jobs is not None and (isinstance(self.jobs, bool) or self.jobs < 1):
            raise InputError(f"{n('jobs')} {self.jobs!r} must be a whole number >= 1")

    @property
    def seeds(self) -> tuple[int, ...]:
        """The length seeds of the cross-validation's refits (default the calibration's)."""
        return self.fit_seeds if self.fit_seeds is not None else FIT_SEEDS


@dataclass(frozen=True)
class ValidationOutcome:
    """``result``: predicted vs measured per run (with ``cv``: its cross-validations too);
    None when no run was left to validate. ``refused``: one line per file, record or run
    refused alone."""

    request: ValidateRequest
    result: ValidationResult | None
    refused: tuple[str, ...]


def run_validation(request: ValidateRequest, *, progress: Progress | None = None,
                   on_refused: Callable[[str], None] | None = None,
                   catalog: Catalog | None = None) -> ValidationOutcome:
    """Validate what ``request`` asks for, the runs' models and GPUs read in ``catalog``
    (default: the bundled one), from the store and calibration the request names (default:
    yours, else the bundled ones).
    ``progress`` receives the cross-validation's folds; ``on_refused`` each refused line."""
    from fleetplan.profiles.ingest import IngestOptions
    from fleetplan.profiles.store import load_profiles
    from fleetplan.replica.calibration_file import load_calibration_file
    from fleetplan.validate.core import load_runs

    say = on_refused or (lambda line: None)
    st, refused = load_profiles(request.store).split_known(catalog)  # unknown: refused alone
    cal = load_calibration_file(request.calibration)
    if request.runs:
        refused = []  # only the given files' runs are validated: judge those
        opts = IngestOptions(catalog=catalog, server=request.server, layouts=True)
        given: dict[str, dict[str, object]] = {}
        todo = load_runs(st, request.runs, options=opts, refused=refused, recorded=given)
    else:
        todo, given = load_runs(st), {}
    for line in refused:
        say(line)
    if not todo:
        return ValidationOutcome(request, None, tuple(refused))
    servers = described_servers(st.frame, todo, given)
    result = _validate_apart(todo, cal, say, refused, catalog, servers)
    if result is not None and request.cv:
        result = _cross_validate(result, load_runs(st), cal, request, progress, catalog)
    return ValidationOutcome(request, result, tuple(refused))


def described_servers(store_frame: pd.DataFrame, runs: list[MeasuredRun],
                      given: Mapping[str, Mapping[str, object]]) -> dict[str, ServerDescription]:
    """By run id, the server each run of ``runs`` was measured on where it is described: a
    run the store does not hold (a foreign result file) by its fields in ``given`` (the
    engine settings and prefix cache the user and the file stated; none stated: a cold
    prefix cache); a store run by the fields recorded at ingest. The study's runs record
    neither and are left out (their series protocol)."""
    held = set(store_frame["run_id"].astype(str))
    out: dict[str, ServerDescription] = {}
    for run in runs:
        if run.run_id not in held:
            out[run.run_id] = _recorded_server(given.get(run.run_id, {}), run.run_id)
    if "prefix_cache" in store_frame.columns or "engine_args" in store_frame.columns:
        wanted = {r.run_id for r in runs} - set(out)
        cols = [c for c in ("engine_args", "prefix_cache") if c in store_frame.columns]
        for rec in store_frame.dropna(subset=cols, how="all").to_dict("records"):
            if str(rec["run_id"]) in wanted:
                out[str(rec["run_id"])] = _recorded_server({str(k): v for k, v in rec.items()},
                                                           str(rec["run_id"]))
    return out


def _recorded_server(fields: Mapping[str, object], run_id: str) -> ServerDescription:
    """The server of a run's recorded ``engine_args`` and ``prefix_cache`` fields."""
    from fleetplan.profiles.server import parse_engine_args

    text = fields.get("engine_args")
    args = parse_engine_args(text.split() if isinstance(text, str) else (),
                             option=f"run {run_id}: engine_args")
    return ServerDescription(engine_args=args,
                             warm_prefix_cache=fields.get("prefix_cache") == "warm" or None)


def _validate_apart(todo: list[MeasuredRun], cal: CalibrationFile, say: Callable[[str], None],
                    refused: list[str], catalog: Catalog | None,
                    servers: dict[str, ServerDescription]) -> ValidationResult | None:
    """All runs validated together; when that fails, the run(s) at fault are found and
    refused alone and the others validated (None: none left)."""
    from fleetplan.validate.core import validate

    try:
        return validate(todo, calibration=cal, catalog=catalog, servers=servers)
    except FleetplanError:
        kept = []
        for one in todo:
            try:
                validate([one], calibration=cal, catalog=catalog, servers=servers)
                kept.append(one)
            except FleetplanError as exc:
                line = (f"{one.source}: {one.model} on {one.config} at {one.request_rate:g} "
                        f"req/s: {exc}; this run is refused, the others are validated")
                say(line)
                refused.append(line)
        return (validate(kept, calibration=cal, catalog=catalog, servers=servers) if kept
                else None)


def _cross_validate(result: ValidationResult, store_runs: list[MeasuredRun],
                    cal: CalibrationFile, request: ValidateRequest,
                    progress: Progress | None, catalog: Catalog | None) -> ValidationResult:
    """``result`` with the cross-validations over the calibrated configurations' runs."""
    from fleetplan.validate.cv import leave_one_config_out, leave_one_rate_out
    from fleetplan.validate.records import CrossValidation

    cal_keys = {e.key for e in cal.configs}
    runs = [r for r in store_runs if r.key in cal_keys]
    return replace(result, cv=CrossValidation(
        leave_one_rate_out=leave_one_rate_out(runs, jobs=request.jobs, progress=progress,
                                              fit_seeds=request.seeds, catalog=catalog),
        leave_one_config_out=leave_one_config_out(runs, cal.configs, progress=progress,
                                                  catalog=catalog),
        fit_seeds=request.seeds))

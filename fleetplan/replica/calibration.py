"""The calibration of a whole profile store, and its file (``data/calibration.json``).

Main entries: :func:`calibrate_store` (flag the runs, fit every selected configuration, learn the
per-GPU efficiency ratios) -> :class:`Calibration`; :meth:`Calibration.to_file` (the file's
typed record, :class:`~fleetplan.replica.calibration_file.CalibrationFile`; its ``to_dict()`` is
the content: deterministic for a given store, seed list and code) and :func:`write_calibration`
(atomic write; when only some configurations were refitted, the file's other entries are kept).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetplan._io import atomic_write_text
from fleetplan._progress import Progress
from fleetplan.catalog.catalog import Catalog, bundled_catalog
from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.catalog.models import normalize_model
from fleetplan.errors import InputError, UnknownNameError
from fleetplan.profiles.store import ProfileStore
from fleetplan.replica.burst_tail import infer_burst_tails
from fleetplan.replica.calibrate import (
    DEFAULT_MAX_NFEV,
    FIT_SEEDS,
    WEIGHTS,
    FitResult,
    check_fit_seeds,
    fit_many,
    group_runs,
)
from fleetplan.replica.calibration_file import (
    CalibrationEntry,
    CalibrationFile,
    CalibrationProtocol,
    FitSettings,
    FlaggedRun,
    load_calibration_file,
)
from fleetplan.replica.host_time import HostTimeChoice, choose_host_time
from fleetplan.replica.params_record import C_DELIVER_MAX_S, is_host_time
from fleetplan.replica.runs import FLAG_RATIO, VLLM_BENCHMARK_SEED, MeasuredRun, runs_from_frame
from fleetplan.replica.transfer import geomean_rows
from fleetplan.workload.lengths import LengthModel, protocol_length_model

WARM_PREFIX_CACHE_RULE = ("LRU over KV blocks across the runs that preceded a run on its server "
                          "(rates 32, 16, 8, 4, 1 req/s in that order, the same prompts and "
                          "replies each run; fleetplan.replica.prefix_cache): each request's "
                          "cached prompt tokens, the first run cold")
FIT_METHOD = "Nelder-Mead on log-parameters, simulation in the loop"
EFFICIENCY_NOTE = ("ratios fitted/ideal; an unmeasured pair uses its GPU and count's row, else "
                   "its GPU's, else the pooled one")


@dataclass
class Calibration:
    """Fitted configurations, flagged runs and efficiency ratios of one store."""

    fits: list[FitResult]
    runs: list[MeasuredRun]
    lengths: LengthModel
    store_sha256: str
    max_nfev: int
    entries: list[CalibrationEntry] = field(default_factory=list)
    #: how the host time was chosen, when it was (``calibrate_store(host_time_grid=...)``)
    host_time: HostTimeChoice | None = None
    #: the length seeds every fit replayed (``calibrate_store(fit_seeds=...)``)
    fit_seeds: tuple[int, ...] = FIT_SEEDS

    def to_file(self) -> CalibrationFile:
        """The file's record (``entries`` when set, else this calibration's fits)."""
        configs = tuple(self.entries) or tuple(fit_entry(f) for f in self.fits)
        flagged = tuple(FlaggedRun(run_id=r.run_id, model=r.model, config=r.config,
                                   request_rate=r.request_rate, flag_reason=r.flag_reason,
                                   source=r.source) for r in self.runs if r.flagged)
        return CalibrationFile(
            configs=configs, store_runs=len(self.runs), store_sha256=self.store_sha256,
            protocol=CalibrationProtocol(
                arrival_seed=VLLM_BENCHMARK_SEED, warm_prefix_cache=WARM_PREFIX_CACHE_RULE,
                flag_ratio=FLAG_RATIO,
                length_model=self.lengths.model_dump(mode="json", by_alias=True),
                burst_tails={k: t.to_dict() for k, t in infer_burst_tails(
                    self.runs, seed=VLLM_BENCHMARK_SEED).items()}),
            fit=FitSettings(method=FIT_METHOD, seeds=tuple(self.fit_seeds), max_nfev=self.max_nfev,
                            weights=dict(WEIGHTS)),
            efficiency_note=EFFICIENCY_NOTE,
            efficiency_by_config=efficiency_from_entries(
                configs, group=lambda e: f"{e.gpu_count}x{e.gpu}"),
            efficiency=efficiency_from_entries(configs),
            efficiency_pooled=efficiency_from_entries(configs, group=lambda e: "all").get(
                "all", {}),
            flagged=flagged)

    def to_dict(self) -> dict[str, Any]:
        """The file's content: deterministic for a given store, seed list and code."""
        return self.to_file().to_dict()


def fit_entry(f: FitResult) -> CalibrationEntry:
    """The file entry of one fitted configuration."""
    gpu_count, gpu = HardwareConfig.split(f.params.config)  # a fitted record's: canonical
    return CalibrationEntry(
        model=f.params.model, config=f.params.config, gpu=gpu, gpu_count=gpu_count,
        calibrated=f.params.calibrated, params=f.params, prior=f.prior,
        ratios_to_ideal=dict(f.ratios), fitted=tuple(f.fitted),
        loss=f.loss if math.isfinite(f.loss) else None, nfev=f.nfev, runs=tuple(f.runs))


def _by_gpu(e: CalibrationEntry) -> str:
    return e.gpu


def efficiency_from_entries(entries: Sequence[CalibrationEntry], *,
                            group: Callable[[CalibrationEntry], str] = _by_gpu
                            ) -> dict[str, dict[str, float]]:
    """Efficiency ratios (geometric means, with ``n_configs``) per ``group`` (default: GPU
    type) from the calibrated file entries."""
    by_group: dict[str, list[dict[str, float]]] = {}
    for e in entries:
        if e.calibrated:
            by_group.setdefault(group(e), []).append(e.ratios_to_ideal)
    return {g: geomean_rows(by_group[g]) for g in sorted(by_group)}


def store_digest(store: ProfileStore) -> str:
    return hashlib.sha256(store.to_csv().encode("utf-8")).hexdigest()[:16]


def _selection(model: str | None, config: str | None,
               catalog: Catalog | None) -> tuple[str | None, str | None]:
    """The model's short name and the configuration's canonical name (in ``catalog``) that a
    selection means."""
    return (None if model is None else normalize_model(model),
            None if config is None else HardwareConfig.parse(config, catalog).name)


def selected_keys(store: ProfileStore, model: str | None = None,
                  config: str | None = None, catalog: Catalog | None = None
                  ) -> set[tuple[str, str]]:
    """The (model, configuration) pairs of ``store`` that :func:`select_runs` selects (without
    its checks or its typed runs): what a calibration of that selection refits."""
    short, name = _selection(model, config, catalog)
    return {(m, c) for m, c in zip(store.frame["model"], store.frame["config"], strict=True)
            if (short is None or m == short) and (name is None or c == name)}


def select_runs(store: ProfileStore, model: str | None = None,
                config: str | None = None, catalog: Catalog | None = None
                ) -> list[MeasuredRun]:
    """The store's runs (flagged against the whole store), optionally one model / config
    (names of ``catalog``, default: the bundled one)."""
    runs = runs_from_frame(store.frame)
    short, name = _selection(model, config, catalog)
    if short is not None:
        (catalog if catalog is not None else bundled_catalog()).model(short)
        if short not in {r.model for r in runs}:
            raise UnknownNameError("measured model", short, {r.model for r in runs})
        runs = [r for r in runs if r.model == short]
    if name is not None:
        if name not in {r.config for r in runs}:
            raise UnknownNameError("measured configuration", name, {r.config for r in runs})
        runs = [r for r in runs if r.config == name]
    return runs


def calibrate_store(store: ProfileStore, *, model: str | None = None, config: str | None = None,
                    jobs: int | None = None, max_nfev: int = DEFAULT_MAX_NFEV,
                    lengths: LengthModel | None = None,
                    progress: Progress | None = None,
                    c_deliver: float | None = None,
                    host_time_grid: Sequence[float] | None = None,
                    fit_seeds: Sequence[int] = FIT_SEEDS,
                    catalog: Catalog | None = None) -> Calibration:
    """Fit every (selected) configuration of ``store`` to its unflagged runs; ``progress``
    receives one unit per configuration (:mod:`fleetplan._progress`); ``c_deliver``: the host
    time per streamed output of the store's host (default the prior's,
    :data:`fleetplan.replica.priors.C_DELIVER_S`), fixed in every fit. ``host_time_grid``
    (instead of ``c_deliver``): choose it from the runs, the grid value of lowest summed loss
    (:func:`fleetplan.replica.host_time.choose_host_time`; the result's ``host_time``).
    ``fit_seeds``: the length seeds every fit replays (default
    :data:`fleetplan.replica.calibrate.FIT_SEEDS`; recorded in the file's ``fit.seeds``).
    ``catalog``: where the runs' models and GPUs are read (default: the bundled one)."""
    seeds = check_fit_seeds(fit_seeds)
    if c_deliver is not None and not is_host_time(c_deliver):
        raise InputError(f"c_deliver(={c_deliver!r}) must be between 0 and {C_DELIVER_MAX_S:g} s")
    if c_deliver is not None and host_time_grid is not None:
        raise InputError("give a host time (c_deliver) or a grid to choose it from, not both")
    runs = select_runs(store, model, config, catalog)
    lm = lengths or protocol_length_model()
    groups = list(group_runs(runs).values())
    if host_time_grid is not None:
        choice = choose_host_time(groups, grid=host_time_grid, lengths=lengths, jobs=jobs,
                                  max_nfev=max_nfev, progress=progress, seeds=seeds,
                                  catalog=catalog)
        return Calibration(list(choice.fits), runs, lm, store_digest(store), max_nfev,
                           host_time=choice, fit_seeds=seeds)
    fits = fit_many(groups, lengths=lengths, jobs=jobs, max_nfev=max_nfev, progress=progress,
                    c_deliver=c_deliver, seeds=seeds, catalog=catalog)
    return Calibration(fits, runs, lm, store_digest(store), max_nfev, fit_seeds=seeds)


def check_merge_seeds(path: str | Path | None, keys: Iterable[tuple[str, str]],
                      seeds: Sequence[int], *, name: str | None = None
                      ) -> tuple[CalibrationEntry, ...]:
    """The entries of the calibration file at ``path`` (default: the one commands read), after
    checking that those not among ``keys`` (the configurations about to be refitted) were
    fitted with the length ``seeds`` too: the file records one ``fit.seeds`` for all its
    entries, so mixing is refused with an :class:`InputError` naming both (and the file as
    ``name``, default ``path``)."""
    existing = load_calibration_file(path)
    refit = set(keys)
    kept = [e for e in existing.configs if e.key not in refit]
    # a file without fit settings predates them: it was fitted with the default seeds
    had = tuple(existing.fit.seeds) if existing.fit is not None else FIT_SEEDS
    if kept and had != tuple(seeds):
        raise InputError(
            f"{name or path or 'the calibration file'}: its {len(kept)} other entries were "
            f"fitted with length seeds {had}, these would be with {tuple(seeds)}; one file "
            "records one set of seeds: write these to another file (--out)")
    return existing.configs


def merged_entries(cal: Calibration, path: str | Path | None) -> list[CalibrationEntry]:
    """The file's existing entries with ``cal``'s configurations replaced or added. Refused
    (:class:`InputError`) when entries would be kept that were fitted with other length seeds
    than ``cal``'s: the file records one ``fit.seeds`` for all its entries."""
    new = {e.key: e for e in (fit_entry(f) for f in cal.fits)}
    old: tuple[CalibrationEntry, ...] = ()
    if path is None or Path(path).exists():
        old = check_merge_seeds(path, new, cal.fit_seeds)
    out = {e.key: e for e in old}
    out.update(new)
    return [out[k] for k in sorted(out)]


def write_calibration(cal: Calibration, path: str | Path, *, merge: bool = True) -> Path:
    """Write ``cal`` atomically to ``path`` (keeping other configurations already there)."""
    import json

    p = Path(path)
    cal.entries = merged_entries(cal, p) if merge else [fit_entry(f) for f in cal.fits]
    atomic_write_text(p, json.dumps(cal.to_dict(), indent=1, allow_nan=False) + "\n")
    return p

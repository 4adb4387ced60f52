"""The calibration of a whole profile store, and its file (``data/calibration.json``).

Main entries: :func:`calibrate_store` (flag the runs, fit every selected configuration, learn the
per-GPU efficiency ratios) -> :class:`Calibration`; :meth:`Calibration.to_dict` (the file's
content: deterministic for a given store, seed list and code) and :func:`write_calibration`
(atomic write; when only some configurations were refitted, the file's other entries are kept).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetplan._io import atomic_write_text
from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.catalog.models import get_model, normalize_model
from fleetplan.errors import UnknownNameError
from fleetplan.profiles.store import ProfileStore
from fleetplan.replica.calibrate import FIT_SEEDS, WEIGHTS, FitResult, fit_many, group_runs
from fleetplan.replica.params import load_calibration
from fleetplan.replica.runs import FLAG_RATIO, VLLM_BENCHMARK_SEED, MeasuredRun, runs_from_frame
from fleetplan.workload.lengths import LengthModel, protocol_length_model

SCHEMA_VERSION = 1
DEFAULT_MAX_NFEV = 40


@dataclass
class Calibration:
    """Fitted configurations, flagged runs and efficiency ratios of one store."""

    fits: list[FitResult]
    runs: list[MeasuredRun]
    lengths: LengthModel
    store_sha256: str
    max_nfev: int
    entries: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        configs = self.entries or [fit_entry(f) for f in self.fits]
        flagged = [{"run_id": r.run_id, "model": r.model, "config": r.config,
                    "request_rate": r.request_rate, "flag_reason": r.flag_reason,
                    "source": r.source} for r in self.runs if r.flagged]
        eff = efficiency_from_entries(configs)
        pooled = efficiency_from_entries([{**e, "gpu": "all"} for e in configs]).get("all", {})
        by_count = efficiency_from_entries(
            [{**e, "gpu": f"{e['gpu_count']}x{e['gpu']}"} for e in configs])
        return _rounded({
            "schema_version": SCHEMA_VERSION,
            "generator": "fleetplan calibrate",
            "store": {"runs": len(self.runs), "sha256": self.store_sha256},
            "protocol": {
                "arrival_seed": VLLM_BENCHMARK_SEED,
                "warm_prefix_cache": "a run below its series' highest rate finds its prompts "
                                     "cached when the KV cache holds the run's prompt + output "
                                     "tokens (rates ran from highest to lowest on one server)",
                "flag_ratio": FLAG_RATIO,
                "length_model": self.lengths.model_dump(mode="json", by_alias=True),
            },
            "fit": {"method": "Nelder-Mead on log-parameters, simulation in the loop",
                    "seeds": list(FIT_SEEDS), "max_nfev": self.max_nfev,
                    "weights": dict(WEIGHTS)},
            "efficiency_note": "ratios fitted/ideal; an unmeasured pair uses its GPU and count's "
                               "row, else its GPU's, else the pooled one",
            "efficiency_by_config": by_count,
            "efficiency": eff,
            "efficiency_pooled": pooled,
            "configs": configs,
            "flagged": flagged,
        })


def fit_entry(f: FitResult) -> dict[str, Any]:
    """The file entry of one fitted configuration."""
    hw = HardwareConfig.parse(f.params.config)
    return {
        "model": f.params.model, "config": f.params.config, "gpu": hw.gpu,
        "gpu_count": hw.gpu_count, "calibrated": f.params.calibrated,
        "params": f.params.model_dump(), "prior": f.prior.model_dump(),
        "ratios_to_ideal": f.ratios, "fitted": list(f.fitted),
        "loss": f.loss if math.isfinite(f.loss) else None, "nfev": f.nfev, "runs": f.runs,
    }


def efficiency_from_entries(entries: list[dict[str, Any]], *,
                            exclude: tuple[str, str] | None = None) -> dict[str, dict[str, float]]:
    """Per-GPU efficiency ratios (geometric means) from file entries, optionally leaving one
    (model, config) out (leave-one-config-out validation of the spec-based path)."""
    by_gpu: dict[str, list[dict[str, float]]] = {}
    for e in entries:
        if not e.get("calibrated") or (exclude and (e["model"], e["config"]) == exclude):
            continue
        by_gpu.setdefault(e["gpu"], []).append(e["ratios_to_ideal"])
    out: dict[str, dict[str, float]] = {}
    for gpu in sorted(by_gpu):
        rows = by_gpu[gpu]
        row = {k: math.exp(sum(math.log(r[k]) for r in rows) / len(rows)) for k in rows[0]}
        row["n_configs"] = len(rows)
        out[gpu] = row
    return out


def _rounded(obj: Any) -> Any:
    if isinstance(obj, float):
        return float(f"{obj:.8g}") if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _rounded(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_rounded(v) for v in obj]
    return obj


def store_digest(store: ProfileStore) -> str:
    return hashlib.sha256(store.to_csv().encode("utf-8")).hexdigest()[:16]


def select_runs(store: ProfileStore, model: str | None = None,
                config: str | None = None) -> list[MeasuredRun]:
    """The store's runs (flagged against the whole store), optionally one model / config."""
    runs = runs_from_frame(store.frame)
    if model is not None:
        short = normalize_model(model)
        get_model(short)
        if short not in {r.model for r in runs}:
            raise UnknownNameError("measured model", short, {r.model for r in runs})
        runs = [r for r in runs if r.model == short]
    if config is not None:
        name = HardwareConfig.parse(config).name
        if name not in {r.config for r in runs}:
            raise UnknownNameError("measured configuration", name, {r.config for r in runs})
        runs = [r for r in runs if r.config == name]
    return runs


def calibrate_store(store: ProfileStore, *, model: str | None = None, config: str | None = None,
                    jobs: int | None = None, max_nfev: int = DEFAULT_MAX_NFEV,
                    lengths: LengthModel | None = None) -> Calibration:
    """Fit every (selected) configuration of ``store`` to its unflagged runs."""
    runs = select_runs(store, model, config)
    lm = lengths or protocol_length_model()
    groups = list(group_runs(runs).values())
    fits = fit_many(groups, lengths=lengths, jobs=jobs, max_nfev=max_nfev)
    return Calibration(fits, runs, lm, store_digest(store), max_nfev)


def merged_entries(cal: Calibration, path: str | Path | None) -> list[dict[str, Any]]:
    """The file's existing entries with ``cal``'s configurations replaced or added."""
    new = {(e["model"], e["config"]): e for e in (fit_entry(f) for f in cal.fits)}
    old: list[dict[str, Any]] = []
    if path is None or Path(path).exists():
        old = list(load_calibration(path).get("configs", []))
    out = {(e["model"], e["config"]): e for e in old}
    out.update(new)
    return [out[k] for k in sorted(out)]


def write_calibration(cal: Calibration, path: str | Path, *, merge: bool = True) -> Path:
    """Write ``cal`` atomically to ``path`` (keeping other configurations already there)."""
    import json

    p = Path(path)
    cal.entries = merged_entries(cal, p) if merge else [fit_entry(f) for f in cal.fits]
    atomic_write_text(p, json.dumps(cal.to_dict(), indent=1, allow_nan=False) + "\n")
    return p

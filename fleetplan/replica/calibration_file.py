"""The calibration file (``data/calibration.json``) as typed records.

Main entries: :class:`CalibrationFile` (the whole file; ``to_dict()`` is its exact JSON content,
floats rounded to 8 significant digits), :class:`CalibrationEntry` (one fitted model x
configuration: what :func:`fleetplan.replica.params.replica_params` and the efficiency ratios of
unmeasured pairs read), :func:`load_calibration_file` (a path, the bundled file, or an already
loaded dict -> :class:`CalibrationFile`; a missing or mistyped field raises :class:`DataError`
naming the file, the entry and the field), :func:`default_calibration_path` (which file is read
when none is named) and :func:`load_calibration` (the file's raw JSON).

Mappings keyed by metric or parameter name (``ratios_to_ideal``, ``error_pct``, the efficiency
rows, the fit weights) stay dicts: their keys are data. ``protocol.length_model`` is the
:class:`~fleetplan.workload.lengths.LengthModel` dump, kept as written.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from fleetplan._io import user_data_dir
from fleetplan._load import load_json  # bounded: regular file, depth, duplicate keys
from fleetplan.catalog._tables import data_dir
from fleetplan.errors import DataError
from fleetplan.replica.params_record import ReplicaParams

SCHEMA_VERSION = 1
DEFAULT_CALIBRATION_NAME = "calibration.json"


@dataclass(frozen=True)
class FitRunReport:
    """How the fitted parameters match one run of the configuration."""

    run_id: str
    request_rate: float
    flagged: bool
    flag_reason: str | None
    used_in_fit: bool
    warm_prefix_cache: bool
    error_pct: dict[str, float]
    prefix_hit_share: float | None = None  # predicted share of prompt tokens cached (LRU)

    def to_dict(self) -> dict[str, Any]:
        out = {"run_id": self.run_id, "request_rate": self.request_rate,
               "flagged": self.flagged, "flag_reason": self.flag_reason,
               "used_in_fit": self.used_in_fit, "warm_prefix_cache": self.warm_prefix_cache,
               "error_pct": dict(self.error_pct)}
        if self.prefix_hit_share is not None:
            out["prefix_hit_share"] = self.prefix_hit_share
        return out

    @classmethod
    def from_dict(cls, d: Any, where: str) -> FitRunReport:
        if not isinstance(d, Mapping):
            raise DataError(f"{where}: expected an object, got {type(d).__name__}")
        return cls(
            run_id=_get(d, "run_id", str, where),
            request_rate=_get(d, "request_rate", float, where),
            flagged=_get(d, "flagged", bool, where), flag_reason=d.get("flag_reason"),
            used_in_fit=_get(d, "used_in_fit", bool, where),
            warm_prefix_cache=_get(d, "warm_prefix_cache", bool, where),
            error_pct=dict(_get(d, "error_pct", dict, where)),
            prefix_hit_share=(None if d.get("prefix_hit_share") is None
                              else _get(d, "prefix_hit_share", float, where)))


@dataclass(frozen=True)
class CalibrationEntry:
    """One entry of ``configs``: a fitted model x configuration."""

    model: str
    config: str
    gpu: str
    gpu_count: int
    calibrated: bool
    params: ReplicaParams
    prior: ReplicaParams
    ratios_to_ideal: dict[str, float]
    fitted: tuple[str, ...]
    loss: float | None
    nfev: int
    runs: tuple[FitRunReport, ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        return self.model, self.config

    @property
    def has_flagged_runs(self) -> bool:
        return any(r.flagged for r in self.runs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model, "config": self.config, "gpu": self.gpu,
            "gpu_count": self.gpu_count, "calibrated": self.calibrated,
            "params": self.params.model_dump(), "prior": self.prior.model_dump(),
            "ratios_to_ideal": dict(self.ratios_to_ideal), "fitted": list(self.fitted),
            "loss": self.loss if self.loss is not None and math.isfinite(self.loss) else None,
            "nfev": self.nfev, "runs": [r.to_dict() for r in self.runs],
        }

    @classmethod
    def from_dict(cls, d: Any, where: str) -> CalibrationEntry:
        if not isinstance(d, Mapping):
            raise DataError(f"{where}: expected an object, got {type(d).__name__}")
        params = _params(d, "params", where)
        return cls(
            model=_get(d, "model", str, where), config=_get(d, "config", str, where),
            gpu=_get(d, "gpu", str, where), gpu_count=_get(d, "gpu_count", int, where),
            calibrated=_get(d, "calibrated", bool, where), params=params,
            prior=_params(d, "prior", where) if "prior" in d else params,
            ratios_to_ideal={str(k): float(v) for k, v in
                             _get(d, "ratios_to_ideal", dict, where).items()},
            fitted=tuple(_get(d, "fitted", list, where)),
            loss=None if d.get("loss") is None else float(d["loss"]),
            nfev=_get(d, "nfev", int, where),
            runs=tuple(FitRunReport.from_dict(r, f"{where}.runs[{i}]")
                       for i, r in enumerate(_get(d, "runs", list, where))))


@dataclass(frozen=True)
class FlaggedRun:
    """A run no work-conserving server can produce (reported, never fitted)."""

    run_id: str
    model: str
    config: str
    request_rate: float
    flag_reason: str | None
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "model": self.model, "config": self.config,
                "request_rate": self.request_rate, "flag_reason": self.flag_reason,
                "source": self.source}


@dataclass(frozen=True)
class CalibrationProtocol:
    """The measurement protocol the fit assumed."""

    arrival_seed: int
    warm_prefix_cache: str
    flag_ratio: float
    length_model: dict[str, Any]
    # per prompt set ("<num_prompts>:<total_input_tokens>"): the replies that end a burst
    # (fleetplan.replica.burst_tail), as inferred from the store's run durations
    burst_tails: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = {"arrival_seed": self.arrival_seed, "warm_prefix_cache": self.warm_prefix_cache,
               "flag_ratio": self.flag_ratio, "length_model": self.length_model}
        if self.burst_tails:
            out["burst_tails"] = {k: dict(v) for k, v in sorted(self.burst_tails.items())}
        return out


@dataclass(frozen=True)
class FitSettings:
    """How the configurations were fitted."""

    method: str
    seeds: tuple[int, ...]
    max_nfev: int
    weights: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "seeds": list(self.seeds), "max_nfev": self.max_nfev,
                "weights": dict(self.weights)}


@dataclass(frozen=True)
class CalibrationFile:
    """The whole file. ``efficiency*`` rows are derived from ``configs`` (reported for people;
    :func:`fleetplan.replica.params.learned_efficiency` recomputes them from the entries)."""

    configs: tuple[CalibrationEntry, ...] = ()
    schema_version: int = SCHEMA_VERSION
    generator: str = "fleetplan calibrate"
    store_runs: int = 0
    store_sha256: str = ""
    protocol: CalibrationProtocol | None = None
    fit: FitSettings | None = None
    efficiency_note: str = ""
    efficiency_by_config: dict[str, dict[str, float]] = field(default_factory=dict)
    efficiency: dict[str, dict[str, float]] = field(default_factory=dict)
    efficiency_pooled: dict[str, float] = field(default_factory=dict)
    flagged: tuple[FlaggedRun, ...] = ()

    def entry(self, model: str, config: str) -> CalibrationEntry | None:
        """The entry of (model, config), if calibrated here."""
        return next((e for e in self.configs if e.key == (model, config)), None)

    def to_dict(self) -> dict[str, Any]:
        """The file's JSON content (deterministic; floats to 8 significant digits)."""
        return rounded({
            "schema_version": self.schema_version,
            "generator": self.generator,
            "store": {"runs": self.store_runs, "sha256": self.store_sha256},
            "protocol": self.protocol.to_dict() if self.protocol is not None else None,
            "fit": self.fit.to_dict() if self.fit is not None else None,
            "efficiency_note": self.efficiency_note,
            "efficiency_by_config": self.efficiency_by_config,
            "efficiency": self.efficiency,
            "efficiency_pooled": self.efficiency_pooled,
            "configs": [e.to_dict() for e in self.configs],
            "flagged": [f.to_dict() for f in self.flagged],
        })

    @classmethod
    def from_dict(cls, obj: Any, where: str = "calibration") -> CalibrationFile:
        """A loaded calibration JSON object (the report fields may be absent)."""
        if not isinstance(obj, Mapping) or not isinstance(obj.get("configs"), list):
            raise DataError(f"{where}: not a fleetplan calibration file (no 'configs' list)")
        store = obj.get("store") or {}
        proto, fit = obj.get("protocol"), obj.get("fit")
        try:
            return cls(
                configs=tuple(CalibrationEntry.from_dict(e, f"{where}: configs[{i}]")
                              for i, e in enumerate(obj["configs"])),
                schema_version=int(obj.get("schema_version", SCHEMA_VERSION)),
                generator=str(obj.get("generator", "fleetplan calibrate")),
                store_runs=int(store.get("runs", 0)), store_sha256=str(store.get("sha256", "")),
                protocol=None if proto is None else CalibrationProtocol(
                    int(proto["arrival_seed"]), str(proto["warm_prefix_cache"]),
                    float(proto["flag_ratio"]), dict(proto["length_model"]),
                    dict(proto.get("burst_tails", {}))),
                fit=None if fit is None else FitSettings(
                    str(fit["method"]), tuple(int(s) for s in fit["seeds"]),
                    int(fit["max_nfev"]), dict(fit["weights"])),
                efficiency_note=str(obj.get("efficiency_note", "")),
                efficiency_by_config=dict(obj.get("efficiency_by_config", {})),
                efficiency=dict(obj.get("efficiency", {})),
                efficiency_pooled=dict(obj.get("efficiency_pooled", {})),
                flagged=tuple(FlaggedRun(**f) for f in obj.get("flagged", [])))
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"{where}: invalid report field ({exc})") from None


def default_calibration_path(calibration: str | Path | None = None) -> Path:
    """The calibration read by default: ``calibration`` when given (a data context's,
    :attr:`fleetplan.context.DataContext.calibration`, e.g. ``--calibration``), else the user's
    (:func:`user_calibration_path`) when it exists, else the bundled ``data/calibration.json``."""
    if calibration is not None:
        return Path(calibration)
    user = user_calibration_path()
    return user if user.is_file() else data_dir() / DEFAULT_CALIBRATION_NAME


def user_calibration_path() -> Path:
    """``<user data dir>/calibration.json``: where ``fleetplan calibrate`` writes without
    ``--out``."""
    return user_data_dir() / DEFAULT_CALIBRATION_NAME


@cache
def _load_calibration_cached(path: str, mtime: float) -> dict[str, Any]:
    obj = load_json(Path(path), what="calibration file")
    if not isinstance(obj, dict) or not isinstance(obj.get("configs"), list):
        raise DataError(f"{path}: not a fleetplan calibration file (no 'configs' list)")
    return obj


def load_calibration(path: str | Path | None = None) -> dict[str, Any]:
    """The calibration file as a dict (``{}``-like with empty ``configs`` when the bundled one
    is absent; a given path that does not exist is an error)."""
    p = Path(path) if path is not None else default_calibration_path()
    if not p.exists():
        if path is None:
            return {"configs": [], "efficiency": {}}
        raise DataError(f"{p}: calibration file not found")
    return _load_calibration_cached(str(p.resolve()), p.stat().st_mtime)


CalibrationSource = str | Path | Mapping[str, Any] | CalibrationFile | None


def load_calibration_file(calibration: CalibrationSource = None) -> CalibrationFile:
    """``calibration`` as a :class:`CalibrationFile`: a path (loaded once per modification), the
    bundled file (``None``; empty when it is absent), a loaded JSON object, or the record."""
    if isinstance(calibration, CalibrationFile):
        return calibration
    if isinstance(calibration, Mapping):
        return CalibrationFile.from_dict(calibration)
    p = Path(calibration) if calibration is not None else default_calibration_path()
    if not p.exists():
        load_calibration(calibration)  # the missing-file error, or the empty bundled one
        return CalibrationFile()
    return _load_cached(str(p.resolve()), p.stat().st_mtime)


@cache
def _load_cached(path: str, mtime: float) -> CalibrationFile:
    return CalibrationFile.from_dict(load_calibration(path), path)


def rounded(obj: Any) -> Any:
    """Floats to 8 significant digits (non-finite ones to None), through dicts and lists."""
    if isinstance(obj, float):
        return float(f"{obj:.8g}") if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: rounded(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [rounded(v) for v in obj]
    return obj


def _get(d: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in d:
        raise DataError(f"{where}: missing field {key!r}")
    v = d[key]
    if kind is float and isinstance(v, int) and not isinstance(v, bool):
        v = float(v)
    if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
        raise DataError(f"{where}: field {key!r}(={v!r}) must be {kind.__name__}")
    return v


def _params(d: Mapping[str, Any], key: str, where: str) -> ReplicaParams:
    try:
        return ReplicaParams.model_validate(d[key])
    except (KeyError, ValidationError) as exc:
        raise DataError(f"{where}: invalid replica parameters {key!r} ({exc})") from None

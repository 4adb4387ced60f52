"""The calibrated model's held-out TTFT p99 errors, as a data file the validation writes.

``solve --confidence``, the plan's model band and the report need how far the calibrated
replica model misses a P99 TTFT on runs it was not fitted to. Those figures come from
``fleetplan validate --cv`` over the bundled store; ``scripts/gen_validation_doc.py`` writes
them to ``data/model_errors.json`` beside ``docs/validation.md`` in the same run, so the page and
the figures the optimizer plans with never drift apart, and nothing reads the docs at run time.

The file holds, for ``ttft_p99_ms`` (leave-one-rate-out unless said):

- ``by_gpu``: median |error| % and runs per GPU type;
- ``by_kind``: the same per server kind (GPU type, one GPU or tensor-parallel);
- ``quantiles_by_kind``: the signed errors' 10/50/90th percentiles per server kind (what a
  calibrated configuration's margin is read from);
- ``unmeasured_pct``: the worst per-GPU leave-one-config-out median |error|, assumed for a
  calibrated configuration of a GPU type the bundled store never measured.

Main entries: :func:`model_errors` (the loaded file), :meth:`ModelErrors.from_validation`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from fleetplan.errors import DataError
from fleetplan.validate.bands import ErrorQuantiles, _quantiles
from fleetplan.validate.records import ValidationResult

ERRORS_FILE = "model_errors.json"
METRIC = "ttft_p99_ms"


@dataclass(frozen=True)
class ModelErrors:
    """Held-out P99 TTFT errors of the calibrated model (module docstring)."""

    by_gpu: dict[str, tuple[float, int]]
    by_kind: dict[str, tuple[float, int]]
    quantiles_by_kind: dict[str, ErrorQuantiles]
    unmeasured_pct: float
    source: str

    @classmethod
    def from_validation(cls, result: ValidationResult, source: str) -> ModelErrors:
        """The figures of a ``validate --cv`` result (the ones docs/validation.md prints)."""
        if result.cv is None:
            raise DataError(f"{source}: a validation without --cv has no held-out errors")
        loro, loco = result.cv.leave_one_rate_out, result.cv.leave_one_config_out

        def pct(rows: dict[str, Any]) -> tuple[float, int] | None:
            s = rows.get(METRIC)
            if s is None or s.median_abs_error_pct is None:
                return None
            return round(s.median_abs_error_pct, 1), s.n

        by_gpu = {g: v for g, rows in loro.by_gpu.items() if (v := pct(rows)) is not None}
        by_kind = {k: v for k, rows in loro.by_kind.items() if (v := pct(rows)) is not None}
        quantiles = {k: ErrorQuantiles(round(q.p10, 4), round(q.p50, 4), round(q.p90, 4), q.n)
                     for k, rows in loro.error_quantiles_by_kind.items()
                     if (q := rows.get(METRIC)) is not None}
        loco_pcts = [v[0] for rows in loco.by_gpu.values() if (v := pct(rows)) is not None]
        if not by_gpu or not loco_pcts:
            raise DataError(f"{source}: no held-out {METRIC} errors to write")
        return cls(by_gpu, by_kind, quantiles, max(loco_pcts), source)

    def to_dict(self) -> dict[str, Any]:
        return {"metric": METRIC, "source": self.source,
                "by_gpu": {g: {"median_abs_error_pct": p, "n": n}
                           for g, (p, n) in self.by_gpu.items()},
                "by_kind": {k: {"median_abs_error_pct": p, "n": n}
                            for k, (p, n) in self.by_kind.items()},
                "quantiles_by_kind": {k: q.to_dict() for k, q in self.quantiles_by_kind.items()},
                "unmeasured_pct": self.unmeasured_pct}

    @classmethod
    def from_dict(cls, obj: Any, where: str) -> ModelErrors:
        def figure(d: Any, at: str) -> tuple[float, int]:
            try:
                p, n = float(d["median_abs_error_pct"]), int(d["n"])
            except (KeyError, TypeError, ValueError):
                raise DataError(f"{where}: {at}: expected median_abs_error_pct and n") from None
            if not (math.isfinite(p) and p >= 0 and n > 0):
                raise DataError(f"{where}: {at}: {p!r}, n {n!r} is not an error figure")
            return p, n

        if not isinstance(obj, dict) or obj.get("metric") != METRIC:
            raise DataError(f"{where}: metric: expected {METRIC!r}")
        try:
            unmeasured = float(obj["unmeasured_pct"])
        except (KeyError, TypeError, ValueError):
            raise DataError(f"{where}: unmeasured_pct: expected a number") from None
        return cls({g: figure(d, f"by_gpu.{g}") for g, d in dict(obj["by_gpu"]).items()},
                   {k: figure(d, f"by_kind.{k}") for k, d in dict(obj["by_kind"]).items()},
                   {k: _quantiles(d, f"{where}: quantiles_by_kind.{k}")
                    for k, d in dict(obj["quantiles_by_kind"]).items()},
                   unmeasured, str(obj.get("source", "")))


@cache
def _load(path: str, mtime: float) -> ModelErrors:
    from fleetplan._json_load import load_json

    return ModelErrors.from_dict(load_json(Path(path), what="model error file"), path)


def model_errors(path: str | Path | None = None) -> ModelErrors:
    """The calibrated model's held-out errors (default: the bundled ``data/model_errors.json``,
    written by ``scripts/gen_validation_doc.py``)."""
    from fleetplan.catalog import data_dir

    p = Path(path) if path is not None else data_dir() / ERRORS_FILE
    if not p.is_file():
        raise DataError(f"{p}: model error file not found (scripts/gen_validation_doc.py "
                        "writes it)")
    return _load(str(p.resolve()), p.stat().st_mtime)


def write_model_errors(errors: ModelErrors, path: Path) -> None:
    """Write the file (atomically; keys in a fixed order, so a rerun is byte-identical)."""
    from fleetplan._io import atomic_write_text

    atomic_write_text(path, json.dumps(errors.to_dict(), indent=2) + "\n")

"""Parameters of one serving replica: step-time coefficients, KV capacity, scheduler limits.

Main entries: :class:`ReplicaParams` (one parameter set per model x hardware configuration),
:func:`replica_params` (calibrated figures when ``data/calibration.json`` has them, else the
first-principles priors of :mod:`fleetplan.replica.priors` scaled by efficiency factors learned
from calibrated configurations of the same GPU type, marked ``calibrated=False``).

The step time of one engine iteration is

    step_s = c_step + c_prefill_tok * prefill_tokens + c_seq * decode_seqs + c_kv_tok * kv_read

with ``kv_read`` the cached tokens the step's attention reads (the context of every scheduled
sequence). Seconds throughout.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fleetplan._io import user_data_dir
from fleetplan.catalog._tables import data_dir
from fleetplan.catalog.catalog import Catalog, bundled_catalog
from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.errors import DataError, ModelError, UnknownNameError

if TYPE_CHECKING:
    from fleetplan.replica.calibration_file import CalibrationEntry, CalibrationSource

DEFAULT_CALIBRATION_NAME = "calibration.json"
STEP_COEFFS = ("c_step", "c_prefill_tok", "c_seq", "c_kv_tok", "overhead_s")
C_DELIVER_MAX_S = 0.01  # the largest host time per streamed output a parameter set may state


def is_host_time(value: float) -> bool:
    """Whether ``value`` (s) is a host time per streamed output a parameter set may state:
    finite, 0..:data:`C_DELIVER_MAX_S` (the bound of ``ReplicaParams.c_deliver``)."""
    return math.isfinite(value) and 0 <= value <= C_DELIVER_MAX_S


class ReplicaParams(BaseModel):
    """Everything the replica model needs to know about one (model, configuration)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    model: str = Field(min_length=1)
    config: str = Field(min_length=1, description="<count>x<GPU>, e.g. 2xRTX-4090")
    c_step: float = Field(gt=0, le=10.0, description="fixed cost of one engine step, s")
    c_prefill_tok: float = Field(ge=0, le=0.1, description="cost per prefill token, s")
    c_seq: float = Field(ge=0, le=0.1, description="cost per decoding sequence in a step, s")
    c_kv_tok: float = Field(ge=0, le=1e-3, description="cost per cached token read, s")
    kv_capacity_tokens: int = Field(ge=1, le=10**9, description="KV-cache slots (tokens)")
    max_num_seqs: int = Field(ge=1, le=65536, description="cap on running sequences")
    max_num_batched_tokens: int = Field(ge=1, le=10**6, description="token budget per step")
    block_size: int = Field(ge=1, le=1024, description="KV-cache block, tokens")
    overhead_s: float = Field(ge=0, le=10.0, description="per-request overhead outside steps")
    c_deliver: float = Field(
        default=0.0, ge=0, le=C_DELIVER_MAX_S,
        description="host time per streamed output: a first token waits for the outputs listed "
                    "before it in its step (fleetplan.replica.delivery), s; 0 in calibration "
                    "files written before it existed")
    max_model_len: int = Field(ge=2, le=10**8, description="longest prompt + output, tokens")
    calibrated: bool
    source: str = Field(min_length=1, description="where the figures come from")

    @property
    def kv_blocks(self) -> int:
        """Whole KV blocks of the cache."""
        return self.kv_capacity_tokens // self.block_size

    def with_(self, **changes: Any) -> ReplicaParams:
        """A validated copy with some fields changed (e.g. a bigger KV cache)."""
        data = self.model_dump()
        data.update(changes)
        return ReplicaParams.model_validate(data)

    def step_s(self, prefill_tokens: int, decode_seqs: int, kv_read: int) -> float:
        """Duration of one step with these contents."""
        return (self.c_step + self.c_prefill_tok * prefill_tokens + self.c_seq * decode_seqs
                + self.c_kv_tok * kv_read)


def default_calibration_path() -> Path:
    """The calibration read by default: the active data context's
    (:func:`fleetplan.context.active_files`, e.g. ``--calibration``), else the user's
    (:func:`user_calibration_path`) when it exists, else the bundled ``data/calibration.json``."""
    from fleetplan.context import active_files

    if active_files().calibration is not None:
        return Path(active_files().calibration)  # type: ignore[arg-type]
    user = user_calibration_path()
    return user if user.is_file() else data_dir() / DEFAULT_CALIBRATION_NAME


def user_calibration_path() -> Path:
    """``<user data dir>/calibration.json``: where ``fleetplan calibrate`` writes without
    ``--out``."""
    return user_data_dir() / DEFAULT_CALIBRATION_NAME


@cache
def _load_calibration_cached(path: str, mtime: float) -> dict[str, Any]:
    from fleetplan._load import load_json  # bounded: regular file, depth, duplicate keys

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


SPEC_PATHS = ("ratios", "transfer")
EFFICIENCIES = ("auto", *SPEC_PATHS)
SPEC_ERRORS_NAME = "spec_errors.json"


@cache
def _spec_paths_at(path: str, mtime: float) -> dict[str, str]:
    import json

    try:
        paths = json.loads(Path(path).read_text(encoding="utf-8")).get("paths", {})
    except (OSError, ValueError, AttributeError) as e:
        raise DataError(f"{path}: unreadable spec-path table ({e})") from None
    if not isinstance(paths, dict) or not all(
            isinstance(k, str) and v in SPEC_PATHS for k, v in paths.items()):
        raise DataError(f"{path}: 'paths' must map GPU types to 'ratios' or 'transfer'")
    return dict(paths)


def spec_path(gpu: str) -> str:
    """The spec path an uncalibrated pair on ``gpu`` takes by default: ``"transfer"`` where
    ``scripts/gen_spec_errors.py`` measured the transfer efficiencies no worse than the ratios
    on every leave-one-model-out metric of that GPU type (``paths`` in
    ``data/spec_errors.json``), else ``"ratios"``."""
    f = data_dir() / SPEC_ERRORS_NAME
    if not f.is_file():
        return "ratios"
    return _spec_paths_at(str(f), f.stat().st_mtime).get(gpu, "ratios")


def replica_params(model: str, config: str, *,
                   calibration: CalibrationSource = None,
                   engine_version: str | None = None,
                   efficiency: str = "auto",
                   catalog: Catalog | None = None) -> ReplicaParams:
    """Parameters of ``model`` served on ``config``, names read in ``catalog`` (default: the
    bundled one).

    Calibrated figures when the calibration (file path, loaded dict or
    :class:`~fleetplan.replica.calibration_file.CalibrationFile`, or the bundled
    ``data/calibration.json``) holds this pair; otherwise first-principles priors scaled by the
    efficiency factors learned from calibrated configurations of the same GPU type, with
    ``calibrated=False``. Unknown names raise :class:`UnknownNameError` (with did-you-mean);
    a model that does not fit the configuration's memory, or whose heads vLLM cannot split over
    its tensor-parallel group (:func:`~fleetplan.replica.priors.check_tensor_parallel`), raises
    :class:`ModelError`.
    ``engine_version``: a spec-based prior uses that vLLM version's engine defaults
    (:mod:`fleetplan.replica.engine_defaults`; calibrated figures are unchanged).
    ``efficiency``: how an uncalibrated pair's step costs are learned: ``"ratios"``
    (per-coefficient efficiency ratios), ``"transfer"`` (per-GPU-type efficiencies of the
    bandwidth-, compute- and interconnect-bound parts,
    :func:`~fleetplan.replica.priors.fit_transfer_efficiency`, where the GPU type has enough
    calibrated configurations) or ``"auto"`` (the GPU type's measured better path,
    :func:`spec_path`).
    """
    from fleetplan.errors import InputError
    from fleetplan.replica.calibration_file import load_calibration_file
    from fleetplan.replica.priors import fit_transfer_efficiency, prior_params, spec_prior

    if efficiency not in EFFICIENCIES:
        raise InputError(f"efficiency {efficiency!r}: expected one of {', '.join(EFFICIENCIES)}")

    cat = catalog if catalog is not None else bundled_catalog()
    spec = cat.model(model)
    hw = HardwareConfig.parse(config, cat)
    cal = load_calibration_file(calibration)
    entry = cal.entry(spec.model, hw.name)
    if entry is not None:
        return entry.params
    eff, how = learned_efficiency(cal.configs, hw.gpu, hw.gpu_count)
    if eff is None:
        return prior_params(spec, hw, engine_version=engine_version)
    path = spec_path(hw.gpu) if efficiency == "auto" else efficiency
    fit = (fit_transfer_efficiency(cal.configs, hw.gpu, catalog=cat) if path == "transfer"
           else None)
    p = spec_prior(spec, hw, eff, fit, engine_version=engine_version, source=(
        f"spec-based prior (model card + GPU datasheet) x efficiency ratios {how}"))
    if fit is None:
        return p
    why = (f"; the {hw.gpu} spec path by held-out error (docs/spec-path-validation.md)"
           if efficiency == "auto" else "")
    return p.with_(source=f"{p.source}; other coefficients x efficiency ratios {how}{why}")


def geomean_rows(rows: Sequence[dict[str, float]]) -> dict[str, float]:
    """Per key of the first row, the geometric mean over ``rows``; ``n_configs``: how many."""
    out = {k: math.exp(sum(math.log(r[k]) for r in rows) / len(rows)) for k in rows[0]}
    out["n_configs"] = len(rows)
    return out


def learned_efficiency(entries: Sequence[CalibrationEntry], gpu: str, gpu_count: int, *,
                       exclude: tuple[str, str] | None = None
                       ) -> tuple[dict[str, float] | None, str]:
    """Efficiency ratios (fitted / ideal, geometric means) for an unmeasured pair on
    ``gpu_count`` x ``gpu``: from calibrated configurations with the same GPU and count when
    there are any, else the same GPU type, else all calibrated configurations without flagged
    runs (a stalled server's ratios describe its own GPU type, not others). Returns the
    ratios (None without any calibrated configuration) and where they come from."""
    cal = [e for e in entries if e.calibrated and e.ratios_to_ideal
           and not (exclude and e.key == exclude)]
    tiers = [
        ([e for e in cal if e.gpu == gpu and e.gpu_count == gpu_count],
         f"learned from {{n}} calibrated {gpu_count}x{gpu} configuration(s)"),
        ([e for e in cal if e.gpu == gpu],
         f"learned from {{n}} calibrated {gpu} configuration(s) of other GPU counts"),
        ([e for e in cal if not e.has_flagged_runs],
         f"pooled over {{n}} calibrated configuration(s) without flagged runs (none on {gpu})"),
    ]
    for rows, how in tiers:
        if rows:
            return geomean_rows([e.ratios_to_ideal for e in rows]), how.format(n=len(rows))
    return None, "default efficiency assumptions (no calibrated configuration)"


def known_configs(calibration: CalibrationSource = None) -> list[tuple[str, str]]:
    """The calibrated (model, config) pairs."""
    from fleetplan.replica.calibration_file import load_calibration_file

    return [e.key for e in load_calibration_file(calibration).configs]


def check_name_pair(model: str, config: str, catalog: Catalog | None = None) -> None:
    """Raise a clear error for a model or configuration name ``catalog`` (default: the bundled
    one) does not know."""
    cat = catalog if catalog is not None else bundled_catalog()
    cat.model(model)
    try:
        HardwareConfig.parse(config, cat)
    except UnknownNameError:
        raise
    except ValidationError as exc:
        raise ModelError(f"configuration {config!r}: {exc.errors()[0]['msg']}") from None


def finite_positive(name: str, value: float) -> float:
    """``value`` if it is a finite number > 0, else a :class:`ModelError` naming it."""
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise ModelError(f"{name}(={value!r}) must be a finite number > 0")
    return float(value)

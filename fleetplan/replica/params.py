"""Which parameters a serving replica gets: calibrated figures, else a spec-based prior.

Main entry: :func:`replica_params` (calibrated figures when the calibration
(:mod:`fleetplan.replica.calibration_file`, by default ``data/calibration.json``) has the pair,
else the first-principles priors of :mod:`fleetplan.replica.priors` scaled by efficiency factors
learned from calibrated configurations of the same GPU type, marked ``calibrated=False``). The
record it returns is :class:`~fleetplan.replica.params_record.ReplicaParams`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path

import numpy as np
from pydantic import ValidationError

from fleetplan.catalog._tables import data_dir
from fleetplan.catalog.catalog import Catalog, bundled_catalog
from fleetplan.catalog.hardware import HardwareConfig, server_kind
from fleetplan.catalog.models import ModelSpec
from fleetplan.errors import DataError, InputError, ModelError, UnknownNameError
from fleetplan.replica.calibration_file import (
    CalibrationEntry,
    CalibrationFile,
    CalibrationSource,
    load_calibration_file,
)
from fleetplan.replica.families import (
    FamilyFit,
    family_efficiency,
    gpu_family,
    moe_layer_family,
)
from fleetplan.replica.params_record import ReplicaParams
from fleetplan.replica.priors import as_lockstep, engine_first, lockstep_config, prior_params
from fleetplan.replica.transfer import (
    TransferEfficiency,
    fit_transfer_efficiency,
    geomean_rows,
    spec_prior,
    transfer_prior,
)

SPEC_PATHS = ("ratios", "transfer")
EFFICIENCIES = ("auto", *SPEC_PATHS)
SPEC_ERRORS_NAME = "spec_errors.json"


@cache
def _spec_paths_at(path: str, mtime: float) -> dict[str, str]:
    try:
        paths = json.loads(Path(path).read_text(encoding="utf-8")).get("paths", {})
    except (OSError, ValueError, AttributeError) as e:
        raise DataError(f"{path}: unreadable spec-path table ({e})") from None
    if not isinstance(paths, dict) or not all(
            isinstance(k, str) and v in SPEC_PATHS for k, v in paths.items()):
        raise DataError(f"{path}: 'paths' must map GPU types or server kinds to 'ratios' or "
                        "'transfer'")
    return dict(paths)


def path_in(paths: Mapping[str, str], gpu: str, gpu_count: int) -> str:
    """The spec path ``paths`` gives ``gpu_count`` x ``gpu``: its server kind's
    (:func:`~fleetplan.catalog.hardware.server_kind`: one GPU or tensor-parallel), else its GPU
    type's, else ``"ratios"``."""
    return paths.get(server_kind(gpu, gpu_count)) or paths.get(gpu) or "ratios"


def spec_path(gpu: str, gpu_count: int = 1) -> str:
    """The spec path an uncalibrated pair of ``gpu_count`` x ``gpu`` takes by default:
    ``"transfer"`` where ``scripts/gen_spec_errors.py`` measured the transfer efficiencies no
    worse than the ratios on every leave-one-model-out metric of that server kind (one GPU or
    tensor-parallel, :func:`path_in`; ``paths`` in ``data/spec_errors.json``), else
    ``"ratios"``."""
    f = data_dir() / SPEC_ERRORS_NAME
    if not f.is_file():
        return "ratios"
    return path_in(_spec_paths_at(str(f), f.stat().st_mtime), gpu, gpu_count)


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
    :func:`~fleetplan.replica.transfer.fit_transfer_efficiency`, where the GPU type has enough
    calibrated configurations) or ``"auto"`` (the GPU type's measured better path,
    :func:`spec_path`).
    """
    if efficiency not in EFFICIENCIES:
        raise InputError(f"efficiency {efficiency!r}: expected one of {', '.join(EFFICIENCIES)}")

    cat = catalog if catalog is not None else bundled_catalog()
    spec = cat.model(model)
    hw = HardwareConfig.parse(config, cat)
    group = lockstep_config(spec, hw)
    if group is not None:  # an MoE model's data-parallel ranks step as one group
        return as_lockstep(replica_params(model, group.name, calibration=calibration,
                                          engine_version=engine_version, efficiency=efficiency,
                                          catalog=cat), hw, group)
    cal = load_calibration_file(calibration)
    entry = cal.entry(spec.model, hw.name)
    if entry is not None:
        return entry.params
    rank = data_parallel_rank(hw)
    ranked = cal.entry(spec.model, rank) if rank is not None else None
    if ranked is not None:  # each rank is that measured server, behind one endpoint
        return ranked.params.with_(config=hw.name, source=(
            f"{ranked.params.source}; each of the {hw.dp} data-parallel ranks of {hw.name} is "
            f"that {rank} server"))
    return with_learned_delay(
        _uncalibrated(spec, hw, cal, cat, efficiency, engine_version), hw, cal.configs, cat)


def data_parallel_rank(hw: HardwareConfig) -> str | None:
    """The plain configuration each rank of a data-parallel server is (``4xH100-PCIe+tp2dp2``:
    ``2xH100-PCIe``), where it is one: no pipeline stages, no stated link, and each rank's
    tensor-parallel group on one node; else None."""
    tp = int(hw.tp_size or hw.gpu_count)
    if (hw.dp == 1 or hw.pp_size > 1 or hw.gpu_link is not None
            or hw.gpus_per_node % tp):
        return None
    return f"{tp}x{hw.gpu}"


def _uncalibrated(spec: ModelSpec, hw: HardwareConfig, cal: CalibrationFile, cat: Catalog,
                  efficiency: str, engine_version: str | None) -> ReplicaParams:
    measured = any(e.calibrated and e.gpu == hw.gpu for e in cal.configs)
    family = None if efficiency != "auto" or measured else family_efficiency(hw.spec)
    if family is not None and not family.moe_only:
        return _spec_path(spec, hw, cal, cat, efficiency, engine_version, family)
    # the spec path: a dense step, from datasheets and ratios no MoE model taught; an MoE
    # model's step takes the time per MoE layer its GPU's family (or that family's sibling)
    # was fitted to on others' runs (a family kept for that time alone, a GPU type whose
    # calibrated configurations are dense, a family without runs of its own)
    p = _spec_path(spec, hw, cal, cat, efficiency, engine_version, None)
    moe = moe_layer_family(hw.spec) if efficiency == "auto" and spec.is_moe else None
    if moe is None:
        return p
    how = "" if moe.family == gpu_family(hw.spec) else (
        f", taken for this {gpu_family(hw.spec)} GPU (the same MoE kernels)")
    return p.with_(c_step=min(p.c_step + moe.parts["moe_layer_s"] * spec.layers, 10.0),
                   source=f"{p.source}; {moe.moe_describe()}{how}")


def _spec_path(spec: ModelSpec, hw: HardwareConfig, cal: CalibrationFile, cat: Catalog,
               efficiency: str, engine_version: str | None,
               family: FamilyFit | None) -> ReplicaParams:
    eff, how = learned_efficiency(cal.configs, hw.gpu, int(hw.tp_size or hw.gpu_count))
    if family is not None:  # a GPU type never measured here: its family's fit on others' runs
        fam_fit = TransferEfficiency(hw.gpu, ratios=dict(eff or {}), models=(), decode_comm=True,
                                     **family.parts)
        p = transfer_prior(spec, hw, fam_fit, ratios=eff, engine_version=engine_version)
        return p.with_(source=f"spec-based prior (model card + GPU datasheet) x "
                              f"{family.describe()}; other coefficients x efficiency ratios "
                              f"{how}")
    if eff is None:
        return prior_params(spec, hw, engine_version=engine_version)
    path = spec_path(hw.gpu, hw.gpu_count) if efficiency == "auto" else efficiency
    fit = (fit_transfer_efficiency(cal.configs, hw.gpu, catalog=cat) if path == "transfer"
           else None)
    p = spec_prior(spec, hw, eff, fit, engine_version=engine_version, source=(
        f"spec-based prior (model card + GPU datasheet) x efficiency ratios {how}"))
    if fit is None:
        return p
    why = (f"; the {hw.gpu} spec path by held-out error (docs/spec-path-validation.md)"
           if efficiency == "auto" else "")
    return p.with_(source=f"{p.source}; other coefficients x efficiency ratios {how}{why}")


def with_learned_delay(p: ReplicaParams, hw: HardwareConfig,
                       entries: Sequence[CalibrationEntry],
                       catalog: Catalog | None = None) -> ReplicaParams:
    """An uncalibrated engine-first server (:func:`~fleetplan.replica.priors.engine_first`: its
    all-reduces through host memory) with the stream delay its kind showed where measured: the
    medians of the fitted delays (median and spread) of the calibrated engine-first
    configurations of its GPU type, else of every GPU type (``first_token_delay_s``,
    :mod:`fleetplan.replica.stream_delay`); any other server unchanged. None calibrated: no
    delay, said in the source."""
    if not engine_first(hw):
        return p
    kind = [e for e in entries if e.calibrated and engine_first_name(e.config, catalog)]
    for rows, where in (([e for e in kind if e.gpu == hw.gpu], f"{hw.gpu}"), (kind, "GPU")):
        if rows:
            med = float(np.median([e.params.first_token_delay_s for e in rows]))
            sig = float(np.median([e.params.first_token_delay_sigma for e in rows]))
            return p.with_(first_token_delay_s=med, first_token_delay_sigma=sig, source=(
                f"{p.source}; first-token delay {med * 1e3:.0f} ms (median; sigma {sig:.2f}): "
                f"the medians of {len(rows)} calibrated tensor-parallel {where} server(s) "
                "whose all-reduces go through host memory"))
    return p.with_(source=f"{p.source}; no first-token delay: no calibrated tensor-parallel "
                          "server without peer-to-peer to learn it from")


def engine_first_name(config: str, catalog: Catalog | None = None) -> bool:
    """:func:`~fleetplan.replica.priors.engine_first` of a configuration name (False for one
    ``catalog``, default the bundled one, cannot parse)."""
    try:
        return engine_first(HardwareConfig.parse(config, catalog or bundled_catalog()))
    except (InputError, ValueError):
        return False


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

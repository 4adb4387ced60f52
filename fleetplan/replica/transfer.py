"""The transfer model: per-GPU-type efficiencies of the parts of a step, so that what was
measured carries over to a model, a GPU count or a GPU type never measured.

Main entries: :class:`TransferEfficiency` (the efficiencies of the bandwidth-, compute- and
interconnect-bound parts of a step and a fixed host time), :func:`fit_transfer_efficiency`
(fitted across the calibrated configurations of a GPU type, so they carry over to a model never
measured: the spec path of a GPU type where it was no worse held out,
:func:`fleetplan.replica.params.spec_path`, or forced with ``predict(...,
efficiency="transfer")``; docs/catalogs.md has its leave-one-model-out errors; a GPU family's
fit on other people's runs, :mod:`fleetplan.replica.families`, has the same parts),
:func:`transfer_prior` (a prior from them) and :func:`spec_prior` (an uncalibrated pair's prior
by either path). The ideal parts themselves are :func:`fleetplan.replica.priors.ideal_parts`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fleetplan.catalog.catalog import Catalog, bundled_catalog
from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.catalog.models import ModelSpec
from fleetplan.replica.params_record import ReplicaParams
from fleetplan.replica.priors import DEFAULT_RATIOS, ideal_parts, prior_params

if TYPE_CHECKING:
    from fleetplan.replica.calibration_file import CalibrationEntry


def spec_prior(spec: ModelSpec, hw: HardwareConfig, ratios: Mapping[str, float] | None,
               fit: TransferEfficiency | None, *, engine_version: str | None = None,
               source: str | None = None) -> ReplicaParams:
    """An uncalibrated pair's prior: :func:`transfer_prior` with ``fit`` when there is one (the
    other coefficients from ``ratios``), else :func:`prior_params` with ``ratios`` (``source``
    names them)."""
    if fit is not None:
        return transfer_prior(spec, hw, fit, ratios=ratios, engine_version=engine_version)
    return prior_params(spec, hw, efficiency=ratios, source=source,
                        engine_version=engine_version)


@dataclass(frozen=True)
class TransferEfficiency:
    """Per-GPU-type efficiencies of the parts of a step, fitted over calibrated configurations
    of several models (and GPU counts) so that they carry over to a model never measured:

    ``c_step = weights_bw x ideal weight streaming + comm_step x ideal all-reduce latency +
    host_s`` and ``c_prefill_tok = compute x ideal token FLOPs + comm_tok x ideal all-reduce
    bytes``: bandwidth-, interconnect- and compute-bound parts, each with its own factor, and a
    fixed host time per step. The other coefficients keep the geometric-mean ratios of the same
    configurations (``ratios``); with ``decode_comm`` (a GPU family's fit on other people's
    runs, :mod:`fleetplan.replica.families`), the all-reduce bytes of each decoded token in
    ``c_seq`` take the fitted ``comm_tok`` too: a decoded token all-reduces the same bytes as a
    prefilled one, and without it a family fit could slow a tensor-parallel server's decode
    steps only by slowing its prefills (a calibrated ``c_seq`` already holds them)."""

    gpu: str
    weights_bw: float
    comm_step: float
    host_s: float
    compute: float
    comm_tok: float
    ratios: dict[str, float]
    models: tuple[str, ...]
    # True for a GPU family's fit on other people's runs (no calibrated c_seq behind it): the
    # all-reduce bytes of a decoded token take ``comm_tok`` as a prefilled token's do
    decode_comm: bool = False
    # host time per sequence of a step (a GPU family's fit, with ``decode_comm``): added to
    # ``c_seq``; the bundled calibrations' ``c_seq`` already holds their own
    seq_host_s: float = 0.0
    # a mixture-of-experts layer's own time per step (router, top-k, token permutation and the
    # grouped GEMMs' launches at small batches: none of it scales with the memory bandwidth),
    # times the model's layers, added to ``c_step`` of an MoE model (a GPU family's fit)
    moe_layer_s: float = 0.0

    @property
    def n_configs(self) -> int:
        return int(self.ratios.get("n_configs", 0))

    def describe(self) -> str:
        return (f"transfer efficiencies of {self.gpu} from {self.n_configs} calibrated "
                f"configuration(s) of {len(self.models)} model(s): weights x{self.weights_bw:.2f}"
                f", all-reduce latency x{self.comm_step:.2f}, host {1e3 * self.host_s:.2f} ms, "
                f"compute x{self.compute:.2f}, all-reduce bytes x{self.comm_tok:.2f}")


def _nnls_relative(rows: list[list[float]], target: list[float]) -> list[float]:
    """Non-negative least squares of relative errors (each row divided by its target)."""
    import numpy as np
    from scipy.optimize import nnls

    a = np.array(rows) / np.array(target)[:, None]
    x, _ = nnls(a, np.ones(len(target)))
    return [float(v) for v in x]


def geomean_rows(rows: Sequence[dict[str, float]]) -> dict[str, float]:
    """Per key of the first row, the geometric mean over ``rows``; ``n_configs``: how many."""
    out = {k: math.exp(sum(math.log(r[k]) for r in rows) / len(rows)) for k in rows[0]}
    out["n_configs"] = len(rows)
    return out


def fit_transfer_efficiency(entries: Sequence[CalibrationEntry], gpu: str, *,
                            exclude_model: str | None = None,
                            exclude: tuple[str, str] | None = None,
                            catalog: Catalog | None = None) -> TransferEfficiency | None:
    """:class:`TransferEfficiency` of ``gpu`` from its calibrated entries (``exclude_model``:
    leave that model's configurations out, as leave-one-model-out does; ``exclude``: one
    (model, configuration), as leave-one-config-out does). None with fewer than
    three configurations or two models. A part no configuration exercises (all-reduces when
    every configuration is one GPU) keeps the default ratio of :data:`DEFAULT_RATIOS`.
    ``catalog``: where the entries' models and GPUs are read (default: the bundled one)."""
    cat = catalog if catalog is not None else bundled_catalog()

    rows = [e for e in entries if e.calibrated and e.gpu == gpu and e.ratios_to_ideal
            and e.model != exclude_model and e.key != exclude]
    models = tuple(sorted({e.model for e in rows}))
    if len(rows) < 3 or len(models) < 2:
        return None
    step_x, step_y, tok_x, tok_y = [], [], [], []
    for e in rows:
        p = ideal_parts(cat.model(e.model), HardwareConfig.parse(e.config, cat))
        step_x.append([p["weights"], p["comm_step"], 1.0])
        step_y.append(e.params.c_step)
        tok_x.append([p["tok"], p["comm_tok"]])
        tok_y.append(e.params.c_prefill_tok)
    w_bw, w_comm, host = _nnls_relative(step_x, step_y)
    compute, comm_tok = _nnls_relative(tok_x, tok_y)
    if not any(r[1] for r in step_x):
        w_comm = DEFAULT_RATIOS["c_step"]
    if not any(r[1] for r in tok_x):
        comm_tok = DEFAULT_RATIOS["c_prefill_tok"]
    return TransferEfficiency(gpu, w_bw, w_comm, host, compute, comm_tok,
                              geomean_rows([e.ratios_to_ideal for e in rows]), models)


def transfer_prior(spec: ModelSpec, hw: HardwareConfig, eff: TransferEfficiency, *,
                   ratios: Mapping[str, float] | None = None,
                   engine_version: str | None = None) -> ReplicaParams:
    """A prior from :class:`TransferEfficiency`: ``c_step`` and ``c_prefill_tok`` from the
    fitted parts; the other coefficients from ``ratios`` (e.g. those learned from the same GPU
    and count, :func:`~fleetplan.replica.params.learned_efficiency`), else from the GPU type's
    geometric-mean ratios (``calibrated=False``)."""
    base = prior_params(spec, hw, efficiency=ratios or eff.ratios, engine_version=engine_version,
                        source=f"spec-based prior (model card + GPU datasheet) x "
                               f"{eff.describe()}")
    p = ideal_parts(spec, hw)
    c_step = (eff.weights_bw * p["weights"] + eff.comm_step * p["comm_step"] + eff.host_s
              + (eff.moe_layer_s * spec.layers if spec.is_moe else 0.0))
    c_tok = eff.compute * p["tok"] + eff.comm_tok * p["comm_tok"]
    if not (c_step > 0 and c_tok > 0):
        return base
    c_experts = min(eff.weights_bw * p["experts"], 10.0)  # routed experts: read like weights
    if not eff.decode_comm:
        return base.with_(c_step=min(c_step, 10.0), c_prefill_tok=min(c_tok, 0.1),
                          c_experts=c_experts)
    # c_seq = ratio x (tok + comm_tok + ...): its all-reduce part at the fitted efficiency
    r = float((ratios or eff.ratios or {}).get("c_seq", DEFAULT_RATIOS["c_seq"]))
    c_seq = max(base.c_seq + (eff.comm_tok - r) * p["comm_tok"], 0.0) + eff.seq_host_s
    return base.with_(c_step=min(c_step, 10.0), c_prefill_tok=min(c_tok, 0.1),
                      c_seq=min(c_seq, 0.1), c_experts=c_experts)

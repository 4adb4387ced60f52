"""Plans robust to the replica model's own error: ``solve --confidence P``.

The replica model's P99 TTFT is wrong by a measured amount, and not always symmetrically (the
tensor-parallel RTX 4090 servers' tails come out far too short, docs/replica-model.md). Every
margin is read from held-out signed errors ``e = predicted / measured - 1`` (the measured P99
is the predicted one / ``(1 + e)``):

- a calibrated configuration whose server kind (GPU type, one GPU or tensor-parallel) held at
  least :data:`MIN_KIND_RUNS` leave-one-rate-out runs: that kind's 10/50/90th percentiles of
  ``e`` (:data:`MODEL_ERROR_QUANTILES_BY_KIND`, docs/validation.md's "Signed ttft_p99_ms error
  per server kind", from ``fleetplan validate --cv``);
- an uncalibrated (spec-based) one (:func:`spec_error`): the spec path's held-out errors of
  ``data/spec_errors.json`` (:mod:`fleetplan.validate.bands`; leave-one-config-out for a model
  measured on other configurations, leave-one-model-out for one never measured; for a GPU type
  with no measured row, other people's runs of ``data/external`` judged leave-one-dataset-out,
  else leave-one-gpu-out).

Both read ``ln(1 + e)`` as a split normal through the 10/50/90th percentiles (``bias`` its
median; ``sigma`` from the 10th to the 50th, the side where the real P99 is the longer,
``sigma_hi`` from the 50th to the 90th), so that the model holds the table's three percentiles
exactly and a plan's 80% band (those percentiles) and its ``slo_met_probability`` agree: a band
reaching above the SLO is a probability below 0.9 (one normal through the 10-90 spread put
0.92 beside such a band, 7 Dec 2026). The factor at confidence ``P`` is that model's: ``f =
exp(z_P sigma - bias)``, at least 1 (:func:`normal_factor`), so that a simulated P99 of ``SLO /
f`` meets the SLO with probability exactly ``P`` under the very model that
``slo_met_probability`` states (an interpolation of the three quantiles for the factor gave 0.70
at ``--confidence 0.75``, issue 39). A calibrated configuration of a kind with fewer runs falls
back to its GPU type's median absolute error (:data:`MODEL_ERROR_PCT`; a GPU type the bundled
store never measured: :data:`UNMEASURED_ERROR_PCT`), read as an unbiased log-normal:
``sigma = ln(1 + m) / 0.6745`` (the median ``|e|`` of ``Normal(0, sigma)``), ``f = exp(z_P
sigma)`` (:func:`latency_factor`, the same rule with ``bias`` 0). The plan's notes name the
table of each configuration's margin.

With its factor ``f`` a configuration's capacities are measured
at every SLO divided by ``f`` (:func:`confident_inputs`), the plan's simulation must meet the SLOs
divided by the largest ``f`` of the pools a class uses, and each class reports ``margin_ms``
(``SLO x (1 - 1/f)``) and ``slo_met_probability`` (``Phi((ln(SLO / simulated P99) + bias) /
s)``, ``s`` the deviation of the side it falls on; the smallest over its pools); a plan is
verified only where every class's ``slo_met_probability`` is at least ``P``
(:func:`hold_confidence`). Off (``confidence=None``),
nothing here runs.

Main entries: :func:`margins` (scenario, configurations, ``P`` -> :class:`Margins`),
:func:`confident_inputs` and :func:`tighten`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from fleetplan.errors import InputError
from fleetplan.optimize.problem import Tier
from fleetplan.scenario import Scenario
from fleetplan.scenario.fleet import split_model
from fleetplan.validate.bands import ErrorQuantiles
from fleetplan.validate.model_errors import model_errors

# The calibrated model's held-out P99 TTFT errors, from data/model_errors.json (written with
# docs/validation.md by scripts/gen_validation_doc.py from `fleetplan validate --cv` over the
# bundled store; tests/optimize check them against the page). Uncalibrated configurations take
# the spec path's tables instead (:func:`spec_error`).
_ERRORS = model_errors()
# median |error| in percent and runs per GPU type (the page's leave-one-rate-out "Per GPU type")
MODEL_ERROR_PCT: dict[str, tuple[float, int]] = _ERRORS.by_gpu
# the same per server kind (the page's "Per server kind"): a calibrated configuration takes its
# kind's figure where the kind held at least MIN_KIND_RUNS runs, else its GPU type's. The
# tensor-parallel RTX 4090 servers miss their TTFT tails by far more than one RTX 4090 (their
# first-token delays, docs/replica-model.md): one figure per GPU type gave them the margin of a
# one-GPU server and gave one-GPU servers theirs.
MODEL_ERROR_BY_KIND_PCT: dict[str, tuple[float, int]] = _ERRORS.by_kind
MIN_KIND_RUNS = 3
# the signed errors behind those figures (the page's "Signed ttft_p99_ms error per server
# kind"): what a calibrated configuration's margin is read from
MODEL_ERROR_QUANTILES_BY_KIND: dict[str, ErrorQuantiles] = _ERRORS.quantiles_by_kind
# a calibrated configuration of a GPU type the bundled store never measured (a user's own
# calibration): assumed as large as the worst leave-one-config-out error of the validation page
UNMEASURED_ERROR_PCT = _ERRORS.unmeasured_pct
HALF_NORMAL_MEDIAN = 0.6744897501960817  # median of |Normal(0, 1)|
Z_90 = 1.2815515655446004  # the standard normal's 90th percentile


@dataclass(frozen=True)
class ConfigError:
    """The model's error for one configuration and the margin it gives at the confidence."""

    config: str
    calibrated: bool
    median_abs_error_pct: float
    sigma: float
    factor: float
    source: str
    # median of ln(predicted / measured): ln(1 + the median signed error) of the server kind's
    # or the spec path's held-out runs, 0 for a figure with no signed errors (a median |error|
    # alone); the true P99 is the predicted one times exp(-x), x split-normal about ``bias``:
    # deviation ``sigma`` below it (the side where the real P99 is the longer), ``sigma_hi``
    # above it (None: ``sigma`` too), so that its 10th, 50th and 90th percentiles are the
    # table's and the 80% band the plan shows holds what the probability says
    bias: float = 0.0
    sigma_hi: float | None = None

    def side(self, z: float) -> float:
        """The deviation of the half of ``x`` that ``z`` (``x - bias``, or its negation for the
        chance of meeting an SLO) falls in."""
        return _half(z, self.sigma, self.sigma_hi)


def _half(z: float, sigma: float, sigma_hi: float | None) -> float:
    """A split normal's deviation on the side of ``z``: ``sigma`` at or above 0, ``sigma_hi``
    below (``sigma`` when it has none)."""
    return sigma if z >= 0 or sigma_hi is None else sigma_hi


@dataclass(frozen=True)
class Margins:
    """``solve --confidence P``: per configuration, its error and latency factor."""

    confidence: float
    configs: Mapping[str, ConfigError]

    def factor(self, configs: Iterable[str]) -> float:
        return max((self.configs[c].factor for c in configs), default=1.0)

    def met_probability(self, slo_ms: float | None, p99_ms: float | None,
                        configs: Iterable[str]) -> float | None:
        """The smallest, over ``configs``, chance that the true P99 is within the SLO."""

        if slo_ms is None or math.isinf(slo_ms):
            return None
        if p99_ms is None or not math.isfinite(p99_ms) or p99_ms <= 0:
            return 0.0
        probs = [_phi(math.log(slo_ms / p99_ms) + e.bias, e) for c in configs
                 if (e := self.configs[c])]
        return min(probs) if probs else None


def model_error(gpu: str, tp_size: int = 1) -> tuple[float, str]:
    """Median |error| (percent) of a calibrated configuration's P99 TTFT for ``gpu`` at
    tensor-parallel size ``tp_size`` (its server kind's figure, else its GPU type's), and where
    the figure comes from."""
    from fleetplan.catalog.hardware import server_kind

    kind = "leave-one-rate-out"
    server = server_kind(gpu, tp_size)
    if server in MODEL_ERROR_BY_KIND_PCT and MODEL_ERROR_BY_KIND_PCT[server][1] >= MIN_KIND_RUNS:
        m, n = MODEL_ERROR_BY_KIND_PCT[server]
        return m, f"docs/validation.md, {kind}, {server}: median |error| {m:g}% over {n} runs"
    if gpu in MODEL_ERROR_PCT:
        m, n = MODEL_ERROR_PCT[gpu]
        return m, f"docs/validation.md, {kind}, {gpu}: median |error| {m:g}% over {n} runs"
    return UNMEASURED_ERROR_PCT, (f"assumption: {gpu} has no measured run; the worst "
                                  f"leave-one-config-out error ({UNMEASURED_ERROR_PCT:g}%)")


def kind_quantiles(gpu: str, tp_size: int = 1) -> tuple[ErrorQuantiles, str] | None:
    """The signed held-out errors of a calibrated configuration's P99 TTFT for ``gpu`` at
    tensor-parallel size ``tp_size`` when its server kind held at least :data:`MIN_KIND_RUNS`
    runs, and where they come from; else None."""
    from fleetplan.catalog.hardware import server_kind

    server = server_kind(gpu, tp_size)
    q = MODEL_ERROR_QUANTILES_BY_KIND.get(server)
    if q is None or q.n < MIN_KIND_RUNS:
        return None
    return q, (f"docs/validation.md, leave-one-rate-out, {server}: signed errors of {q.n} runs "
               f"(10/50/90th {100 * q.p10:.1f} / {100 * q.p50:.1f} / {100 * q.p90:.1f}%)")


def quantile_error(config: str, calibrated: bool, q: ErrorQuantiles, median_abs_pct: float,
                   confidence: float, source: str) -> ConfigError:
    """A configuration's error read from signed error quantiles (module docstring):
    ``ln(1 + e)`` a split normal through the 10/50/90th, its factor :func:`normal_factor`."""
    bias = math.log1p(q.p50)
    lo = (bias - math.log1p(q.p10)) / Z_90  # the side where the real P99 is the longer
    hi = (math.log1p(q.p90) - bias) / Z_90
    return ConfigError(config, calibrated, median_abs_pct, lo,
                       normal_factor(confidence, lo, bias, hi), source, bias=bias,
                       sigma_hi=hi)


def normal_factor(confidence: float, sigma: float, bias: float,
                  sigma_hi: float | None = None) -> float:
    """The latency factor at ``confidence`` of the error model ``slo_met_probability`` reads
    (``ln(predicted / measured)`` split-normal about ``bias``, deviation ``sigma`` below it and
    ``sigma_hi`` above, :class:`ConfigError`): the ``f`` with ``P(x >= -ln f) = confidence``,
    so that a simulated P99 of ``SLO / f`` has exactly that probability of meeting the SLO; at
    least 1 (never loosens an SLO)."""
    from scipy.special import ndtri

    check_confidence(confidence)
    z = float(ndtri(confidence))
    return max(1.0, math.exp(z * _half(z, sigma, sigma_hi) - bias))


def _phi(z: float, e: ConfigError) -> float:
    """``P(x >= bias - z)`` of ``e``'s split normal: the chance a simulated P99 ``exp(z -
    bias)`` below the SLO meets it."""
    from scipy.special import ndtr

    s = e.side(z)
    if s <= 0:
        return 1.0 if z >= 0 else 0.0
    return float(ndtr(z / s))


def confidence_at(factor: float, e: ConfigError) -> float:
    """The inverse of :func:`normal_factor` for one configuration's error: the confidence at
    which a simulated P99 of ``SLO / factor`` meets the SLO (``factor`` < 1: a P99 above the
    SLO)."""
    return _phi(math.log(max(factor, 1e-300)) + e.bias, e)


def sigma_of(median_abs_error_pct: float) -> float:
    """The log-normal error's ``sigma`` whose median ``|e|`` is the measured median error."""
    return math.log1p(median_abs_error_pct / 100.0) / HALF_NORMAL_MEDIAN


def latency_factor(confidence: float, median_abs_error_pct: float) -> float:
    """How many times worse latencies are taken at ``confidence``: ``exp(z_P sigma)``, at
    least 1 (non-decreasing in both arguments)."""
    from scipy.special import ndtri

    check_confidence(confidence)
    return math.exp(max(0.0, float(ndtri(confidence))) * sigma_of(median_abs_error_pct))


def margins(scenario: Scenario, configs: Iterable[str], confidence: float) -> Margins:
    """Each configuration's error and its latency factor at ``confidence``: a calibrated one's
    from docs/validation.md's tables (:func:`model_error`), an uncalibrated (spec-based) one's
    from the spec path's held-out errors (:func:`spec_error`). In a scenario with several
    models a configuration is named ``model/config`` and is calibrated or not for its model."""
    from fleetplan.catalog.hardware import HardwareConfig
    from fleetplan.profiles.store import load_profiles
    from fleetplan.replica.params import replica_params

    check_confidence(confidence)
    ctx = scenario.data_context()  # its store and calibration, as the plan's
    out = {}
    folds: dict[str, str] = {}
    for name in sorted(set(configs)):
        # a candidate of a plan of several models is named model/config: its own model's errors
        model, config = split_model(name)
        model = model or scenario.one_model
        if model not in folds:
            # a model measured on some configuration: an unmeasured one of it is a held-out
            # config; a model never measured (a config.json): a held-out model
            folds[model] = ("leave-one-config-out" if load_profiles(default=ctx.store)
                            .configs(model) else "leave-one-model-out")
        fold = folds[model]
        cat = ctx.catalog
        params = replica_params(model, config, catalog=cat, calibration=ctx.calibration)
        hw = HardwareConfig.parse(config, cat)
        gpu = hw.gpu
        if not params.calibrated:
            out[name] = spec_error(name, gpu, confidence, fold, moe=params.is_moe,
                                   mla=cat.model(model).is_mla)
            continue
        tp = int(hw.tp_size or hw.gpu_count)
        m, src = model_error(gpu, tp)
        signed = kind_quantiles(gpu, tp)
        out[name] = (quantile_error(name, True, signed[0], m, confidence, signed[1])
                     if signed is not None else
                     ConfigError(name, params.calibrated, m, sigma_of(m),
                                 latency_factor(confidence, m), src))
    return Margins(confidence, out)


def spec_error(config: str, gpu: str, confidence: float,
               fold: str = "leave-one-model-out", *, moe: bool = False,
               mla: bool = False) -> ConfigError:
    """The error of a spec-based (uncalibrated) configuration's P99 TTFT, from
    ``data/spec_errors.json`` (:mod:`fleetplan.validate.bands`): ``fold``'s row of its GPU type,
    or, for a GPU type the store never measured, the errors of other people's runs on that GPU
    type, else on all theirs (the ``external`` fold, judged leave-one-dataset-out), else the
    leave-one-gpu-out errors of all GPU types (:meth:`ErrorTable.quantiles`; an MoE model's,
    ``moe``, from other people's runs on every GPU type; a latent-attention model's, ``mla``,
    from such models' runs). The
    factor and probability are :func:`quantile_error`'s;
    ``slo_met_probability`` takes ``ln(1 + e)`` normal through the table's 10/50/90th
    percentiles of the signed error ``e = predicted / measured - 1``."""
    from fleetplan.validate.bands import error_table

    row = error_table().lookup(gpu, "ttft_p99_ms", fold, moe=moe, mla=mla)
    q, basis = row.quantiles, row.basis
    median_abs = row.median_abs_pct or abs(q.p50) * 100.0
    src = (f"data/spec_errors.json (spec path, uncalibrated): {basis}; factor at "
           f"confidence {confidence:g} of those errors (log-normal through their 10/50/90th)")
    return quantile_error(config, False, q, median_abs, confidence, src)


def scale_slos(scenario: Scenario, f: float, names: Iterable[str] | None = None) -> Scenario:
    """``scenario`` with the latency targets of its classes (of ``names``, default all)
    multiplied by ``f``."""
    chosen = None if names is None else set(names)
    classes = []
    for c in scenario.classes:
        data: dict[str, Any] = c.model_dump(mode="python", by_alias=True, exclude_unset=True)
        if c.slo is not None and (chosen is None or c.name in chosen):
            data["slo"] = {k: v * f for k, v in c.slo.model_dump(exclude_none=True).items()}
        classes.append(data)
    return scenario.with_updates(classes=classes)


def confident_inputs(scenario: Scenario, inputs: Any, m: Margins, **build: Any) -> Any:
    """``inputs`` (:class:`fleetplan.optimize.inputs.Inputs`) with each configuration's
    capacities measured at every SLO divided by its factor (``build``: the keywords of
    :func:`fleetplan.optimize.inputs.build_problem`). In a scenario with several models each
    model's capacities are measured on its own classes (its candidates named ``model/config``,
    :mod:`fleetplan.optimize.multi_model`)."""
    from fleetplan.optimize.multi_model import model_config
    from fleetplan.scenario.served import is_multi_model, serving_models

    problem = inputs.problem
    capacity = dict(problem.capacity)
    results = dict(inputs.results)
    probes = dict(problem.probes)
    parts: list[tuple[str | None, Scenario]] = (
        [(mdl, scenario.for_model(mdl)) for mdl in serving_models(scenario)]
        if is_multi_model(scenario) else [(None, scenario)])
    # a class's tier in the problem at hand, by name (a tightened search names the same classes)
    tier_of = {d.name: d.tier for d in problem.demands}
    for model, sub in parts:
        def named(config: str, model: str | None = model) -> str:
            return config if model is None else model_config(model, config)

        _tighten_part(sub, m, named, tier_of, capacity, results, probes, build)
    note = ("confidence {:g}: capacities measured at each SLO divided by the model-error factor "
            "of the configuration ({})").format(m.confidence, "; ".join(
                f"{c} x{e.factor:.3f} ({e.source})" for c, e in sorted(m.configs.items())))
    return replace(inputs, problem=replace(problem, capacity=capacity, probes=probes),
                   results=results,
                   notes=(*inputs.notes, note))


def _tighten_part(scenario: Scenario, m: Margins, named: Callable[[str], str],
                  tier_of: Mapping[str, Tier], capacity: dict[Any, float],
                  results: dict[Any, Any], probes: dict[Any, Any],
                  build: Mapping[str, Any]) -> None:
    """:func:`confident_inputs` for one model's scenario (``named``: a configuration -> its
    candidate name in the problem): its capacities, results and probes at the tightened SLOs,
    written into the tables given."""
    from fleetplan.optimize.inputs import build_problem, candidate_configs

    by_factor: dict[float, list[tuple[str, list[str], int | None]]] = {}
    seen: set[str] = set()
    for cand in candidate_configs(scenario):
        if named(cand[0]) not in m.configs:  # left out: the model does not fit on it
            continue
        f = m.configs[named(cand[0])].factor
        if cand[0] in seen:  # one configuration in two markets: its capacities are one
            continue
        seen.add(cand[0])
        if f > 1.0:
            by_factor.setdefault(f, []).append(cand)
    for f, group in sorted(by_factor.items()):
        variant = scale_slos(scenario, 1.0 / f).with_updates(candidates=[
            {"config": c, "regions": r, **({} if mx is None else {"max_replicas": mx})}
            for c, r, mx in group])
        tight = build_problem(variant, **build)
        tiers: dict[Tier, Tier] = {v.tier: tier_of[v.name] for v in tight.problem.demands}
        names = {named(c) for c, _r, _m in group}
        for key in [k for k in capacity if k[1] in names]:
            capacity[key] = 0.0
        for (name, config, t), cap in tight.problem.capacity.items():
            capacity[(name, named(config), tiers[t])] = cap
        for (name, config, t), res in tight.results.items():
            results[(name, named(config), tiers[t])] = res
        # the best P99 a lone replica reached in the search at the tightened SLO (which walks
        # down to the lowest rate when it fails): what an infeasibility is explained with
        probes.update({(k[0], named(k[1]), *k[2:]): v for k, v in tight.problem.probes.items()})


def tighten(scenario: Scenario, m: Margins, configs_of: Mapping[str, set[str]]) -> Scenario:
    """A verification scenario whose classes must meet their SLO divided by the largest factor
    of the configurations carrying them (``configs_of``: class name -> configurations)."""
    out = scenario
    for c in scenario.classes:
        f = m.factor(configs_of.get(c.name, ()))
        if f > 1.0:
            out = scale_slos(out, 1.0 / f, [c.name])
    return out


def check_confidence(confidence: float | None) -> None:
    if confidence is not None and not 0.0 < confidence < 1.0:
        raise InputError(f"--confidence {confidence:g}: expected a probability in (0, 1), e.g. "
                         "0.95")


def shown_probability(p: float | None) -> str:
    """A chance as the table and the report print it: three decimals, rounded down, so that a
    0.972 reads 0.972 and a 0.9992 reads 0.999, never a certainty (1.0) it does not have;
    ``-`` for none."""
    if p is None or not math.isfinite(p):
        return "-"
    p = min(max(p, 0.0), 1.0)
    shown = math.floor(p * 1000 + 1e-9) / 1000  # 1e-9: 0.57 * 1000 is 569.999...
    return f"{min(shown, 0.999) if p < 1.0 else shown:.3f}"


def hold_confidence(checks: Sequence[Any], scenario: Scenario, m: Margins,
                    configs_of: Mapping[str, set[str]]) -> list[Any]:
    """``checks`` (:class:`fleetplan.optimize.verify.HourCheck`) with every class whose
    ``slo_met_probability`` (its simulated P99 TTFT, the errors of the configurations carrying
    it) is below ``m.confidence`` marked as not met: ``--confidence P`` promises ``P``."""
    slo = {c.name: c.slo.ttft_p99_ms if c.slo is not None else None for c in scenario.classes}
    def held(classes: Sequence[Any]) -> tuple[Any, ...]:
        out = []
        for c in classes:
            p = m.met_probability(slo.get(c.name), c.ttft_p99_ms, configs_of.get(c.name, ()))
            out.append(replace(c, met=False) if p is not None and p < m.confidence - 1e-9
                       else c)
        return tuple(out)

    # each pool's own verdicts too (the closed loop blames and vouches for pools on them)
    return [replace(chk, classes=held(chk.classes),
                    pools=tuple(replace(pc, classes=held(pc.classes)) for pc in chk.pools))
            for chk in checks]

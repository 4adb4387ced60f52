#!/usr/bin/env python3
"""Today's uncalibrated prediction against the external benchmark fixtures (``data/external``).

For each row whose model and GPU fleetplan can resolve, replay the row's load on the replica
model as the product does today (``fleetplan.replica.predict.resolve_params`` + ``replay``;
nothing fitted to these rows) and compare with what the source measured. Prints, per dataset
(source) and per server within it: runs predicted / refused (each refusal one line with its
reason), median |error| of throughput, TTFT p50, TPOT p50 and ITL p50, and how many measured
values fall inside the 80% band of ``fleetplan.validate.bands.prediction_bands``.

Usage::

    FLEETPLAN_CACHE_DIR=/tmp/cache .venv/bin/python scripts/eval_external.py \
        [--source SLUG ...] [--engine-args] [--json OUT.json] [--quiet]

How a row is replayed (each rule is the row's own figures, never a fit):

- model: ``data/models.csv`` by Hugging Face id, else a ``config.json`` of that exact checkpoint
  (``data/external/configs/<org>--<name>/config.json``, or the test fixtures under
  ``tests/data/hf-configs`` listed with their hub id in that folder's README), via
  ``ModelSpec.from_hf_config``; else refused ("no config.json"). What the reader does not
  model it refuses itself, one line each (e.g. ``layer_types`` with Qwen3.5/3.6's
  linear-attention layers).
- GPU: the bundled catalog (its RTX 3090 row came from here: the 4 x RTX 3090 rig's GPU).
- server: ``pp`` stages of ``tp`` GPUs, ``dp`` replicas behind the endpoint (stated, or the GPUs
  beyond ``tp x pp``: instances behind one load balancer), ``nodes`` over the row's
  ``interconnect`` (``server_config``; ``fleetplan.replica.split_replay`` spreads the load).
- load: ``concurrency`` N = all requests sent at once, at most N in flight (``max_concurrency``);
  ``poisson`` R = Poisson arrivals at R req/s; ``burst`` = all at once, no cap.
- prompts: the row's ``num_prompts``; where the source does not say, 4 x the concurrency (at
  least 8) and the output says so (``num_prompts assumed``). A campaign whose harness runs each
  concurrency point for a stated time (:data:`TIMED_POINTS`) sends the requests a closed loop
  of N starts within that time: N a wave, as many waves as one wave's replayed duration fits
  in it, at least one (:func:`timed_prompts`; the output says ``N per wave x W``).
- lengths: where the source's raw copy lists every request's prompt and reply tokens
  (``data/external/raw/<source>.json``), those, in send order (:func:`recorded_lengths`);
  otherwise fixed-length synthetic workloads send every request with the row's prompt length
  (``input_tokens_mean``) and output length (``output_tokens_mean``, else
  ``output_tokens_requested``); ShareGPT runs draw lengths from the product's protocol model at
  the row's means, conditioned on its token totals (3 seeds), as ``validate`` replays a
  benchmark file. A row without a prompt length takes the target its source states for its
  prompts (``dataset`` "... target N tokens": ``gpu-conc``'s generator aims at ~750 words,
  1000 tokens) and the output says so (``prompt length assumed``); a row with neither is
  refused. Prefix cache warm only where the row says ``warm``.
- engine version: the row's ``engine_version`` picks vLLM's defaults of that release
  (``fleetplan.replica.engine_defaults``: budget, sequences, memory share, and the scheduling
  policy, V0's whole prompts first before 0.8, ``ReplicaParams.chunked_prefill``); a burst on a
  release whose server takes requests in one at a time (0.5.x) reaches the scheduler once taken
  in (``replay(serial_intake=True)``, ``fleetplan.replica.protocol.intake_release``).
- engine settings: without ``--engine-args`` the version's defaults whatever the server ran;
  with it the row's ``max_num_seqs`` / ``max_num_batched_tokens`` / ``max_model_len``
  replace them (``ReplicaParams.with_``; on a V0 release a stated context also sets the budget
  and the policy, ``fleetplan.replica.server_params.v0_budget``). The row's ``kv_cache_dtype``
  is always applied (``fleetplan.replica.server_params.apply_stated``: KV capacity and
  attention read cost).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXT = ROOT / "data" / "external"
HF_FIXTURES = ROOT / "tests" / "data" / "hf-configs"

# Hugging Face renamed the neuralmagic organisation to RedHatAI; the repositories (and their
# config.json) are the same, so a run naming one may use the other's config.
ORG_ALIASES = {"RedHatAI": "neuralmagic"}
# dataset prefix -> seconds each concurrency point runs. The 4 x RTX 3090 tp-ab-p2p records
# state it ("aggregate = concurrency ladder 1/4/16/32/64, 20 s per point, stops when the gain
# drops under 3%") and that it "reproduces the 2026-06-28 orchestrator sweep within 1.5% on
# wall rate": the orchestrator campaign's harness (data/external/README.md)
TIMED_POINTS = {"tp-ab-p2p:aggregate": 20.0, "orchestrator:aggregate": 20.0}

METRICS = (  # (label, measured field, predicted metric, band metric or None)
    ("throughput", None, None, None),  # output tok/s where stated, else req/s (see _throughput)
    ("TTFT p50", "ttft_p50_ms", "ttft_p50_ms", "ttft_p50_ms"),
    ("TTFT p99", "ttft_p99_ms", "ttft_p99_ms", "ttft_p99_ms"),
    ("TPOT p50", "tpot_p50_ms", "tpot_p50_ms", "tpot_p50_ms"),
    ("ITL p50", "itl_p50_ms", "itl_p50_ms", None),
)


@dataclass
class Outcome:
    run: Any
    refused: str | None = None
    errors: dict[str, float] = field(default_factory=dict)   # label -> pred / meas - 1
    inside: dict[str, bool] = field(default_factory=dict)    # label -> measured inside band
    notes: list[str] = field(default_factory=list)
    config: str | None = None  # fleetplan's name of the row's server (server_config)


def _hf_fixture_ids() -> dict[str, Path]:
    """hub id -> config folder, from the table of ``tests/data/hf-configs/README.md``."""
    out: dict[str, Path] = {}
    readme = HF_FIXTURES / "README.md"
    if not readme.is_file():
        return out
    for line in readme.read_text(encoding="utf-8").splitlines():
        m = re.match(r"\|\s*`([^`]+)`\s*\|\s*([\w.\-]+/[\w.\-]+)\s*\|", line)
        if m and (HF_FIXTURES / m.group(1) / "config.json").is_file():
            out[m.group(2)] = HF_FIXTURES / m.group(1)
    return out


def _without_folder(exc: Exception) -> str:
    """The reader's one line without the folder of the file it names: the run already names
    the model (``config.json: field ...``, ``hf_quant_config.json: field ...``)."""
    return re.sub(r"^\S*/(?=[^/\s]+\.json: )", "", str(exc))


class Resolver:
    """Model specs and GPU names the replica model can use, with one-line refusals."""

    def __init__(self) -> None:
        from fleetplan.catalog.catalog import bundled_catalog

        self.catalog = bundled_catalog()
        self.by_hf = {m.hf_id: name for name, m in self.catalog.models().items()}
        self.configs = _hf_fixture_ids()
        for cfg in sorted((EXT / "configs").glob("*/config.json")):
            org, _, name = cfg.parent.name.partition("--")
            self.configs[f"{org}/{name}"] = cfg.parent
        self._specs: dict[str, Any] = {}

    def model(self, hf_id: str | None) -> tuple[Any, str | None]:
        from fleetplan.catalog.models import ModelSpec
        from fleetplan.errors import FleetplanError

        if not hf_id:
            return None, "the source names no Hugging Face checkpoint"
        if hf_id in self.by_hf:
            return self.by_hf[hf_id], None
        org, _, name = hf_id.partition("/")
        folder = self.configs.get(hf_id) or self.configs.get(f"{ORG_ALIASES.get(org, org)}/{name}")
        if folder is None:  # last, the product's bundled library (data/model_configs)
            from fleetplan.catalog.model_library import library_spec

            try:
                spec = library_spec(hf_id)
            except FleetplanError as exc:
                return None, f"model {hf_id}: {_without_folder(exc)}"
            if spec is not None:
                return spec, None
            return None, (f"model {hf_id}: not in data/models.csv or data/model_configs and "
                          "no config.json here")
        if hf_id not in self._specs:
            try:
                self._specs[hf_id] = ModelSpec.from_hf_config(folder, name=name)
            except FleetplanError as exc:
                self._specs[hf_id] = _without_folder(exc)
        spec = self._specs[hf_id]
        return (None, f"model {hf_id}: {spec}") if isinstance(spec, str) else (spec, None)

    def spec_of(self, model: Any) -> Any:
        """The ``ModelSpec`` of what :meth:`model` returned: a catalog name, or a spec read
        from a ``config.json``."""
        return self.catalog.model(model) if isinstance(model, str) else model


_RAW: dict[str, dict[tuple[str, str], tuple[list[int], list[int]]]] = {}


def recorded_lengths(run: Any) -> tuple[list[int], list[int]] | None:
    """The (prompt, reply) tokens of each of ``run``'s requests in send order, where the
    source's raw copy lists them (``data/external/raw/<source>.json``: a file entry with
    ``input_lens`` and ``output_lens``, matched by path and commit), else None. A reply of 0
    tokens (a request that streamed none, which vLLM 0.5.4's client counts as completed) is
    replayed as 1: the server computed its prompt and ended it at its first token."""
    if run.source not in _RAW:
        table: dict[tuple[str, str], tuple[list[int], list[int]]] = {}
        raw = EXT / "raw" / f"{run.source}.json"
        if raw.is_file():
            for f in json.loads(raw.read_text(encoding="utf-8")).get("files", []):
                ins, outs = f.get("input_lens"), f.get("output_lens")
                if ins and outs and len(ins) == len(outs):
                    table[(f["path"], f["commit"])] = ([int(x) for x in ins],
                                                       [max(1, int(x)) for x in outs])
        _RAW[run.source] = table
    got = _RAW[run.source].get((run.source_file, run.commit))
    return got if got is not None and len(got[0]) == run.num_prompts else None


def _throughput(run: Any, pred: Any) -> tuple[float | None, float | None, str]:
    if run.output_tok_s is not None:
        return run.output_tok_s, pred["output_throughput"], "output tok/s"
    if run.completed_rps is not None:
        return run.completed_rps, pred["request_throughput"], "req/s"
    return None, None, ""


def _kv_dtype(run: Any) -> str:
    """The run's ``--kv-cache-dtype`` as vLLM spells it (``auto (BF16)``: ``auto``)."""
    kv = (run.kv_cache_dtype or "auto").lower().split(" ")[0]
    return {"bf16": "bfloat16", "fp16": "float16"}.get(kv, kv)


def server_config(run: Any, res: Resolver) -> tuple[str | None, str | None]:
    """The row's configuration name and None, or None and why it cannot be named: ``pp``
    stages of ``tp`` GPUs, ``dp`` replicas behind the endpoint (stated, or the GPUs beyond
    ``tp x pp``: instances behind one load balancer), ``nodes`` joined by the row's
    ``interconnect`` (``fleetplan.catalog.hardware``: ``4xRTX-3090+tp1dp4``)."""
    from fleetplan.catalog.hardware import HardwareConfig
    from fleetplan.errors import FleetplanError

    pp, nodes = run.pp or 1, run.nodes or 1
    tp = run.tp or run.gpu_count // (pp * (run.dp or 1))
    dp = run.dp or run.gpu_count // (tp * pp)
    if tp * pp * dp != run.gpu_count:
        return None, (f"{run.gpu_count} GPUs are not tp={tp} x pp={pp} x dp={dp}: the layout "
                      "of the other GPUs is not stated")
    fields: dict[str, Any] = {"gpu": run.gpu, "gpu_count": run.gpu_count, "tp_size": tp,
                              "pp_size": pp, "dp": dp, "nodes": nodes}
    if nodes > 1 and run.interconnect:
        fields["interconnect"] = run.interconnect
    try:
        return HardwareConfig.model_validate(fields, context={"catalog": res.catalog}).name, None
    except (FleetplanError, ValueError) as exc:
        return None, " ".join(str(exc).split())[:200]


_TARGET = re.compile(r"target (\d+) tokens")


def prompt_tokens(run: Any) -> tuple[float | None, bool]:
    """The row's mean prompt length, else the target its source states for its prompts (the
    second value: whether it is that stated target rather than a measured length)."""
    if run.input_tokens_mean is not None:
        return float(run.input_tokens_mean), False
    m = _TARGET.search(run.dataset or "")
    return (float(m.group(1)), True) if m else (None, False)


def refusal(run: Any, res: Resolver) -> str | None:
    """Why today's model cannot replay ``run`` (None: it can)."""
    from fleetplan.profiles.server import KV_CACHE_DTYPE_BYTES

    if run.engine != "vllm":
        return f"engine {run.engine}: only vLLM is modeled"
    if _kv_dtype(run) not in KV_CACHE_DTYPE_BYTES:
        return (f"kv_cache_dtype {run.kv_cache_dtype}: not one of "
                f"{', '.join(KV_CACHE_DTYPE_BYTES)}")
    if not res.catalog.knows_gpu(run.gpu):
        return f"GPU {run.gpu}: not in the catalog"
    config, why = server_config(run, res)
    if config is None:
        return why
    if prompt_tokens(run)[0] is None:
        return "prompt length not recorded"
    if run.output_tokens is None:
        return "output length not recorded"
    return None


def timed_point(run: Any) -> float | None:
    """Seconds a concurrency point of ``run``'s campaign runs (:data:`TIMED_POINTS`), if stated
    and the row does not give its request count."""
    if run.num_prompts is not None or run.load_kind != "concurrency":
        return None
    return next((t for k, t in TIMED_POINTS.items() if (run.dataset or "").startswith(k)), None)


def timed_prompts(cap: int, seconds: float, wave_s: float) -> tuple[int, int]:
    """(requests, waves) a closed loop of ``cap`` in flight starts within ``seconds`` when a
    wave of ``cap`` requests sent at once lasts ``wave_s``: the waves that start in time, at
    least one (the harness waits for the requests in flight)."""
    waves = max(1, math.ceil(seconds / wave_s)) if wave_s > 0 else 1
    return cap * waves, waves


def predict_row(run: Any, res: Resolver, *, engine_args: bool) -> Outcome:
    from fleetplan.context import DataContext
    from fleetplan.errors import FleetplanError
    from fleetplan.replica.predict import resolve_params
    from fleetplan.replica.protocol import replay
    from fleetplan.validate.bands import prediction_bands
    from fleetplan.workload.lengths import protocol_length_model

    why = refusal(run, res)
    spec, model_why = (None, None) if why else res.model(run.model)
    why = why or model_why
    if why:
        return Outcome(run, refused=why)
    config, _why = server_config(run, res)
    assert config is not None
    out = Outcome(run, config=config)
    ctx = DataContext(catalog=res.catalog)
    try:
        params = resolve_params(spec, config, context=ctx, engine_version=run.engine_version)
    except FleetplanError as exc:
        return Outcome(run, refused=str(exc).splitlines()[0])
    if params.calibrated:
        out.notes.append("calibrated pair (bundled calibration)")
    if _kv_dtype(run) != "auto":
        from fleetplan.replica.server_params import apply_stated

        cat = res.catalog if isinstance(spec, str) else res.catalog.extend(models=[spec])
        try:
            params = apply_stated(params, {"kv_cache_dtype": _kv_dtype(run)}, catalog=cat,
                                  engine_version=run.engine_version)
        except FleetplanError as exc:
            return Outcome(run, refused=str(exc).splitlines()[0])
    if engine_args:
        from fleetplan.replica.server_params import v0_budget

        changes = {k: getattr(run, k) for k in ("max_num_seqs", "max_num_batched_tokens",
                                                "max_model_len") if getattr(run, k) is not None}
        policy = v0_budget(run.engine_version, changes, res.spec_of(spec), run.gpu)
        if policy is not None:  # a V0 server: its budget and policy follow the served context
            changes["max_num_batched_tokens"], changes["chunked_prefill"] = policy
        params = params.with_(**changes)
    if run.load_kind == "poisson":
        rate, cap = float(run.load_value), None
    else:
        rate = math.inf
        cap = None if run.load_kind == "burst" else int(run.load_value)
    n = run.num_prompts
    if n is None:
        n = max(4 * (cap or 1), 8) if cap != 1 or run.load_kind != "concurrency" else 8
        out.notes.append("num_prompts assumed")
    mean_in, assumed = prompt_tokens(run)
    assert mean_in is not None  # refusal() let the row through
    if assumed:
        out.notes.append("prompt length assumed: the source's stated target")
    lin = min(int(round(mean_in)), params.max_model_len - 2)
    lout = max(1, int(round(run.output_tokens)))
    recorded = recorded_lengths(run) if run.num_prompts is not None else None
    if recorded is not None:  # every request as the source recorded it, in send order
        how: dict[str, Any] = {"request_lengths": recorded, "seeds": (0,)}
        out.notes.append("per-request lengths as recorded")
    elif "sharegpt" in (run.dataset or "").lower():
        # ShareGPT prompts: the product's protocol length model (the study's ShareGPT fit) at
        # the run's mean lengths, each seed conditioned on the run's token totals, as
        # `validate` replays a benchmark file
        how = {
            "lengths": protocol_length_model(mean_input=mean_in,
                                             mean_output=run.output_tokens),
            "totals": (int(round(mean_in * n)), int(round(run.output_tokens * n))),
            "seeds": (0, 1, 2)}
        out.notes.append("ShareGPT lengths drawn (protocol model) on the run's totals")
    else:  # fixed-length synthetic prompts: every request as recorded
        how = {"request_lengths": ([lin] * n, [lout] * n), "seeds": (0,)}
    from fleetplan.replica.engine_defaults import intake_is_serial

    seconds = timed_point(run)
    try:
        if seconds is not None and cap and cap > 1 and "lengths" not in how:
            # one wave of N replayed first (timed_point: the row states no request count, so
            # none were recorded): how many waves start within the point's time
            wave = replay(params, rate=rate, num_prompts=cap, max_concurrency=cap,
                          warm_prefix_cache=run.prefix_cache == "warm",
                          request_lengths=([lin] * cap, [lout] * cap), seeds=(0,))
            n, waves = timed_prompts(cap, seconds, wave["duration_s"])
            how = {"request_lengths": ([lin] * n, [lout] * n), "seeds": (0,)}
            out.notes.append(f"{cap} per wave x {waves} (the campaign's {seconds:g} s per point)")
        pred = replay(params, rate=rate, num_prompts=n, max_concurrency=cap,
                      warm_prefix_cache=run.prefix_cache == "warm",
                      serial_intake=cap is None and intake_is_serial(run.engine_version),
                      **how)
    except FleetplanError as exc:
        return Outcome(run, refused=str(exc).splitlines()[0])
    meas_t, pred_t, _unit = _throughput(run, pred)
    values = {"throughput": (meas_t, pred_t,
                             "output_throughput" if run.output_tok_s is not None
                             else "request_throughput")}
    for label, mfield, pmetric, band in METRICS[1:]:
        values[label] = (getattr(run, mfield), pred[pmetric], band)
    if n == 1 and run.e2e_p50_ms is not None:  # one request: its latency is the run's duration
        values["E2E p50"] = (run.e2e_p50_ms, pred["duration_s"] * 1000.0, None)
    bands = {} if params.calibrated else prediction_bands(
        run.gpu, {b: p for (_m, p, b) in values.values() if b and p is not None},
        moe=params.is_moe, mla=res.spec_of(spec).is_mla)
    for label, (meas, p, band) in values.items():
        if meas is None or p is None or not meas > 0 or not math.isfinite(p):
            continue
        out.errors[label] = p / meas - 1.0
        if band and f"{band}_band" in bands:
            lo, hi = bands[f"{band}_band"]
            out.inside[label] = lo <= meas <= hi
    return out


def _median_abs(xs: Iterable[float]) -> str:
    v = [abs(x) for x in xs]
    return f"{100 * statistics.median(v):5.0f}% (n={len(v)})" if v else "-"


def _signed_range(xs: Iterable[float]) -> str:
    v = sorted(xs)
    return f"{100 * v[0]:+.0f}..{100 * v[-1]:+.0f}%" if v else ""


def summarize(outcomes: list[Outcome], title: str) -> list[str]:
    done = [o for o in outcomes if o.refused is None]
    cal = sum(1 for o in done if "calibrated pair (bundled calibration)" in o.notes)
    assumed = sum(1 for o in done if "num_prompts assumed" in o.notes)
    lines = [f"{title}: {len(done)} of {len(outcomes)} runs predicted, "
             f"{len(outcomes) - len(done)} refused"
             + (f"; {cal} from the bundled calibration" if cal else "")
             + (f"; {assumed} with num_prompts assumed" if assumed else "")]
    labels = ["throughput", "TTFT p50", "TTFT p99", "TPOT p50", "ITL p50", "E2E p50"]
    for label in labels:
        errs = [o.errors[label] for o in done if label in o.errors]
        if not errs:
            continue
        ins = [o.inside[label] for o in done if label in o.inside]
        band = (f"; 80% band holds {sum(ins)}/{len(ins)} ({100 * sum(ins) / len(ins):.0f}%)"
                if ins else "")
        lines.append(f"  {label:10s} median |error| {_median_abs(errs)}  "
                     f"[{_signed_range(errs)}]{band}")
    return lines


def main(argv: list[str] | None = None) -> int:
    from fleetplan.profiles.external import load_external_runs

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", nargs="*", default=None, help="only these source slugs")
    ap.add_argument("--engine-args", action="store_true",
                    help="replay with the row's max_num_seqs / max_num_batched_tokens")
    ap.add_argument("--json", type=Path, default=None, help="write per-row outcomes here")
    ap.add_argument("--quiet", action="store_true", help="no per-refusal lines")
    args = ap.parse_args(argv)
    loaded = load_external_runs()
    for e in loaded.errors:
        print(f"refused row: {e}", file=sys.stderr)
    res = Resolver()
    report: list[dict[str, Any]] = []
    for source, runs in sorted(loaded.by_source().items()):
        if args.source and source not in args.source:
            continue
        outcomes = [predict_row(r, res, engine_args=args.engine_args) for r in runs]
        print("\n".join(summarize(outcomes, f"== {source}")))
        servers: dict[str, list[Outcome]] = {}
        for o in outcomes:
            if o.refused is None:
                servers.setdefault(f"{o.run.model} on {o.config}", []).append(o)
        for name, outs in sorted(servers.items()):
            print("\n".join("  " + ln for ln in summarize(outs, name)))
        reasons: dict[str, int] = {}
        for o in outcomes:
            if o.refused:
                reasons[o.refused] = reasons.get(o.refused, 0) + 1
        if not args.quiet:
            for why, k in sorted(reasons.items(), key=lambda x: (-x[1], x[0])):
                print(f"  refused x{k}: {why}")
        for o in outcomes:
            report.append({"source": source, "run_id": o.run.run_id, "model": o.run.model,
                           "config": o.config or o.run.config, "load_kind": o.run.load_kind,
                           "load_value": o.run.load_value, "refused": o.refused,
                           "errors": o.errors, "inside_band": o.inside, "notes": o.notes})
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n",
                             encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""``fleetplan predict``: replay vLLM's benchmark (or a sustained load) on the replica model."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import typer

from fleetplan.cli._format import OutputFormat, emit_csv, emit_json, emit_table
from fleetplan.cli._options import (
    CALIBRATION_DEFAULT,
    CATALOG_HELP,
    MODEL_CONFIG_HELP,
    PROGRESS_HELP,
    QUIET_HELP,
    model_name,
    note_user_files,
    progress_reporter,
    use_cli_context,
)
from fleetplan.errors import InputError
from fleetplan.profiles.record import BenchmarkRun
from fleetplan.replica.params import ReplicaParams
from fleetplan.replica.predict import resolve_params
from fleetplan.replica.protocol import METRICS, replay
from fleetplan.replica.steady import (
    STEADY_DURATION_S,
    arrival_span_s,
    check_prefix_cache_hit,
    steady_state,
)
from fleetplan.validate.own_runs import OwnRuns

BURST_NOTE = (
    "the rate is a burst of num_prompts requests that the server then drains, not "
    "sustained load; use --steady for the sustained behaviour used in planning. The bundled "
    "runs after the first of each series found their prompts in vLLM's prefix cache: "
    "--arrival-seed 42 --warm-prefix-cache replays them as measured"
)


MAX_BURST_PROMPTS = 100_000  # a burst is replayed request by request (100,000: ~20 s a seed)


def predict(
    model: str | None = typer.Option(
        None, "--model", "-m", help="Model name, e.g. DeepSeek-R1-Distill-Qwen-14B (default: "
        "the model of --model-config)."
    ),
    config: str = typer.Option(
        ..., "--config", "-c", help="Hardware configuration, e.g. 2xRTX-4090."
    ),
    rate: float = typer.Option(..., "--rate", "-r", help="Request rate, req/s (inf: all at once)."),
    num_prompts: int | None = typer.Option(
        None, "--num-prompts", min=1, help=f"Requests in the burst (default 200, at most "
        f"{MAX_BURST_PROMPTS:,})."),
    burstiness: float = typer.Option(
        1.0, "--burstiness", help="Gamma shape of the gaps (1.0 = Poisson)."
    ),
    max_concurrency: int | None = typer.Option(
        None, "--max-concurrency", min=1, help="Client-side cap on requests in flight."
    ),
    seeds: int | None = typer.Option(None, "--seeds", min=1, max=100,
                                     help="Length seeds to average over (default 5)."),
    arrival_seed: int | None = typer.Option(
        None, "--arrival-seed", min=0, max=2**32 - 1,
        help="Reproduce the send times of vLLM's benchmark with --seed N (bundled runs: 42; "
        "0 to 2**32-1, numpy's legacy generator as vLLM seeds it).",
    ),
    warm_prefix_cache: bool = typer.Option(
        False, "--warm-prefix-cache",
        help="Prompts are already in vLLM's prefix cache (a repeated run of the same prompts).",
    ),
    steady: bool = typer.Option(
        False, "--steady", help=f"Sustained load ({STEADY_DURATION_S} s) instead of a burst."
    ),
    prefix_cache_hit: float | None = typer.Option(
        None, "--prefix-cache-hit",
        help="With --steady: the share (0-1) of each prompt already in vLLM's prefix cache, an "
        "assumption you state (default 0: fresh prompts; 1: the benchmark's repeated prompts).",
    ),
    calibration: Path | None = typer.Option(
        None, "--calibration", help=f"Calibration file ({CALIBRATION_DEFAULT})."
    ),
    model_config: list[Path] | None = typer.Option(
        None, "--model-config", help=MODEL_CONFIG_HELP),
    catalog: list[Path] | None = typer.Option(None, "--catalog", help=CATALOG_HELP),
    engine_version: str | None = typer.Option(
        None, "--engine-version", help="vLLM version the server runs (e.g. 0.6.3, 0.8.5, "
        "0.10.1): an uncalibrated prediction uses its engine defaults (max_num_batched_tokens, "
        "max_num_seqs, chunked prefill; docs/engine-defaults.md). Default: 0.8.5, the study's "
        "(by device memory: 8192 tokens and 1024 sequences at >= 70 GiB, else 2048 and 256)."),
    efficiency: str = typer.Option(
        "auto", "--efficiency", help="How an uncalibrated pair's step costs are learned: "
        "ratios (per-coefficient efficiency ratios of calibrated configurations), transfer "
        "(per-GPU-type efficiencies of the bandwidth-, compute- and interconnect-bound parts, "
        "fitted across models; docs/catalogs.md) or auto (the default: the path whose held-out "
        "errors were no worse on every metric for the GPU type, the one the bands measure; "
        "docs/spec-path-validation.md)."),
    fmt: OutputFormat = typer.Option(
        OutputFormat.table, "--format", help="table, csv (the table's rows: metric, mean, std; "
        "--steady: metric, value) or json."),
    progress: bool = typer.Option(False, "--progress", help=PROGRESS_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP),
) -> None:
    """Predict what vLLM's benchmark would measure for MODEL on CONFIG at RATE.

    Example: fleetplan predict --model DeepSeek-R1-Distill-Qwen-14B --config 1xH100-PCIe --rate 16

    An uncalibrated pair (calibrated: false) is predicted from the model's spec and the GPU's
    datasheet; its ttft_p99_ms_band (and the other *_band fields) give the range the measured
    value fell in for 80% of held-out runs of the bundled store (docs/spec-path-validation.md).
    A calibrated pair's own_runs (the caption's "its own runs") give the fit's worst error on
    the runs it was fitted to and the runs it flagged and did not fit, each with its replayed
    token gap against the measured one (itl_p50_error_pct: a fit made from high-rate runs can
    be slow at light load, docs/replica-model.md; docs/validation.md).

    A burst the profile store measured (this model, configuration, rate, number of prompts,
    burstiness and concurrency cap) is shown beside the prediction: one "measured" column per
    run in the table, and measured_runs in the JSON.
    """
    if not burstiness > 0:
        raise InputError(f"--burstiness {burstiness!r} must be > 0")
    if steady:
        from fleetplan.workload.arrivals import MAX_ARRIVALS

        span = arrival_span_s(STEADY_DURATION_S)
        top = MAX_ARRIVALS / span
        if rate > top:
            raise InputError(f"--rate {rate:g}: a sustained load is simulated request by "
                             f"request; at most {int(top):,} req/s with --steady ({MAX_ARRIVALS:,} "
                             f"arrivals in its {span:g} s)")
        burst_only = [name for name, given in (
            ("--num-prompts", num_prompts is not None), ("--seeds", seeds is not None),
            ("--arrival-seed", arrival_seed is not None),
            ("--max-concurrency", max_concurrency is not None),
            ("--warm-prefix-cache", warm_prefix_cache)) if given]
        if burst_only:
            raise InputError(f"{burst_only[0]} applies to a burst replay, not to --steady"
                             + (" (use --prefix-cache-hit 1)" if burst_only[0]
                                == "--warm-prefix-cache" else ""))
    elif num_prompts is not None and num_prompts > MAX_BURST_PROMPTS:
        raise InputError(f"--num-prompts {num_prompts}: at most {MAX_BURST_PROMPTS:,} requests "
                         "in a burst (it is replayed request by request)")
    if prefix_cache_hit is not None:
        check_prefix_cache_hit(prefix_cache_hit, "--prefix-cache-hit")
        if not steady:
            raise InputError("--prefix-cache-hit applies to --steady; a burst replay takes "
                             "--warm-prefix-cache (the whole prompt cached)")
    if engine_version is not None:
        from fleetplan.replica.engine_defaults import engine_defaults

        engine_defaults(engine_version)  # an unknown version is an error here, not a note
    ctx = use_cli_context(catalog=catalog, model_config=model_config, calibration=calibration)
    name = model_name(model, ctx)
    note_user_files(calibration=calibration is None)
    params = resolve_params(name, config, calibration=calibration,
                            engine_version=engine_version, efficiency=efficiency)
    head: dict[str, object] = {
        "model": params.model,
        "config": params.config,
        "calibrated": params.calibrated,
        "params_source": params.source,
    }
    own = _own_runs(params, calibration)
    if own is not None:
        head["own_runs"] = own.to_dict()
    own_line = f"\n{own.caption()}" if own is not None else ""
    if steady:
        with progress_reporter(quiet, progress) as reporter:
            sres = steady_state(params, rate=rate, burstiness=burstiness,
                                prefix_cache_hit=prefix_cache_hit or 0.0, progress=reporter)
        out = {**head, "mode": "steady", **sres.to_dict()}
        bands = _bands(params, {k: v for k, v in sres.to_dict().items()
                                if isinstance(v, int | float)})
        out.update(bands)
        if fmt is OutputFormat.json:
            emit_json(out)
            return
        df = pd.DataFrame(
            [
                {"metric": k, "value": v,
                 **({"band_80pct": _fmt_band(bands.get(f"{k}_band"))} if bands else {})}
                for k, v in sres.to_dict().items()
                if k not in ("model", "config")
            ]
        )
        if fmt is OutputFormat.csv:
            emit_csv(df)
            return
        emit_table(
            df,
            title=f"{params.model} on {params.config}: sustained {rate:g} req/s",
            caption=f"calibrated: {str(params.calibrated).lower()} ({params.source})"
            + own_line + (f"\nband_80pct: {bands['band_basis']}" if bands else ""),
        )
        return
    res = replay(
        params,
        rate=rate,
        num_prompts=200 if num_prompts is None else num_prompts,
        burstiness=burstiness,
        max_concurrency=max_concurrency,
        seeds=tuple(range(5 if seeds is None else seeds)),
        arrival_seed=arrival_seed,
        warm_prefix_cache=warm_prefix_cache,
    )
    bands = _bands(params, {k: res.metrics[k].mean for k in METRICS})
    measured = _measured_runs(params.model, params.config, rate, res.num_prompts, burstiness,
                              max_concurrency)
    if fmt is OutputFormat.json:
        emit_json({**head, "mode": "burst", **res.to_dict(), **bands, "note": BURST_NOTE,
                   **({"measured_runs": [_measured_dict(r) for r in measured]}
                      if measured else {})})
        return
    heads = (["measured"] if len(measured) == 1
             else [f"measured {i + 1}" for i in range(len(measured))])
    df = pd.DataFrame(
        [{"metric": k, "mean": res.metrics[k].mean, "std": res.metrics[k].std,
          **({"band_80pct": _fmt_band(bands.get(f"{k}_band"))} if bands else {})}
         for k in METRICS]
    )
    if fmt is OutputFormat.csv:
        emit_csv(df)
        return
    for h, r in zip(heads, measured, strict=True):  # the table's, beside the prediction
        df[h] = [getattr(r, k, None) for k in METRICS]
    emit_table(
        df,
        title=f"{params.model} on {params.config}: {res.num_prompts} prompts at {rate:g} req/s",
        caption=f"calibrated: {str(params.calibrated).lower()} ({params.source})"
        + own_line + "\n" + (f"band_80pct: {bands['band_basis']}\n" if bands else "")
        + f"mean and spread over {len(res.seeds)} length seeds; {BURST_NOTE}"
        + (f"\n{', '.join(heads)}: the store's run{'s' * (len(measured) > 1)} of this model "
           f"and configuration at {rate:g} req/s, {res.num_prompts} prompts, burstiness "
           f"{burstiness:g}: " + ", ".join(f"{r.run_id} ({r.date or 'no date'})" for r in measured)
           if measured else ""),
    )


def _measured_runs(model: str, config: str, rate: float, num_prompts: int, burstiness: float,
                   max_concurrency: int | None) -> list[BenchmarkRun]:
    """The profile store's runs of exactly this burst (model, configuration, rate, prompts,
    burstiness, concurrency cap), oldest first: what the prediction can be read beside."""
    from fleetplan.profiles.store import load_profiles

    out = [r for r in load_profiles().runs()
           if r.model == model and r.config == config and r.request_rate == rate
           and r.num_prompts == num_prompts and r.burstiness == burstiness
           and (r.max_concurrency or None) == max_concurrency]
    return sorted(out, key=lambda r: (r.date or "", r.run_id))


def _measured_dict(run: BenchmarkRun) -> dict[str, object]:
    """A measured run beside the prediction (``measured_runs`` of the JSON): its id, where it
    comes from and the predicted metrics it has."""
    return {"run_id": run.run_id, "source_file": run.source_file, "date": run.date,
            **{k: getattr(run, k) for k in METRICS if getattr(run, k, None) is not None}}


def _own_runs(params: ReplicaParams, calibration: Path | None) -> OwnRuns | None:
    """How a calibrated pair's fit reproduces its own runs (none for an uncalibrated one)."""
    if not params.calibrated:
        return None
    from fleetplan.replica.calibration_file import load_calibration_file
    from fleetplan.validate.own_runs import own_runs

    return own_runs(load_calibration_file(calibration).entry(params.model, params.config))


def _bands(params: ReplicaParams, metrics: dict[str, float]) -> dict[str, object]:
    """The ``*_band`` fields of an uncalibrated prediction (none when calibrated)."""
    if params.calibrated:
        return {}
    from fleetplan.catalog.hardware import HardwareConfig
    from fleetplan.validate.bands import prediction_bands

    return prediction_bands(HardwareConfig.parse(params.config).gpu, metrics)


def _fmt_band(band: object) -> str:
    if not isinstance(band, list):
        return ""
    return f"{band[0]:.4g} - {band[1]:.4g}"


def register(app: typer.Typer) -> None:
    app.command("predict")(predict)

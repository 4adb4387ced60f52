"""``fleetplan predict``: replay vLLM's benchmark (or a sustained load) on the replica model.

Parses the options into a :class:`~fleetplan.validate.prediction.PredictRequest` (which checks
them), calls :func:`~fleetplan.validate.prediction.run_prediction` and formats its
:class:`~fleetplan.validate.prediction.Prediction`."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

import pandas as pd
import typer

from fleetplan.cli._format import OutputFormat, emit_csv, emit_json, emit_table
from fleetplan.cli._options import (
    CalibrationOpt,
    CatalogOpt,
    ModelConfigOpt,
    ProgressOpt,
    QuietOpt,
    model_name,
    note_user_files,
    progress_reporter,
    use_cli_context,
)
from fleetplan.cli._server_options import (
    DpOpt,
    EngineArgOpt,
    GpuCountOpt,
    GpuOpt,
    InterconnectOpt,
    NodesOpt,
    PpOpt,
    TpOpt,
    server_description,
)
from fleetplan.replica.protocol import METRICS, ReplayResult
from fleetplan.replica.steady import STEADY_DURATION_S, SteadyResult
from fleetplan.validate.prediction import (
    BURST_NOTE,
    CLI_NAMES,
    MAX_ARRIVAL_SEED,
    MAX_BURST_PROMPTS,
    MAX_SEEDS,
    Prediction,
    PredictRequest,
    run_prediction,
)

ModelOpt = Annotated[str | None, typer.Option(
    "--model", "-m", help="Model name, e.g. DeepSeek-R1-Distill-Qwen-14B (default: the model "
    "of --model-config).")]
ConfigOpt = Annotated[str | None, typer.Option(
    "--config", "-c", help="Hardware configuration, e.g. 2xRTX-4090 (or --gpu and --gpu-count).")]
RateOpt = Annotated[float, typer.Option("--rate", "-r",
                                        help="Request rate, req/s (inf: all at once).")]
NumPromptsOpt = Annotated[int | None, typer.Option(
    "--num-prompts", min=1, help=f"Requests in the burst (default 200, at most "
    f"{MAX_BURST_PROMPTS:,}).")]
BurstinessOpt = Annotated[float, typer.Option("--burstiness",
                                              help="Gamma shape of the gaps (1.0 = Poisson).")]
MaxConcurrencyOpt = Annotated[int | None, typer.Option(
    "--max-concurrency", min=1, help="Client-side cap on requests in flight.")]
SeedsOpt = Annotated[int | None, typer.Option(
    "--seeds", min=1, max=MAX_SEEDS, help="Length seeds to average over (default 5).")]
ArrivalSeedOpt = Annotated[int | None, typer.Option(
    "--arrival-seed", min=0, max=MAX_ARRIVAL_SEED,
    help="Reproduce the send times of vLLM's benchmark with --seed N (bundled runs: 42; "
    "0 to 2**32-1, numpy's legacy generator as vLLM seeds it).")]
WarmOpt = Annotated[bool, typer.Option(
    "--warm-prefix-cache",
    help="Prompts are already in vLLM's prefix cache (a repeated run of the same prompts).")]
SteadyOpt = Annotated[bool, typer.Option(
    "--steady", help=f"Sustained load ({STEADY_DURATION_S} s) instead of a burst.")]
PrefixHitOpt = Annotated[float | None, typer.Option(
    "--prefix-cache-hit",
    help="With --steady: the share (0-1) of each prompt already in vLLM's prefix cache, an "
    "assumption you state (default 0: fresh prompts; 1: the benchmark's repeated prompts).")]
EngineVersionOpt = Annotated[str | None, typer.Option(
    "--engine-version", help="vLLM version the server runs (e.g. 0.6.3, 0.8.5, "
    "0.10.1): an uncalibrated prediction uses its engine defaults (max_num_batched_tokens, "
    "max_num_seqs, chunked prefill; and for a latent-attention model such as DeepSeek-V3, "
    "whether that release caches the latent and keeps chunked prefill and the prefix cache; "
    "docs/engine-defaults.md). Default: 0.8.5, the study's "
    "(by device memory: 8192 tokens and 1024 sequences at >= 70 GiB, else 2048 and 256).")]
EfficiencyOpt = Annotated[str, typer.Option(
    "--efficiency", help="How an uncalibrated pair's step costs are learned: "
    "ratios (per-coefficient efficiency ratios of calibrated configurations), transfer "
    "(per-GPU-type efficiencies of the bandwidth-, compute- and interconnect-bound parts, "
    "fitted across models; docs/catalogs.md) or auto (the default: the path whose held-out "
    "errors were no worse on every metric for the GPU type, the one the bands measure; "
    "docs/spec-path-validation.md).")]
FormatOpt = Annotated[OutputFormat, typer.Option(
    "--format", help="table, csv (the table's rows: metric, mean, std; "
    "--steady: metric, value) or json.")]


def predict(model: ModelOpt = None, *, config: ConfigOpt = None, rate: RateOpt,
            num_prompts: NumPromptsOpt = None, burstiness: BurstinessOpt = 1.0,
            max_concurrency: MaxConcurrencyOpt = None, seeds: SeedsOpt = None,
            arrival_seed: ArrivalSeedOpt = None, warm_prefix_cache: WarmOpt = False,
            steady: SteadyOpt = False, prefix_cache_hit: PrefixHitOpt = None,
            calibration: CalibrationOpt = None, model_config: ModelConfigOpt = None,
            catalog: CatalogOpt = None, engine_version: EngineVersionOpt = None,
            efficiency: EfficiencyOpt = "auto", fmt: FormatOpt = OutputFormat.table,
            progress: ProgressOpt = False, quiet: QuietOpt = False, gpu: GpuOpt = None,
            gpu_count: GpuCountOpt = None, tp: TpOpt = None, pp: PpOpt = None,
            nodes: NodesOpt = None, engine_arg: EngineArgOpt = None, dp: DpOpt = None,
            interconnect: InterconnectOpt = None) -> None:
    """Predict what vLLM's benchmark would measure for MODEL on CONFIG at RATE.

    Example: fleetplan predict --model DeepSeek-R1-Distill-Qwen-14B --config 1xH100-PCIe --rate 16

    An uncalibrated pair (calibrated: false) is predicted from the model's spec and the GPU's
    datasheet; its ttft_p99_ms_band (and the other *_band fields) give the range the measured
    value fell in for 80% of held-out runs of the bundled store (docs/spec-path-validation.md),
    or for a GPU type the store never measured, of runs others measured on their own GPUs
    (docs/validation.md; band_basis names which).
    A calibrated pair's own_runs (the caption's "its own runs") give the fit's worst error on
    the runs it was fitted to and the runs it flagged and did not fit, each with its replayed
    token gap against the measured one (itl_p50_error_pct: a fit made from high-rate runs can
    be slow at light load, docs/replica-model.md; docs/validation.md).

    A burst the profile store measured (this model, configuration, rate, number of prompts,
    burstiness and concurrency cap) is shown beside the prediction: one "measured" column per
    run in the table, and measured_runs in the JSON.

    The server: --config, or --gpu and --gpu-count (--tp, --pp, --dp, --nodes, --interconnect:
    pipeline stages, replicas behind one endpoint, several nodes; docs/replica-model.md);
    --engine-arg states the settings it was started with
    (e.g. max_num_seqs=256), applied to calibrated and uncalibrated pairs alike.
    """
    server = server_description(gpu=gpu, gpu_count=gpu_count, tp=tp, pp=pp, nodes=nodes,
                                dp=dp, interconnect=interconnect,
                                engine_args=engine_arg)
    ctx = use_cli_context(catalog=catalog, model_config=model_config, calibration=calibration)
    request = PredictRequest(
        config=server.config_name(config, ctx.catalog), rate=rate, steady=steady,
        num_prompts=num_prompts,
        burstiness=burstiness, max_concurrency=max_concurrency, seeds=seeds,
        arrival_seed=arrival_seed, warm_prefix_cache=warm_prefix_cache,
        prefix_cache_hit=prefix_cache_hit, calibration=calibration,
        engine_version=engine_version, efficiency=efficiency,
        server=server if server.stated else None, names=CLI_NAMES)
    name = model_name(model, ctx)
    note_user_files(calibration=calibration is None)
    # only a sustained run has a long step to show (the compiled engine's preparation)
    with progress_reporter(quiet or not steady, progress) as reporter:
        pred = run_prediction(replace(request, model=name), context=ctx, progress=reporter)
    if fmt is OutputFormat.json:
        emit_json(pred.to_dict())
    elif isinstance(pred.result, SteadyResult):
        _show_steady(pred, pred.result, fmt)
    else:
        _show_burst(pred, pred.result, fmt)


def _caption_head(pred: Prediction) -> str:
    """The caption's first lines: calibrated or not, and a calibrated pair's own runs."""
    p = pred.params
    own = f"\n{pred.own_runs.caption()}" if pred.own_runs is not None else ""
    spec = f"\n{pred.spec_note}" if pred.spec_note is not None else ""
    # an uncalibrated pair's model may come from a config.json: say which
    model = (f"\nmodel: {pred.model_source}" if pred.model_source is not None
             and not p.calibrated else "")
    return f"calibrated: {str(p.calibrated).lower()} ({p.source}){model}{spec}{own}"


def _show_steady(pred: Prediction, sres: SteadyResult, fmt: OutputFormat) -> None:
    bands = pred.bands
    df = pd.DataFrame(
        [{"metric": k, "value": v,
          **({"band_80pct": _fmt_band(bands.get(f"{k}_band"))} if bands else {})}
         for k, v in sres.to_dict().items() if k not in ("model", "config")])
    if fmt is OutputFormat.csv:
        emit_csv(df)
        return
    emit_table(df, title=f"{pred.params.model} on {pred.params.config}: sustained "
               f"{pred.request.rate:g} req/s",
               caption=_caption_head(pred)
               + (f"\nband_80pct: {bands['band_basis']}" if bands else ""))


def _show_burst(pred: Prediction, res: ReplayResult, fmt: OutputFormat) -> None:
    bands, measured, rate = pred.bands, pred.measured_runs, pred.request.rate
    heads = (["measured"] if len(measured) == 1
             else [f"measured {i + 1}" for i in range(len(measured))])
    df = pd.DataFrame(
        [{"metric": k, "mean": res.metrics[k].mean, "std": res.metrics[k].std,
          **({"band_80pct": _fmt_band(bands.get(f"{k}_band"))} if bands else {})}
         for k in METRICS])
    if fmt is OutputFormat.csv:
        emit_csv(df)
        return
    for h, r in zip(heads, measured, strict=True):  # the table's, beside the prediction
        df[h] = [getattr(r, k, None) for k in METRICS]
    beside = (f"\n{', '.join(heads)}: the store's run{'s' * (len(measured) > 1)} of this model "
              f"and configuration at {rate:g} req/s, {res.num_prompts} prompts, burstiness "
              f"{pred.request.burstiness:g}: "
              + ", ".join(f"{r.run_id} ({r.date or 'no date'})" for r in measured)
              if measured else "")
    emit_table(
        df,
        title=f"{pred.params.model} on {pred.params.config}: {res.num_prompts} prompts at "
        f"{rate:g} req/s",
        caption=_caption_head(pred) + "\n"
        + (f"band_80pct: {bands['band_basis']}\n" if bands else "")
        + f"mean and spread over {len(res.seeds)} length seeds; {BURST_NOTE}" + beside)


def _fmt_band(band: object) -> str:
    if not isinstance(band, list):
        return ""
    return f"{band[0]:.4g} - {band[1]:.4g}"


def register(app: typer.Typer) -> None:
    app.command("predict")(predict)

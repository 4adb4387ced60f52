"""``fleetplan profiles``: the measured runs with their cost, energy and carbon.

Parses the options into an :class:`~fleetplan.profiles.entries.EconomicsRequest`, calls
:func:`~fleetplan.profiles.entries.run_economics_table` and formats (and plots) the runs."""

from __future__ import annotations

from pathlib import Path

import typer

from fleetplan.catalog.grid import DEFAULT_REGION
from fleetplan.catalog.models import normalize_model
from fleetplan.catalog.prices import DEFAULT_MARKET
from fleetplan.cli._format import OutputFormat, emit_csv, emit_json, emit_table
from fleetplan.cli._options import StoreOpt, note_user_files, parse_pairs
from fleetplan.errors import InputError
from fleetplan.profiles.entries import EconomicsRequest, run_economics_table

JSON_FIELDS = [
    "model", "gpu", "gpu_count", "config", "request_rate", "duration_s", "completed",
    "request_throughput", "output_throughput", "total_token_throughput", "ttft_mean_ms",
    "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "tpot_p50_ms", "itl_p50_ms",
    "total_input_tokens", "total_output_tokens", "price_usd_per_gpu_hour", "price_source",
    "power_w", "power_source", "grid_g_per_kwh", "grid_source", "cost_per_run_usd",
    "cost_per_mtok_usd", "energy_kwh", "tokens_per_kwh", "g_co2_per_mtok", "source_file",
    "source_line", "run_id",
]
# (column, header) of the terminal table; JSON and CSV carry every field of JSON_FIELDS.
TABLE_FIELDS = [
    ("config", "config"), ("request_rate", "burst rate\nreq/s"),
    ("request_throughput", "done\nreq/s"), ("duration_s", "duration\ns"),
    ("total_token_throughput", "tokens/s"), ("ttft_p50_ms", "TTFT p50\nms"),
    ("ttft_p99_ms", "TTFT p99\nms"), ("tpot_p50_ms", "TPOT p50\nms"),
    ("cost_per_run_usd", "$/run"), ("cost_per_mtok_usd", "$/1M tok\n(in+out)"),
    ("mtok_per_kwh", "1M tok\n/kWh"), ("g_co2_per_mtok", "g CO2/1M\ntok (in+out)"),
]


def profiles(
    model: str | None = typer.Option(None, "--model", "-m", help="Only this model."),
    gpu: str | None = typer.Option(None, "--gpu", help="Only this GPU (any spelling)."),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="table, csv or json."),
    power_watts: list[str] = typer.Option(
        None, "--power-watts", help="GPU=W: power per GPU to assume (default: measured, else TDP)."
    ),
    grid_g_per_kwh: float | None = typer.Option(
        None, "--grid-g-per-kwh", help=f"Grid intensity, g CO2e/kWh (default: {DEFAULT_REGION})."
    ),
    region: str = typer.Option(DEFAULT_REGION, "--region", help="Grid region of the catalog."),
    price: list[str] = typer.Option(None, "--price", help="GPU=USD per GPU-hour override."),
    market: str = typer.Option(DEFAULT_MARKET, "--market", help="Price market of the catalog."),
    store: StoreOpt = None,
    plot: Path | None = typer.Option(None, "--plot", help="Also draw the runs to FILE "
                                     "(.png or .svg)."),
    plot_kind: str = typer.Option("scaling", "--plot-kind", help="scaling (target vs completed "
                                  "req/s) or latency (P99 TTFT vs rate)."),
) -> None:
    """Measured runs with cost per run, cost per 1M tokens, tokens per kWh and g CO2 per 1M tokens.

    Example: fleetplan profiles --model DeepSeek-R1-Distill-Qwen-14B --power-watts H100-PCIe=700

    Example: fleetplan profiles --model DeepSeek-R1-Distill-Qwen-14B --plot scaling.png
    """
    note_user_files(store=store is None)
    df = run_economics_table(EconomicsRequest(
        model=model, gpu=gpu, store=store, market=market,
        prices=parse_pairs(price, "--price"),
        power_watts=parse_pairs(power_watts, "--power-watts"),
        grid_g_per_kwh=grid_g_per_kwh, region=region))
    if plot is not None:
        _plot(df, model, plot_kind, plot)
    if fmt is OutputFormat.json:
        emit_json(df[JSON_FIELDS].to_dict("records"))
    elif fmt is OutputFormat.csv:
        emit_csv(df[JSON_FIELDS])
    else:
        show = df.assign(mtok_per_kwh=df["tokens_per_kwh"] / 1e6)
        show = show.rename(columns=dict(TABLE_FIELDS))
        prices = sorted(set(df["price_source"]))
        power = sorted({f"{g}: {w:g} W ({s})" for g, w, s in
                        zip(df["gpu"], df["power_w"], df["power_source"], strict=True)})
        grid = sorted(set(df["grid_source"]))
        caption = "\n".join([
            "price per GPU-hour: " + "; ".join(prices),
            "power per GPU: " + "; ".join(power),
            f"grid: {df['grid_g_per_kwh'].iloc[0]:g} g CO2e/kWh ({'; '.join(grid)})"
            if len(df) else "grid: -",
            "Each rate is a burst of num_prompts requests that the server then drains, not "
            "sustained load: 'done req/s' is what it completed.",
        ])
        models = sorted(set(df["model"]))
        title = f"Measured runs: {', '.join(models)}" if len(models) == 1 else "Measured runs"
        cols = [h for _, h in TABLE_FIELDS]
        if len(models) > 1:
            cols = ["model", *cols]
        emit_table(show, title=title, columns=cols, caption=caption)


def _plot(df: object, model: str | None, kind: str, path: Path) -> None:
    from fleetplan import viz
    from fleetplan.viz.style import offscreen_axes

    name = normalize_model(model) if model else None
    if kind == "scaling":
        ax = viz.plot_scaling(df, model=name, ax=offscreen_axes())
    elif kind == "latency":
        ax = viz.plot_latency_vs_rate(df, model=name, ax=offscreen_axes())
    else:
        raise InputError(f"--plot-kind {kind!r}: expected one of scaling, latency")
    viz.save_figure(ax, path)
    typer.echo(f"plot written to {path}", err=True)


def register(app: typer.Typer) -> None:
    app.command("profiles")(profiles)

"""``fleetplan profiles``: the measured runs with their cost, energy and carbon."""

from __future__ import annotations

from pathlib import Path

import typer

from fleetplan.catalog.gpus import normalize_gpu
from fleetplan.catalog.grid import DEFAULT_REGION
from fleetplan.catalog.models import normalize_model
from fleetplan.catalog.prices import DEFAULT_MARKET
from fleetplan.cli._format import OutputFormat, emit_csv, emit_json, emit_table
from fleetplan.cli._options import parse_pairs
from fleetplan.profiles.economics import run_economics
from fleetplan.profiles.store import load_profiles

JSON_FIELDS = [
    "model", "gpu", "gpu_count", "config", "request_rate", "duration_s", "completed",
    "request_throughput", "output_throughput", "total_token_throughput", "ttft_mean_ms",
    "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "tpot_p50_ms", "itl_p50_ms",
    "total_input_tokens", "total_output_tokens", "price_usd_per_gpu_hour", "price_source",
    "power_w", "power_source", "grid_g_per_kwh", "grid_source", "cost_per_run_usd",
    "cost_per_mtok_usd", "energy_kwh", "tokens_per_kwh", "g_co2_per_mtok", "source_file",
    "source_line", "run_id",
]
TABLE_FIELDS = [
    "model", "config", "request_rate", "duration_s", "request_throughput",
    "total_token_throughput", "ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "cost_per_run_usd",
    "cost_per_mtok_usd", "tokens_per_kwh", "g_co2_per_mtok", "power_w", "power_source",
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
    store: Path | None = typer.Option(None, "--store", help="Profile store (default: bundled)."),
) -> None:
    """Measured runs with cost per run, cost per 1M tokens, tokens per kWh and g CO2 per 1M tokens.

    Example: fleetplan profiles --model DeepSeek-R1-Distill-Qwen-14B --power-watts H100-PCIe=700
    """
    st = load_profiles(store)
    st = st.select(model=normalize_model(model) if model else None,
                   gpu=normalize_gpu(gpu) if gpu else None)
    df = run_economics(st, market=market, prices=parse_pairs(price, "--price"),
                       power_watts=parse_pairs(power_watts, "--power-watts"),
                       grid_g_per_kwh=grid_g_per_kwh, region=region)
    if fmt is OutputFormat.json:
        emit_json(df[JSON_FIELDS].to_dict("records"))
    elif fmt is OutputFormat.csv:
        emit_csv(df[JSON_FIELDS])
    else:
        sources = sorted(set(df["price_source"]) | {f"grid: {df['grid_source'].iloc[0]}"}
                         if len(df) else set())
        power = sorted({f"{g}: {w:g} W ({s})" for g, w, s in
                        zip(df["gpu"], df["power_w"], df["power_source"], strict=True)})
        caption = ("price: " + "; ".join(sources) + "\npower per GPU: " + "; ".join(power)
                   + "\nrates are bursts of num_prompts requests, not sustained load "
                   "(request_throughput is what the server completed)")
        emit_table(df, title="Measured runs", columns=TABLE_FIELDS, caption=caption)


def register(app: typer.Typer) -> None:
    app.command("profiles")(profiles)

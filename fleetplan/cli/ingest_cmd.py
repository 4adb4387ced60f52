"""``fleetplan ingest``: add result files (or folders of them) to a profile store."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from fleetplan.profiles.ingest import IngestOptions, ingest_paths
from fleetplan.profiles.store import default_store_path, load_profiles


def ingest(
    paths: list[Path] = typer.Argument(..., help="Result files or folders (walked for *.json)."),
    store: Path | None = typer.Option(None, "--store", help="Store file (default: bundled)."),
    gpu: str | None = typer.Option(None, "--gpu", help="GPU, for files that do not name it."),
    gpu_count: int | None = typer.Option(None, "--gpu-count", min=1,
                                         help="GPUs per replica, for files that do not say."),
    engine_version: str | None = typer.Option(None, "--engine-version",
                                              help="Engine version to record."),
    dataset: str | None = typer.Option(None, "--dataset", help="Dataset name to record."),
) -> None:
    """Read vLLM (and other) benchmark results into the profile store; re-ingesting adds nothing.

    Example: fleetplan ingest results/ --store my-profiles.csv

    Refused records are reported one line each on stderr (file, line, field); the rest are
    ingested and the command exits 2. The store is written atomically.
    """
    target = store if store is not None else default_store_path()
    st = load_profiles(target)
    opts = IngestOptions(gpu=gpu, gpu_count=gpu_count, engine_version=engine_version,
                         dataset=dataset)
    report = ingest_paths(paths, st, opts)
    if report.added:
        st.save(target)
    for err in report.errors:
        print(f"fleetplan: error: {err}", file=sys.stderr)
    typer.echo(f"{len(report.added)} run(s) added, {report.duplicates} already present, "
               f"{len(report.errors)} refused, from {report.files} file(s) -> {target}")
    if report.errors:
        raise typer.Exit(2)


def register(app: typer.Typer) -> None:
    app.command("ingest")(ingest)

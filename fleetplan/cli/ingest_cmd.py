"""``fleetplan ingest``: add result files (or folders of them) to a profile store."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from fleetplan.cli._options import CATALOG_HELP, MODEL_CONFIG_HELP, use_cli_context

STORE_HELP = ("Store file. Default: your store, $XDG_DATA_HOME/fleetplan/profiles.csv "
              "(~/.local/share/fleetplan/), started from the bundled runs; the bundled data/ is "
              "never written.")


def ingest(
    paths: list[Path] = typer.Argument(..., help="Result files or folders (walked for *.json)."),
    store: Path | None = typer.Option(None, "--store", help=STORE_HELP),
    gpu: str | None = typer.Option(None, "--gpu", help="GPU, for files that do not name it."),
    gpu_count: int | None = typer.Option(None, "--gpu-count", min=1,
                                         help="GPUs per replica, for files that do not say."),
    engine_version: str | None = typer.Option(None, "--engine-version",
                                              help="Engine version to record."),
    dataset: str | None = typer.Option(None, "--dataset", help="Dataset name to record."),
    catalog: list[Path] = typer.Option(None, "--catalog", help=CATALOG_HELP),
    model_config: list[Path] = typer.Option(None, "--model-config", help=MODEL_CONFIG_HELP),
) -> None:
    """Read vLLM (and other) benchmark results into the profile store; re-ingesting adds nothing.

    Example: fleetplan ingest results/ --store my-profiles.csv

    Refused records are reported one line each on stderr (file, line, field, value): a file
    that cannot be read, a run of a model or GPU the catalog does not know (--catalog,
    --model-config add them), a pipeline-parallel or multi-node run. Every other record is
    ingested and the command exits 2. The store is written atomically.
    """
    from fleetplan.catalog.models import load_models
    from fleetplan.profiles.ingest import IngestOptions, ingest_paths
    from fleetplan.profiles.store import load_profiles, user_store_path

    use_cli_context(catalog=catalog, model_config=model_config)
    target = store if store is not None else user_store_path()
    st = load_profiles(store)  # default: your store if it exists, else the bundled one
    opts = IngestOptions(gpu=gpu, gpu_count=gpu_count, engine_version=engine_version,
                         dataset=dataset, known_models=frozenset(load_models()))
    report = ingest_paths(paths, st, opts)
    if report.added:
        st.save(target)
        if store is None:
            print(f"fleetplan: your profile store: {target}", file=sys.stderr)
    for err in report.errors:
        print(f"fleetplan: error: {err}", file=sys.stderr)
    typer.echo(f"{len(report.added)} run(s) added, {report.duplicates} already present, "
               f"{len(report.errors)} refused, from {report.files} file(s) -> {target}")
    if report.errors:
        raise typer.Exit(2)


def register(app: typer.Typer) -> None:
    app.command("ingest")(ingest)

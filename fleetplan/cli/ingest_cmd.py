"""``fleetplan ingest``: add result files (or folders of them) to a profile store.

Parses the options into an :class:`~fleetplan.profiles.entries.IngestRequest`, calls
:func:`~fleetplan.profiles.entries.ingest_files`, saves the store and reports."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from fleetplan.cli._options import CatalogOpt, ModelConfigOpt, use_cli_context
from fleetplan.cli._server_options import (
    EngineArgOpt,
    EngineVersionOpt,
    GpuCountOpt,
    GpuOpt,
    NodesOpt,
    PpOpt,
    TpOpt,
    WarmPrefixOpt,
    server_description,
)

STORE_HELP = ("Store file. Default: your store, $XDG_DATA_HOME/fleetplan/profiles.csv "
              "(~/.local/share/fleetplan/), started from the bundled runs; the bundled data/ is "
              "never written.")


def ingest(
    paths: list[Path] = typer.Argument(..., help="Result files or folders (walked for *.json)."),
    store: Path | None = typer.Option(None, "--store", help=STORE_HELP),
    gpu: GpuOpt = None,
    gpu_count: GpuCountOpt = None,
    engine_version: EngineVersionOpt = None,
    dataset: str | None = typer.Option(None, "--dataset", help="Dataset name to record."),
    catalog: CatalogOpt = None,
    model_config: ModelConfigOpt = None,
    tp: TpOpt = None,
    pp: PpOpt = None,
    nodes: NodesOpt = None,
    engine_arg: EngineArgOpt = None,
    warm_prefix_cache: WarmPrefixOpt = False,
) -> None:
    """Read vLLM (and other) benchmark results into the profile store; re-ingesting adds nothing.

    Example: fleetplan ingest results/ --store my-profiles.csv

    Refused records are reported one line each on stderr (file, line, field, value): a file
    that cannot be read, a run of a model or GPU the catalog does not know (--catalog,
    --model-config add them), a pipeline-parallel or multi-node run, a file that contradicts
    the server you describe (--gpu, --gpu-count, --tp, ...). Every other record is ingested
    and the command exits 2. The store is written atomically. The engine settings you state
    (--engine-arg) and the prefix cache (cold unless --warm-prefix-cache) are recorded with
    each run when you describe the server.
    """
    from fleetplan.profiles.entries import IngestRequest, ingest_files

    server = server_description(gpu=gpu, gpu_count=gpu_count, tp=tp, pp=pp, nodes=nodes,
                                engine_version=engine_version, engine_args=engine_arg,
                                warm_prefix_cache=warm_prefix_cache)
    ctx = use_cli_context(catalog=catalog, model_config=model_config)
    outcome = ingest_files(IngestRequest(paths=tuple(paths), store=store, gpu=gpu,
                                         gpu_count=gpu_count, engine_version=engine_version,
                                         dataset=dataset,
                                         server=server if server.stated else None),
                           catalog=ctx.catalog)
    report, target = outcome.report, outcome.target
    if outcome.save() and store is None:
        print(f"fleetplan: your profile store: {target}", file=sys.stderr)
    for err in report.errors:
        print(f"fleetplan: error: {err}", file=sys.stderr)
    typer.echo(f"{len(report.added)} run(s) added, {report.duplicates} already present, "
               f"{len(report.errors)} refused, from {report.files} file(s) -> {target}")
    if report.errors:
        raise typer.Exit(2)


def register(app: typer.Typer) -> None:
    app.command("ingest")(ingest)

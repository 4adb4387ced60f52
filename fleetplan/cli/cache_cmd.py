"""``fleetplan cache``: the on-disk cache of simulated capacities and plan checks (``info``,
``clear``): :func:`fleetplan.optimize.cache_admin.cache_info` and ``clear_cache``, formatted."""

from __future__ import annotations

import typer

from fleetplan.cli._format import TableOrJson, emit_json

cache_app = typer.Typer(
    help="The on-disk cache of simulated capacities and plan checks: where it is, how big, "
    "and clearing it.\n\n"
    "The folder is $FLEETPLAN_CACHE_DIR, else ~/.cache/fleetplan. Every entry's key holds all "
    "inputs of the value and the code key (package version + a hash of the replica, workload "
    "and capacity-search code and of the Python, NumPy, SimPy and Numba versions; a plan's "
    "check: of the whole package), so entries of older code are never read; clearing only "
    "frees space. Its jit/ folder holds Numba's compiled steady-state engine (loaded instead "
    "of compiled again by later processes; FLEETPLAN_JIT_CACHE=0 keeps it in memory); clear "
    "removes it too (the next run compiles it again, ~10 s), and a damaged file there means "
    "compiling again, with a warning.\n\nExample: fleetplan cache info",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@cache_app.command("info")
def info(
    fmt: TableOrJson = typer.Option(TableOrJson.table, "--format", help="table or json."),
) -> None:
    """The cache folder, its entries and bytes, and the current code key."""
    from fleetplan.optimize.cache_admin import cache_info

    d = cache_info().to_dict()
    if fmt is TableOrJson.json:
        emit_json(d)
        return
    for k, v in d.items():
        typer.echo(f"{k}: {v}")


@cache_app.command("clear")
def clear() -> None:
    """Remove fleetplan's cache entries and the compiled engine's machine code (jit/); other
    files in the folder stay. Says how many of each."""
    from fleetplan.optimize.cache_admin import clear_cache

    c = clear_cache()
    n, jit = c.entries, c.jit_files
    typer.echo(f"removed {n} cache entr{'y' if n == 1 else 'ies'} from {c.folder} and "
               f"{jit} compiled-engine file{'' if jit == 1 else 's'} from {c.jit_folder}")


def register(app: typer.Typer) -> None:
    app.add_typer(cache_app, name="cache")

"""``fleetplan bench``: measure an OpenAI-compatible server with the benchmark protocol."""

from __future__ import annotations

import math
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from fleetplan.cli._format import check_no_overwrite, check_output_path, dumps, stdout_console
from fleetplan.cli._options import CATALOG_HELP, MODEL_CONFIG_HELP, use_cli_context
from fleetplan.errors import InputError

if TYPE_CHECKING:  # the client, numpy and rich are imported by the command when it runs
    from rich.console import Console
    from rich.table import Table

    from fleetplan.bench.result import BenchResult


def _rates(rate: float | None, sweep: str | None) -> list[float]:
    if rate is not None and sweep is not None:
        raise InputError("give --rate or --sweep, not both")
    if sweep is None:
        return [rate if rate is not None else math.inf]
    from fleetplan._load import show_value

    out = []
    for item in sweep.split(","):
        try:
            r = float(item)
        except ValueError:
            raise InputError(f"--sweep {show_value(sweep, 60)}: {show_value(item, 40)} is not "
                             "a number") from None
        if not r > 0:
            raise InputError(f"--sweep {show_value(sweep, 60)}: {show_value(item, 40)} must be "
                             "> 0 (inf: all at once)")
        out.append(r)
    return out


def _requests(n: int, seed: int, dataset: Path | None, input_len: str | None,
              output_len: str | None) -> tuple[list[Any], str]:
    import numpy as np

    from fleetplan.bench import load_dataset, synthetic_requests
    from fleetplan.bench.requests import parse_length_dist
    from fleetplan.workload.lengths import LengthModel, protocol_length_model

    rng = np.random.default_rng(seed)
    out_dist = parse_length_dist(output_len, "--output-len") if output_len else None
    if dataset is not None:
        if input_len is not None:
            raise InputError("--input-len cannot be used with --dataset (prompts come from it)")
        return load_dataset(dataset, n, rng, out_dist), dataset.stem
    if (input_len is None) != (out_dist is None):
        raise InputError("give both --input-len and --output-len (or neither: the measured "
                         "protocol's lengths)")
    if input_len is None:
        return synthetic_requests(n, protocol_length_model(), rng), "random"
    lengths = LengthModel(input=parse_length_dist(input_len, "--input-len"),
                          output=out_dist)  # type: ignore[arg-type]
    return synthetic_requests(n, lengths, rng), "random"


def _table(results: list[BenchResult]) -> Table:
    from rich.table import Table

    from fleetplan.bench import summary_rows

    table = Table(title="fleetplan bench", caption="Latencies are client-side (as vllm bench "
                  "serve measures them); power: " + str(results[0].facts.power.source),
                  caption_justify="left")
    table.add_column("metric")
    for r in results:
        table.add_column(f"{r.request_rate} req/s", justify="right")
    rows = [summary_rows(r) for r in results]
    for k, (label, _) in enumerate(rows[0]):
        if label == "Power source":
            continue
        table.add_row(label, *(row[k][1] if k < len(row) else "" for row in rows))
    return table


def bench(
    endpoint: str = typer.Option(..., "--endpoint", help="Server URL, e.g. "
                                 "http://127.0.0.1:8000 (or the full /v1/completions URL)."),
    model: str = typer.Option(..., "--model", help="Model name as the server knows it."),
    rate: float | None = typer.Option(None, "--rate", help="Request rate, req/s (default: inf, "
                                      "all at once)."),
    sweep: str | None = typer.Option(None, "--sweep", help="Several rates in order, e.g. "
                                     "32,16,8,4,1 (one result per rate)."),
    num_prompts: int = typer.Option(200, "--num-prompts", min=1, help="Requests per rate."),
    burstiness: float = typer.Option(1.0, "--burstiness", help="Gamma shape of the gaps "
                                     "(1 = Poisson)."),
    max_concurrency: int | None = typer.Option(None, "--max-concurrency", min=1,
                                               help="Client-side cap on requests in flight."),
    api: str = typer.Option("completions", "--api", help="completions or chat."),
    dataset: Path | None = typer.Option(None, "--dataset", help="Prompts: JSONL/CSV with a "
                                        "'prompt' (+ 'output_tokens') field, or ShareGPT JSON."),
    input_len: str | None = typer.Option(None, "--input-len", help="Synthetic prompt lengths: "
                                         "128, fixed:128, uniform:64-256, "
                                         "lognormal:mean=208,cv=1.0 (default: the measured "
                                         "protocol's)."),
    output_len: str | None = typer.Option(None, "--output-len", help="Output lengths (same "
                                          "forms); with --dataset it replaces the file's."),
    ignore_eos: bool = typer.Option(False, "--ignore-eos", help="Ask the server to generate "
                                    "exactly the output length (vLLM extension)."),
    power: str = typer.Option("nvml", "--power", help="nvml (GPU energy counters when "
                              "nvidia-ml-py is installed) or none."),
    gpu: str | None = typer.Option(None, "--gpu", help="GPU of the server, recorded in the "
                                   "result (default: NVML's name)."),
    gpu_count: int | None = typer.Option(None, "--gpu-count", min=1, help="GPUs of one "
                                         "replica (default: GPUs NVML measured)."),
    seed: int = typer.Option(0, "--seed", min=0, max=2**32 - 1,
                             help="Seed of prompts and arrival times, 0 to 2**32-1 (numpy's "
                             "legacy generator, as vllm bench serve seeds it)."),
    arrival_schedule: str = typer.Option("first-at-zero", "--arrival-schedule",
                                         help="first-at-zero (vLLM 0.8, the bundled "
                                         "profiles) or normalized (vLLM 0.32)."),
    request_timeout: float = typer.Option(600.0, "--request-timeout", help="Seconds one "
                                          "request may take in all."),
    deadline: float | None = typer.Option(None, "--deadline", help="Seconds one rate may "
                                          "take, its test request included; then it stops, "
                                          "partial."),
    out: Path | None = typer.Option(None, "--out", help="Write the result JSON here (a sweep: "
                                    "one object per line)."),
    ingest: bool = typer.Option(False, "--ingest", help="Add the results to the profile store."),
    store: Path | None = typer.Option(None, "--store", help="Store for --ingest (default: "
                                      "your store, $XDG_DATA_HOME/fleetplan/profiles.csv, "
                                      "started from the bundled runs)."),
    catalog: list[Path] = typer.Option(None, "--catalog", help=CATALOG_HELP + " With "
                                       "--ingest: the models and GPUs a result may be of."),
    model_config: list[Path] = typer.Option(None, "--model-config", help=MODEL_CONFIG_HELP
                                            + " With --ingest: describes a model the "
                                            "catalog lacks, so its results can be stored."),
    fmt: str = typer.Option("table", "--format", help="table (summary) or json (the results)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Progress bar on "
                                  "stderr."),
) -> None:
    """Benchmark a running server as vllm bench serve does; write vLLM-shaped results.

    Example: fleetplan bench --endpoint http://127.0.0.1:8000 --model my-model --sweep 8,4,2,1
    --num-prompts 200 --out results.jsonl --ingest --model-config my-model/ --gpu H100-SXM
    --gpu-count 1

    With --ingest the model must be one the catalog knows (--catalog, --model-config add
    one), checked before measuring; a result the store refuses is one line on stderr, the
    others are stored.

    Exit codes: 0 every rate measured; 1 a rate without a successful request (its result is
    still written); 2 refused before measuring: a bad option, an unwritable --out or --store,
    an --ingest of a model the catalog does not know, the server's test request failed (in a
    sweep: the rates before it are kept); also 2 when --ingest refused a result (the others
    stored); 130 partial: Ctrl-C or --deadline (which also end the test request), the partial
    result written.
    """
    try:
        _bench(**locals())  # the options as given
    except KeyboardInterrupt:  # outside the run, which turns Ctrl-C into a partial result
        print("fleetplan: interrupted (Ctrl-C); a result file written is complete",
              file=sys.stderr)
        raise typer.Exit(130) from None


def _bench(*, endpoint: str, model: str, rate: float | None, sweep: str | None,
           num_prompts: int, burstiness: float, max_concurrency: int | None, api: str,
           dataset: Path | None, input_len: str | None, output_len: str | None,
           ignore_eos: bool, power: str, gpu: str | None, gpu_count: int | None, seed: int,
           arrival_schedule: str, request_timeout: float, deadline: float | None,
           out: Path | None, ingest: bool, store: Path | None, catalog: list[Path] | None,
           model_config: list[Path] | None, fmt: str, progress: bool) -> None:
    if fmt not in ("table", "json"):
        raise InputError(f"--format {fmt[:40]!r}: expected table or json")
    use_cli_context(catalog=catalog, model_config=model_config)
    from pydantic import ValidationError
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from fleetplan.bench import BenchConfig, BenchError, run_sweep, write_results
    from fleetplan.bench.config import send_schedule

    rates = _rates(rate, sweep)
    reqs, dataset_name = _requests(num_prompts, seed, dataset, input_len, output_len)
    try:
        cfg = BenchConfig(endpoint=endpoint, model=model, api=api,  # type: ignore[arg-type]
                          rate=rates[0], num_prompts=num_prompts, burstiness=burstiness,
                          max_concurrency=max_concurrency, seed=seed,
                          arrival_schedule=arrival_schedule,  # type: ignore[arg-type]
                          request_timeout_s=request_timeout, deadline_s=deadline,
                          ignore_eos=ignore_eos, power=power,  # type: ignore[arg-type]
                          gpu=gpu, gpu_count=gpu_count, dataset_name=dataset_name)
        for r in rates:  # every rate of a sweep is checked before the first runs
            send_schedule(BenchConfig.model_validate({**cfg.model_dump(), "rate": r}))
    except ValidationError as exc:
        e = exc.errors()[0]
        msg = str(e["msg"]).removeprefix("Value error, ")
        if not e["loc"]:
            raise InputError(msg) from None
        name = str(e["loc"][0])
        flag = {"request_timeout_s": "request-timeout", "deadline_s": "deadline"}.get(
            name, name.replace("_", "-"))
        raise InputError(f"--{flag}: {msg}") from None
    if out is not None:
        check_output_path(out, "--out")
        check_no_overwrite([("--out", out)], [("the --store", store), ("the --dataset", dataset)])
    if ingest:
        target = _ingest_target(store, gpu, power, model)
    err = Console(stderr=True)
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("failed {task.fields[failed]}"), TimeElapsedColumn(),
                   console=err, disable=not progress, transient=False)
    task_ids: dict[float, Any] = {}
    done: list[BenchResult] = []
    write_error: list[str] = []

    def on_start(r: float) -> None:
        task_ids[r] = bar.add_task(f"{r:g} req/s", total=num_prompts, failed=0)

    def on_progress(finished: int, failed: int, total: int) -> None:
        bar.update(task_ids[list(task_ids)[-1]], completed=finished, failed=failed)

    def on_result(res: BenchResult) -> None:
        done.append(res)
        if out is not None and not write_error:  # each rate is on disk as soon as it ends
            try:
                write_results(out, done)
            except OSError as exc:
                write_error.append(f"--out {out}: cannot write the results "
                                   f"({exc.strerror or exc})")

    failure: BenchError | None = None
    try:
        with bar:
            results = run_sweep(cfg, rates, reqs, on_start, on_progress, on_result)
    except BenchError as exc:
        failure, results = exc, exc.completed
    except KeyboardInterrupt:  # a second Ctrl-C: abort now, keep the rates already written
        kept = f"; {len(done)} complete rate(s) written to {out}" if out and done else ""
        print(f"fleetplan: aborted (Ctrl-C again){kept}", file=sys.stderr)
        raise typer.Exit(130) from None
    if results:
        _show(results, fmt, out, err, write_error)
    if write_error:
        raise InputError(write_error[0] + "; the results are on stdout" if fmt == "json"
                         else write_error[0])
    refused = 0
    if ingest and results:  # what was measured is ingested, even when a later rate failed
        refused = _ingest(results, out, store, target, gpu, gpu_count, err)
    if failure is not None:
        if results:
            where = f" written to {out}" if out is not None else " shown above"
            failure.args = (f"at {rates[len(results)]:g} req/s: {failure}; the "
                            f"{len(results)} rate(s) before it are complete{where}",)
        raise failure
    if any(r.partial for r in results) or len(results) < len(rates):
        err.print("fleetplan: interrupted: the results are partial")
        raise typer.Exit(130)
    empty = [r for r in results if r.completed == 0]
    if empty:
        first = next((e for e in empty[0].errors if e), "none recorded")
        print(f"fleetplan: error: no request succeeded at "
              f"{', '.join(f'{r.request_rate:g}' for r in empty)} req/s "
              f"({empty[0].failed} failed; first error: {first[:200]})", file=sys.stderr)
        raise typer.Exit(1)
    if refused:  # each refused result is one line above; the others are in the store
        raise typer.Exit(2)


def _show(results: list[BenchResult], fmt: str, out: Path | None, err: Console,
          write_error: list[str]) -> None:
    from rich.console import Console

    from fleetplan.bench.runner import SEND_LAG_WARN_MS

    if fmt == "json":
        dicts = [r.to_dict() for r in results]
        sys.stdout.write(dumps(dicts[0] if len(dicts) == 1 else dicts))
    else:
        stdout_console(width=max(100, Console().width)).print(_table(results))
    if out is not None and not write_error:
        err.print(f"{len(results)} result(s) written to {out}", soft_wrap=True, highlight=False)
    for r in results:
        lag = r.facts.send_lag
        if lag.p99_ms is not None and lag.p99_ms > SEND_LAG_WARN_MS:
            err.print(f"fleetplan: warning: at {r.request_rate:g} req/s the client sent 1% of "
                      f"requests {lag.p99_ms:.0f} ms or more behind schedule (max "
                      f"{lag.max_ms or 0.0:.0f} ms): it was short of CPU, so the load was "
                      "burstier than asked and its latencies include its own delay",
                      highlight=False)
        host = r.facts.host
        if host.throttled_ms is not None and host.throttled_ms > 0:
            limit = f" (CPU limit {host.cpu_limit:g} CPUs)" if host.cpu_limit else ""
            err.print(f"fleetplan: warning: at {r.request_rate:g} req/s this host's cgroup was "
                      f"throttled for {host.throttled_ms:.0f} ms{limit}: a server on this host was "
                      "short of CPU too, and its first tokens may include the host's delay "
                      "(docs/replica-model.md)", highlight=False)


def _ingest_target(store: Path | None, gpu: str | None, power: str, model: str) -> Path:
    """The store ``--ingest`` will write, checked before the run (so a run is not lost to it),
    with the model and GPU the store would refuse a result of."""
    from fleetplan._load import show_value
    from fleetplan.catalog.catalog import active_catalog
    from fleetplan.catalog.models import normalize_model
    from fleetplan.profiles.store import load_profiles, user_store_path

    if gpu is None and power == "none":
        raise InputError("--ingest needs --gpu (and --gpu-count) with --power none: a run is "
                         "stored under its GPU configuration")
    if not active_catalog().knows_model(normalize_model(model)):
        raise InputError(f"--model {show_value(model, 80)}: --ingest stores runs of the "
                         "catalog's models only, and it does not know this one (describe it "
                         "with --model-config config.json or a --catalog folder's models.csv)")
    if gpu is not None:
        active_catalog().normalize_gpu(gpu, where="--gpu")
    target = store if store is not None else user_store_path()
    load_profiles(store)  # a store that cannot be read fails now, not after the run
    check_output_path(target, "--store")
    return target


def _ingest(results: list[BenchResult], out: Path | None, store: Path | None, target: Path,
            gpu: str | None, gpu_count: int | None, err: Console) -> int:
    """Add the measured results to the store: every one it accepts is saved, each refused one
    is a line on stderr. Returns how many were refused."""
    from fleetplan.bench import write_results
    from fleetplan.profiles.ingest import IngestOptions, ingest_paths
    from fleetplan.profiles.store import load_profiles

    measured = [r for r in results if r.completed > 0]
    if len(measured) < len(results):
        err.print(f"fleetplan: {len(results) - len(measured)} result(s) without a completed "
                  "request not ingested", highlight=False)
    if not measured:
        return 0
    st = load_profiles(store)  # default: your store if it exists, else the bundled one
    opts = IngestOptions(gpu=gpu, gpu_count=gpu_count)
    with tempfile.TemporaryDirectory() as tmp:  # the store records the file's name: --out's
        src = Path(tmp) / (out.name if out is not None else "fleetplan-bench.jsonl")
        write_results(src, measured)
        report = ingest_paths([src], st, opts)
    if report.added:  # the good results are stored whatever was refused beside them
        st.save(target)
    for e in report.errors:
        print(f"fleetplan: error: cannot ingest: {e}", file=sys.stderr)
    refused = f", {len(report.errors)} refused" if report.errors else ""
    err.print(f"{len(report.added)} run(s) added to {target} "
              f"({report.duplicates} already present{refused})", soft_wrap=True,
              highlight=False)
    return len(report.errors)


def register(app: typer.Typer) -> None:
    app.command("bench")(bench)

"""``fleetplan bench``: measure an OpenAI-compatible server with the benchmark protocol."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fleetplan.cli._format import check_no_overwrite, check_output_path, dumps, stdout_console
from fleetplan.cli._options import CATALOG_HELP, MODEL_CONFIG_HELP, use_cli_context
from fleetplan.cli._server_options import (
    BenchDpOpt,
    BenchEngineArgOpt,
    BenchEngineVersionOpt,
    BenchGpuCountOpt,
    BenchGpuOpt,
    BenchNodesOpt,
    BenchPpOpt,
    BenchTpOpt,
)
from fleetplan.errors import InputError

if TYPE_CHECKING:  # the client, numpy and rich are imported by the command when it runs
    from rich.console import Console
    from rich.table import Table

    from fleetplan.bench.result import BenchResult
    from fleetplan.bench.sweep import PreparedSweep
    from fleetplan.catalog.catalog import Catalog


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


EndpointOpt = Annotated[str, typer.Option("--endpoint", help="Server URL, e.g. "
                                          "http://127.0.0.1:8000 (or the full /v1/completions "
                                          "URL).")]
ModelOpt = Annotated[str, typer.Option("--model", help="Model name as the server knows it.")]
RateOpt = Annotated[float | None, typer.Option("--rate", help="Request rate, req/s (default: "
                                               "inf, all at once).")]
SweepOpt = Annotated[str | None, typer.Option("--sweep", help="Several rates in order, e.g. "
                                              "32,16,8,4,1 (one result per rate).")]
NumPromptsOpt = Annotated[int, typer.Option("--num-prompts", min=1, help="Requests per rate.")]
BurstinessOpt = Annotated[float, typer.Option("--burstiness", help="Gamma shape of the gaps "
                                              "(1 = Poisson).")]
MaxConcurrencyOpt = Annotated[int | None, typer.Option(
    "--max-concurrency", min=1, help="Client-side cap on requests in flight.")]
ApiOpt = Annotated[str, typer.Option("--api", help="completions or chat.")]
DatasetOpt = Annotated[Path | None, typer.Option(
    "--dataset", help="Prompts: JSONL/CSV with a 'prompt' (+ 'output_tokens') field, or "
    "ShareGPT JSON.")]
InputLenOpt = Annotated[str | None, typer.Option(
    "--input-len", help="Synthetic prompt lengths: 128, fixed:128, uniform:64-256, "
    "lognormal:mean=208,cv=1.0 (default: the measured protocol's).")]
OutputLenOpt = Annotated[str | None, typer.Option(
    "--output-len", help="Output lengths (same forms); with --dataset it replaces the file's.")]
IgnoreEosOpt = Annotated[bool, typer.Option(
    "--ignore-eos", help="Ask the server to generate exactly the output length (vLLM "
    "extension).")]
PowerOpt = Annotated[str, typer.Option("--power", help="nvml (GPU energy counters when "
                                       "nvidia-ml-py is installed) or none.")]
SeedOpt = Annotated[int, typer.Option(
    "--seed", min=0, max=2**32 - 1, help="Seed of prompts and arrival times, 0 to 2**32-1 "
    "(numpy's legacy generator, as vllm bench serve seeds it).")]
ScheduleOpt = Annotated[str, typer.Option(
    "--arrival-schedule", help="first-at-zero (vLLM 0.8, the bundled profiles) or normalized "
    "(vLLM 0.32).")]
TimeoutOpt = Annotated[float, typer.Option("--request-timeout", help="Seconds one request may "
                                           "take in all.")]
DeadlineOpt = Annotated[float | None, typer.Option(
    "--deadline", help="Seconds one rate may take, its test request included; then it stops, "
    "partial.")]
OutOpt = Annotated[Path | None, typer.Option("--out", help="Write the result JSON here (a "
                                             "sweep: one object per line).")]
IngestOpt = Annotated[bool, typer.Option("--ingest",
                                         help="Add the results to the profile store.")]
BenchStoreOpt = Annotated[Path | None, typer.Option(
    "--store", help="Store for --ingest (default: your store, "
    "$XDG_DATA_HOME/fleetplan/profiles.csv, started from the bundled runs).")]
BenchCatalogOpt = Annotated[list[Path] | None, typer.Option(
    "--catalog", help=CATALOG_HELP + " With --ingest: the models and GPUs a result may be of.")]
BenchModelConfigOpt = Annotated[list[Path] | None, typer.Option(
    "--model-config", help=MODEL_CONFIG_HELP + " With --ingest: describes a model the catalog "
    "lacks, so its results can be stored.")]
FormatOpt = Annotated[str, typer.Option("--format", help="table (summary) or json (the "
                                        "results).")]
BenchProgressOpt = Annotated[bool, typer.Option("--progress/--no-progress",
                                                help="Progress bar on stderr.")]
# how the library's one-line errors name the request's fields: the flags
CLI_NAMES = {"request_timeout_s": "--request-timeout", "deadline_s": "--deadline",
             "engine_args": "--engine-arg",
             **{k: "--" + k.replace("_", "-") for k in (
                 "endpoint", "model", "api", "rate", "num_prompts", "burstiness",
                 "max_concurrency", "seed", "arrival_schedule", "ignore_eos", "power", "gpu",
                 "gpu_count", "tp", "pp", "dp", "nodes", "engine_version", "dataset_name",
                 "dataset", "input_len", "output_len", "ingest", "store")}}


def bench(endpoint: EndpointOpt, model: ModelOpt, rate: RateOpt = None, sweep: SweepOpt = None,
          num_prompts: NumPromptsOpt = 200, burstiness: BurstinessOpt = 1.0,
          max_concurrency: MaxConcurrencyOpt = None, api: ApiOpt = "completions",
          dataset: DatasetOpt = None, input_len: InputLenOpt = None,
          output_len: OutputLenOpt = None, ignore_eos: IgnoreEosOpt = False,
          power: PowerOpt = "nvml", gpu: BenchGpuOpt = None,
          gpu_count: BenchGpuCountOpt = None, tp: BenchTpOpt = None, pp: BenchPpOpt = None,
          dp: BenchDpOpt = None, nodes: BenchNodesOpt = None,
          engine_version: BenchEngineVersionOpt = None, engine_arg: BenchEngineArgOpt = None,
          seed: SeedOpt = 0, arrival_schedule: ScheduleOpt = "first-at-zero",
          request_timeout: TimeoutOpt = 600.0, deadline: DeadlineOpt = None,
          out: OutOpt = None, ingest: IngestOpt = False, store: BenchStoreOpt = None,
          catalog: BenchCatalogOpt = None, model_config: BenchModelConfigOpt = None,
          fmt: FormatOpt = "table", progress: BenchProgressOpt = True) -> None:
    """Benchmark a running server as vllm bench serve does; write vLLM-shaped results.

    Example: fleetplan bench --endpoint http://127.0.0.1:8000 --model my-model --sweep 8,4,2,1
    --num-prompts 200 --out results.jsonl --ingest --model-config my-model/ --gpu H100-SXM
    --gpu-count 1 --tp 1 --engine-arg max_num_seqs=64

    --gpu, --gpu-count, --tp, --pp, --dp, --nodes, --engine-version and --engine-arg describe
    the server as it was started; each result records what is stated (nothing more), where
    ingest and validate read it.

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
    if fmt not in ("table", "json"):
        raise InputError(f"--format {fmt[:40]!r}: expected table or json")
    try:
        cat = use_cli_context(catalog=catalog, model_config=model_config).catalog
        from fleetplan.bench.sweep import SweepRequest, check_ingest_target, prepare_sweep
        from fleetplan.profiles.server import parse_engine_args

        prepared = prepare_sweep(SweepRequest(
            endpoint=endpoint, model=model, rates=tuple(_rates(rate, sweep)),
            num_prompts=num_prompts, burstiness=burstiness, max_concurrency=max_concurrency,
            api=api, dataset=dataset, input_len=input_len, output_len=output_len,
            ignore_eos=ignore_eos, power=power, gpu=gpu, gpu_count=gpu_count, tp=tp,
            pp=pp, dp=dp, nodes=nodes,
            engine_version=engine_version, engine_args=parse_engine_args(engine_arg), seed=seed,
            arrival_schedule=arrival_schedule, request_timeout_s=request_timeout,
            deadline_s=deadline, names=CLI_NAMES))
        if out is not None:
            check_output_path(out, "--out")
            check_no_overwrite([("--out", out)],
                               [("the --store", store), ("the --dataset", dataset)])
        target = None
        if ingest:
            target = check_ingest_target(store, gpu, power, model, names=CLI_NAMES,
                                         catalog=cat, layout={"pp": pp, "dp": dp,
                                                              "nodes": nodes})
            check_output_path(target, "--store")
        _measure(prepared, out=out, fmt=fmt, progress=progress, store=store, target=target,
                 gpu=gpu, gpu_count=gpu_count, catalog=cat)
    except KeyboardInterrupt:  # outside the run, which turns Ctrl-C into a partial result
        print("fleetplan: interrupted (Ctrl-C); a result file written is complete",
              file=sys.stderr)
        raise typer.Exit(130) from None


def _measure(prepared: PreparedSweep, *, out: Path | None, fmt: str, progress: bool,
             store: Path | None, target: Path | None, gpu: str | None,
             gpu_count: int | None, catalog: Catalog) -> None:
    """Run the sweep with a progress bar, writing each rate to ``out`` as it ends; show,
    ingest (``target``) and exit as the command's help says."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from fleetplan.bench import BenchError, write_results

    rates, num_prompts = prepared.rates, prepared.config.num_prompts
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
            results = prepared.run(on_start, on_progress, on_result)
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
    if target is not None and results:  # what was measured is ingested, even when a later
        # rate failed
        refused = _ingest(results, out, store, target, gpu, gpu_count, err, catalog)
    _end(results, rates, failure, out, err)
    if refused:  # each refused result is one line above; the others are in the store
        raise typer.Exit(2)


def _end(results: list[BenchResult], rates: tuple[float, ...], failure: Exception | None,
         out: Path | None, err: Console) -> None:
    """The failure, a partial sweep, or a rate without a successful request: as exit codes."""
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


def _ingest(results: list[BenchResult], out: Path | None, store: Path | None, target: Path,
            gpu: str | None, gpu_count: int | None, err: Console, catalog: Catalog) -> int:
    """Add the measured results to the store: every one it accepts is saved, each refused one
    is a line on stderr. Returns how many were refused."""
    from fleetplan.bench.sweep import ingest_results

    measured = [r for r in results if r.completed > 0]
    if len(measured) < len(results):
        err.print(f"fleetplan: {len(results) - len(measured)} result(s) without a completed "
                  "request not ingested", highlight=False)
    if not measured:
        return 0
    report = ingest_results(  # the store records the file's name: --out's
        measured, file_name=out.name if out is not None else "fleetplan-bench.jsonl",
        store=store, target=target, gpu=gpu, gpu_count=gpu_count, catalog=catalog)
    for e in report.errors:
        print(f"fleetplan: error: cannot ingest: {e}", file=sys.stderr)
    refused = f", {len(report.errors)} refused" if report.errors else ""
    err.print(f"{len(report.added)} run(s) added to {target} "
              f"({report.duplicates} already present{refused})", soft_wrap=True,
              highlight=False)
    return len(report.errors)


def register(app: typer.Typer) -> None:
    app.command("bench")(bench)

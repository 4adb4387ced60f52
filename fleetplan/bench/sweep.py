"""A ``fleetplan bench`` sweep as library calls: the request, its checks, the run, the ingest.

:class:`SweepRequest` is the typed argument record (server, model, rates, prompts, lengths, the
run's settings); :func:`prepare_sweep` checks all of it before anything is sent (every rate's
:class:`~fleetplan.bench.config.BenchConfig` and send schedule, the prompts) and returns the
:class:`PreparedSweep` whose :meth:`~PreparedSweep.run` measures it. Bad input is one
:class:`~fleetplan.errors.InputError` line naming the field (its CLI flag where the CLI passes
``names``). :func:`check_ingest_target` and :func:`ingest_results` store measured results in a
profile store (checked before the run, so a run is not lost to it).
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleetplan._request import RequestRecord
from fleetplan.errors import InputError

if TYPE_CHECKING:  # the runner (aiohttp) is imported when a sweep runs
    from fleetplan.bench.config import BenchConfig
    from fleetplan.bench.requests import BenchRequest
    from fleetplan.bench.result import BenchResult
    from fleetplan.catalog.catalog import Catalog
    from fleetplan.profiles.ingest import IngestReport


@dataclass(frozen=True, kw_only=True)
class SweepRequest(RequestRecord):
    """One sweep asked for: ``model`` on the server at ``endpoint``, one run per rate of
    ``rates`` in order (req/s; inf: all at once), each of ``num_prompts`` requests. Prompts
    come from ``dataset`` (JSONL/CSV/ShareGPT) or are synthetic with ``input_len`` and
    ``output_len`` (``"128"``, ``"uniform:64-256"``, ``"lognormal:mean=208,cv=1.0"``; both or
    neither: the measured protocol's), seeded by ``seed``. ``tp``, ``pp``, ``dp``, ``nodes``,
    ``engine_version`` and
    ``engine_args`` (keys of :data:`~fleetplan.profiles.server.ENGINE_ARGS`) describe the
    server as the user states it: recorded in each result as ingest reads them, absent when
    not stated. The other fields are
    :class:`~fleetplan.bench.config.BenchConfig`'s. ``names``: how the errors call each field
    (default its own name; the CLI passes its flags)."""

    endpoint: str
    model: str
    rates: tuple[float, ...] = (math.inf,)
    num_prompts: int = 200
    burstiness: float = 1.0
    max_concurrency: int | None = None
    api: str = "completions"
    dataset: Path | None = None
    input_len: str | None = None
    output_len: str | None = None
    ignore_eos: bool = False
    power: str = "nvml"
    gpu: str | None = None
    gpu_count: int | None = None
    # what the user states about the server, recorded in every result (never guessed)
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    nodes: int | None = None
    engine_version: str | None = None
    engine_args: Mapping[str, int | float | bool | str] = field(default_factory=dict)
    seed: int = 0
    arrival_schedule: str = "first-at-zero"
    request_timeout_s: float = 600.0
    deadline_s: float | None = None

    def __post_init__(self) -> None:
        # the two the prompts are drawn with, before BenchConfig checks the rest
        for key, high in (("seed", 2**32 - 1), ("num_prompts", 1_000_000)):
            v, low = getattr(self, key), 0 if key == "seed" else 1
            if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
                raise InputError(f"{self.name(key)}: {v!r} must be a whole number from {low} "
                                 f"to {high}")
        if not self.rates:
            raise InputError(f"{self.name('rate')}: give at least one rate")
        from fleetplan.profiles.server import FLAG_NAMES, ServerDescription

        # the description's own checks: bounds, settings vLLM refuses together, a
        # tensor-parallel size that does not divide the GPUs
        ServerDescription(gpu_count=self.gpu_count if self.tp is not None else None, tp=self.tp,
                          pp=self.pp, dp=self.dp, nodes=self.nodes,
                          engine_version=self.engine_version, engine_args=self.engine_args,
                          names={k: self.names.get(k, k) for k in FLAG_NAMES})


@dataclass(frozen=True)
class PreparedSweep:
    """A checked sweep: the first rate's ``config``, the ``rates`` and the ``requests``."""

    config: BenchConfig
    rates: tuple[float, ...]
    requests: list[BenchRequest]

    def run(self, on_start: Callable[[float], None] | None = None,
            on_progress: Callable[[int, int, int], None] | None = None,
            on_result: Callable[[BenchResult], None] | None = None) -> list[BenchResult]:
        """Measure every rate (:func:`fleetplan.bench.runner.run_sweep`; its errors and
        Ctrl-C handling are the runner's)."""
        from fleetplan.bench import run_sweep

        return run_sweep(self.config, list(self.rates), self.requests, on_start, on_progress,
                         on_result)


def prepare_sweep(request: SweepRequest) -> PreparedSweep:
    """``request`` checked and built: its prompts, and every rate's settings and send schedule
    (a bad one is refused before the first rate runs)."""
    from pydantic import ValidationError

    from fleetplan.bench.config import BenchConfig, send_schedule

    reqs, dataset_name = _requests(request)
    try:
        cfg = BenchConfig(endpoint=request.endpoint, model=request.model,
                          api=request.api,  # type: ignore[arg-type]
                          rate=request.rates[0], num_prompts=request.num_prompts,
                          burstiness=request.burstiness,
                          max_concurrency=request.max_concurrency, seed=request.seed,
                          arrival_schedule=request.arrival_schedule,  # type: ignore[arg-type]
                          request_timeout_s=request.request_timeout_s,
                          deadline_s=request.deadline_s, ignore_eos=request.ignore_eos,
                          power=request.power,  # type: ignore[arg-type]
                          gpu=request.gpu, gpu_count=request.gpu_count,
                          tp=request.tp, pp=request.pp, dp=request.dp, nodes=request.nodes,
                          engine_version=request.engine_version,
                          engine_args=dict(request.engine_args),
                          dataset_name=dataset_name)
        for r in request.rates:  # every rate of a sweep is checked before the first runs
            send_schedule(BenchConfig.model_validate({**cfg.model_dump(), "rate": r}))
    except ValidationError as exc:
        e = exc.errors()[0]
        msg = str(e["msg"]).removeprefix("Value error, ")
        if not e["loc"]:
            raise InputError(msg) from None
        raise InputError(f"{request.name(str(e['loc'][0]))}: {msg}") from None
    return PreparedSweep(cfg, tuple(request.rates), reqs)


def _requests(request: SweepRequest) -> tuple[list[Any], str]:
    """The prompts to send and the dataset's name: ``random`` for synthetic ones of stated
    lengths, ``random-sharegpt-lengths`` for synthetic ones of the study's ShareGPT-like
    lengths (a replay of a run that lost its per-request lengths draws them so,
    :mod:`fleetplan.replica.run_lengths`)."""
    import numpy as np

    from fleetplan.bench import load_dataset, synthetic_requests
    from fleetplan.bench.requests import parse_length_dist
    from fleetplan.workload.lengths import LengthModel, protocol_length_model

    n, input_len = request.num_prompts, request.input_len
    rng = np.random.default_rng(request.seed)
    out_dist = (parse_length_dist(request.output_len, request.name("output_len"))
                if request.output_len else None)
    if request.dataset is not None:
        if input_len is not None:
            raise InputError(f"{request.name('input_len')} cannot be used with "
                             f"{request.name('dataset')} (prompts come from it)")
        return load_dataset(request.dataset, n, rng, out_dist), request.dataset.stem
    if (input_len is None) != (out_dist is None):
        raise InputError(f"give both {request.name('input_len')} and "
                         f"{request.name('output_len')} (or neither: the measured protocol's "
                         "lengths)")
    if input_len is None:  # the study's ShareGPT-like lengths: replayed as such
        return synthetic_requests(n, protocol_length_model(), rng), "random-sharegpt-lengths"
    lengths = LengthModel(input=parse_length_dist(input_len, request.name("input_len")),
                          output=out_dist)  # type: ignore[arg-type]
    return synthetic_requests(n, lengths, rng), "random"


def check_ingest_target(store: Path | None, gpu: str | None, power: str, model: str, *,
                        names: Mapping[str, str] | None = None,
                        catalog: Catalog | None = None,
                        layout: Mapping[str, int | None] | None = None) -> Path:
    """The store an ingest of this sweep will write (default: yours), checked before the run
    (so a run is not lost to it), with the model and GPU the store would refuse a result of
    (those ``catalog`` does not know; default: the bundled one) and a server ``layout`` it
    would refuse (``{"pp": 2}``: pipeline stages, data-parallel ranks or several nodes).
    Whether the file can be written is the caller's check (the CLI's ``check_output_path``)."""
    from fleetplan._load import show_value
    from fleetplan.catalog.catalog import bundled_catalog
    from fleetplan.catalog.models import normalize_model
    from fleetplan.profiles.store import load_profiles, user_store_path

    def n(key: str) -> str:
        return (names or {}).get(key, key)

    laid_out = [f"{n(k)} {v}" for k, v in (layout or {}).items() if v is not None and v > 1]
    if laid_out:
        raise InputError(f"{n('ingest')} with {laid_out[0]}: the profile store keeps one "
                         "tensor-parallel group on one node per run, so ingest would refuse "
                         "the results; write them with --out and judge them with "
                         "fleetplan validate FILE")
    if gpu is None and power == "none":
        raise InputError(f"{n('ingest')} needs {n('gpu')} (and {n('gpu_count')}) with "
                         f"{n('power')} none: a run is stored under its GPU configuration")
    cat = catalog if catalog is not None else bundled_catalog()
    if not cat.knows_model(normalize_model(model)):
        raise InputError(f"{n('model')} {show_value(model, 80)}: {n('ingest')} stores runs of "
                         "the catalog's models only, and it does not know this one (describe "
                         "it with --model-config config.json or a --catalog folder's "
                         "models.csv)")
    if gpu is not None:
        cat.normalize_gpu(gpu, where=n("gpu"))
    target = store if store is not None else user_store_path()
    load_profiles(store)  # a store that cannot be read fails now, not after the run
    return target


def ingest_results(results: Sequence[BenchResult], *, file_name: str, store: Path | None,
                   target: Path, gpu: str | None, gpu_count: int | None,
                   catalog: Catalog | None = None) -> IngestReport:
    """Add the results with a completed request to ``store`` (default: yours if it exists,
    else the bundled one) and save it to ``target`` when any was added; each one the store
    refuses is in the report's ``errors``. ``file_name``: the name the store records as the
    results' file. ``catalog``: where the results' models and GPUs are read (default: the
    bundled one)."""
    from fleetplan.bench import write_results
    from fleetplan.profiles.ingest import IngestOptions, ingest_paths
    from fleetplan.profiles.store import load_profiles

    st = load_profiles(store)
    opts = IngestOptions(gpu=gpu, gpu_count=gpu_count, catalog=catalog)
    with tempfile.TemporaryDirectory() as tmp:  # the store records the file's name
        src = Path(tmp) / file_name
        write_results(src, [r for r in results if r.completed > 0])
        report = ingest_paths([src], st, opts)
    if report.added:  # the good results are stored whatever was refused beside them
        st.save(target)
    return report

"""Measured runs as replay targets: protocol conditions, data-quality flags, predictions.

Main entries: :func:`runs_from_frame` (store rows ->
:class:`~fleetplan.replica.measured_run.MeasuredRun`, with the flags of :func:`flag_runs`),
:func:`predict_run` (replay one run's protocol on the replica model).

Protocol facts of the bundled runs (``/work/shared/data/ionet-vllm-0.8.5/README.md``), named
assumptions here: ``benchmark_serving.py --seed 42`` (so the send times are reproduced exactly),
and the rates of one configuration ran from the highest down (32, 16, 8, 4, 1 req/s) against one
running server with the same prompts, so a run's prefix-cache state follows from the runs before
it: :mod:`fleetplan.replica.prefix_cache` walks vLLM V1's LRU over KV blocks through them on the
server's KV capacity (vLLM's memory arithmetic, not the fitted effective capacity); the first
(highest-rate) run of a series starts cold. The same prompts in the same order also fix the
lengths of the replies that end each burst (:mod:`fleetplan.replica.burst_tail`), learned from
the reference runs' durations and pinned in the replay.

Data quality: a work-conserving server's TTFT does not fall as its load rises. A run whose TTFT
p50, p90 or p99 is more than :data:`FLAG_RATIO` times that of a higher-rate run of the same
configuration (e.g. 2xRTX-4090 at 1 req/s: seconds, at 4-16 req/s: 0.2 s; 8xRTX-4090 at 4 req/s:
p99 0.75 s against 0.27 s at 16 req/s while the medians agree) is flagged with the reason; flagged
runs are kept and reported, never used to fit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

import pandas as pd

from fleetplan.catalog.catalog import Catalog
from fleetplan.profiles.request_lengths import decode
from fleetplan.profiles.server import ServerDescription, parse_engine_args
from fleetplan.replica.burst_tail import BurstTail, infer_burst_tails, tail_for
from fleetplan.replica.engine_defaults import intake_is_serial
from fleetplan.replica.measured_run import MeasuredRun, server_kv_tokens
from fleetplan.replica.params_record import ReplicaParams
from fleetplan.replica.prefix_cache import runs_before
from fleetplan.replica.protocol import replay
from fleetplan.replica.run_lengths import replay_lengths
from fleetplan.workload.lengths import LengthModel

VLLM_BENCHMARK_SEED = 42
FLAG_RATIO = 1.25
# percentiles the flag rule compares across rates (p50 first: it names the reason when several trip)
FLAG_PERCENTILES = ("ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms")
FIT_METRICS = ("request_throughput", "output_throughput", "ttft_mean_ms", "ttft_p50_ms",
               "ttft_p90_ms", "ttft_p99_ms", "tpot_p50_ms", "itl_p50_ms")
# A run whose median gap between tokens is below this share of its median time per output token
# had its tokens delivered in bunches (a client or API process that reads several token events
# at once; seen on the shared 2-core CPU server, never in the GPU store, whose lowest ratio is
# 0.52): its ITL median measures the delivery, not the engine, and is left out of fits and checks.
BUNCHED_ITL_RATIO = 0.1
# A run whose median time per output token is below this share of its configuration's upper
# quartile (over all its runs) had most replies reach the client whole: every gap ~0, so TPOT ~0
# too and the ITL rule above cannot see it (the 2-core CPU server at load 8-9: TPOT p50 0.004 ms
# against ~2 ms in the other runs). Its latency figures (TTFT: the first token read with the
# last; TPOT, ITL) measure the reads, not the server: left out of fits, spreads and checks; its
# throughput is kept. The upper quartile, not the median, so that the rule still holds when
# most runs collapsed (one loaded session: 6 of 12). No GPU run comes near it (lowest TPOT p50
# over its configuration's upper quartile: 0.25).
COLLAPSED_TPOT_RATIO = 0.1
# ... and below this many ms whatever the other runs (when every run of a session collapsed, as
# in one at load 4.5-8: TPOT p50 0.004 ms in all 12): 10,000 tokens a second for one stream, 40x
# faster than the GPU store's fastest TPOT p50 (4.07 ms) and 20x the CPU server's (~2 ms)
COLLAPSED_TPOT_FLOOR_MS = 0.1
DELIVERY_METRICS = ("ttft_mean_ms", "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "tpot_p50_ms",
                    "itl_p50_ms")
VALIDATED_METRICS = ("request_throughput", "output_throughput", "ttft_mean_ms", "ttft_p50_ms",
                     "ttft_p90_ms", "ttft_p99_ms", "tpot_p50_ms")


def flag_runs(frame: pd.DataFrame, ratio: float = FLAG_RATIO) -> dict[str, str]:
    """run_id -> reason, for runs inconsistent with any work-conserving server: a TTFT
    percentile (p50, and p90 / p99 where the frame has them: tails that fall as load rises
    while the median does not are just as suspect) more than ``ratio`` times that of a
    higher-rate run of the same configuration. The first percentile that trips names the
    reason."""
    out: dict[str, str] = {}
    metrics = [m for m in FLAG_PERCENTILES if m in frame.columns]
    if "tpot_p50_ms" in frame.columns:
        # the TTFTs of a run whose replies were read whole (collapsed_delivery) are its reads',
        # not the server's: they neither trip the rule nor set the figure others are held to
        ref = frame.groupby(["model", "config"])["tpot_p50_ms"].transform(
            lambda s: s.quantile(0.75))
        collapsed = ((frame["tpot_p50_ms"] < COLLAPSED_TPOT_RATIO * ref)
                     | (frame["tpot_p50_ms"] < COLLAPSED_TPOT_FLOOR_MS))
        if collapsed.any():
            frame = frame.copy()
            frame.loc[collapsed, metrics] = math.nan
    for (_m, _c), g in frame.groupby(["model", "config"], sort=True):
        # the load of a run: its rate, then its client's cap on requests in flight (a
        # concurrency sweep sends every run at inf req/s; no cap: inf)
        caps = (g["max_concurrency"] if "max_concurrency" in g.columns
                else pd.Series(math.nan, index=g.index))
        load = pd.Series([(float(r), float(c) if pd.notna(c) and c > 0 else math.inf)
                          for r, c in zip(g["request_rate"], caps, strict=True)],
                         index=g.index)
        for metric in metrics:
            label = "TTFT " + metric.removeprefix("ttft_").removesuffix("_ms")
            by_load = g[metric].groupby(load).median().sort_index()
            loads = list(by_load.index)
            for i, here_load in enumerate(loads):
                higher = by_load.iloc[i + 1:].dropna()
                here = float(by_load.iloc[i])
                if higher.empty or math.isnan(here):
                    continue
                lo_load = higher.index[int(higher.to_numpy().argmin())]
                lo = float(higher.min())
                if here > ratio * lo:
                    reason = (f"{label} {here:.0f} ms at {_load_name(here_load)} is "
                              f"{here / lo:.1f}x the {lo:.0f} ms at {_load_name(lo_load)}: a "
                              "work-conserving server's TTFT does not fall as load rises "
                              f"(tolerance {ratio:g}x)")
                    for rid in g.loc[load.map(lambda x, h=here_load: x == h), "run_id"]:
                        out.setdefault(str(rid), reason)
    return out


def _load_name(load: tuple[float, float]) -> str:
    """``4 req/s``, ``16 in flight`` (a concurrency sweep's) or both."""
    rate, cap = load
    if math.isinf(cap):
        return f"{rate:g} req/s"
    if math.isinf(rate):
        return f"{cap:g} in flight"
    return f"{rate:g} req/s, {cap:g} in flight at most"


def bunched_itl(itl_p50_ms: float, tpot_p50_ms: float,
                ratio: float = BUNCHED_ITL_RATIO) -> str | None:
    """Why a run's ITL median is a delivery artefact (None when it is not): with continuous
    batching every running request gets one token per engine step, so the median gap between
    a request's tokens is of the order of its time per output token; a median far below it
    means most gaps are ~0, i.e. token events arrived together."""
    if not (math.isfinite(itl_p50_ms) and math.isfinite(tpot_p50_ms)) or tpot_p50_ms <= 0:
        return None
    if itl_p50_ms >= ratio * tpot_p50_ms:
        return None
    return (f"ITL p50 {itl_p50_ms:.3g} ms is below {ratio:g}x the TPOT p50 {tpot_p50_ms:.3g} ms: "
            f"tokens were delivered in bunches, so the ITL median measures delivery, not steps")


def runs_from_frame(frame: pd.DataFrame, *, flags: dict[str, str] | None = None,
                    series: pd.DataFrame | None = None,
                    tails_from: pd.DataFrame | None = None) -> list[MeasuredRun]:
    """Typed runs from store rows, flagged by :func:`flag_runs` over ``series`` (default: the
    same rows; pass the whole store when ``frame`` holds new runs to judge against it), with
    the burst-tail lengths (:mod:`fleetplan.replica.burst_tail`) learned from ``tails_from``
    (default: ``series``; pass the store alone so that new runs never inform their own
    prediction)."""
    ref = frame if series is None else series
    fl = flag_runs(ref) if flags is None else flags
    out = _typed_runs(frame, ref, fl)
    if tails_from is None:
        tail_runs = out if ref is frame else _typed_runs(ref, ref, fl)
    else:
        tail_runs = _typed_runs(tails_from, tails_from, flag_runs(tails_from))
    return with_burst_tails(out, infer_burst_tails(tail_runs, seed=VLLM_BENCHMARK_SEED))


def with_burst_tails(runs: Sequence[MeasuredRun],
                     tails: Mapping[str, BurstTail]) -> list[MeasuredRun]:
    """``runs`` with the pinned output lengths of their prompt set (none where unknown)."""
    return [replace(r, pinned_outputs=tail_for(tails, r.num_prompts, r.total_input_tokens))
            for r in runs]


def _text(value: object) -> str | None:
    """A row's text field (empty or missing: None)."""
    return value.strip() or None if isinstance(value, str) else None


def _lengths(ins: object, outs: object) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """A store row's recorded lengths (:mod:`fleetplan.profiles.request_lengths`), if any."""
    if not isinstance(ins, str) or not isinstance(outs, str) or not ins or not outs:
        return None
    return decode(ins), decode(outs)


def collapsed_delivery(tpot_p50_ms: float, config_tpot_p50_ms: float,
                       ratio: float = COLLAPSED_TPOT_RATIO) -> str | None:
    """Why a run's latency figures are a delivery artefact (None when they are not): an engine
    step does not get ten times faster from one run of a configuration to the next, so a TPOT
    median far below ``config_tpot_p50_ms`` (the upper quartile of the configuration's TPOT
    medians), or below :data:`COLLAPSED_TPOT_FLOOR_MS` whatever the other runs, means most
    replies were read whole: gaps ~0, first token read with the last."""
    if not math.isfinite(tpot_p50_ms):
        return None
    if tpot_p50_ms < COLLAPSED_TPOT_FLOOR_MS:
        below = f"{COLLAPSED_TPOT_FLOOR_MS:g} ms (10,000 tokens a second for one stream)"
    elif (math.isfinite(config_tpot_p50_ms) and config_tpot_p50_ms > 0
          and tpot_p50_ms < ratio * config_tpot_p50_ms):
        below = (f"{ratio:g}x the {config_tpot_p50_ms:.3g} ms of its configuration's runs "
                 "(upper quartile of their TPOT p50)")
    else:
        return None
    return (f"TPOT p50 {tpot_p50_ms:.3g} ms is below {below}: replies were delivered whole "
            f"(tokens in bunches), so the run's TTFT, TPOT and ITL measure delivery, not the "
            f"server")


def _excluded(meas: dict[str, float], config_tpot: float) -> list[tuple[str, str]]:
    """(metric, why) of the figures a run's measurements contradict (removed from ``meas``)."""
    why = collapsed_delivery(meas.get("tpot_p50_ms", math.nan), config_tpot)
    if why is not None:
        return [(m, why) for m in DELIVERY_METRICS if meas.pop(m, None) is not None]
    why = bunched_itl(meas.get("itl_p50_ms", math.nan), meas.get("tpot_p50_ms", math.nan))
    if why is not None:
        del meas["itl_p50_ms"]
        return [("itl_p50_ms", why)]
    return []


def recorded_server(engine_args: object, prefix_cache: object,
                    run_id: str = "") -> ServerDescription | None:
    """The server a store row was measured on, from its ``engine_args`` and ``prefix_cache``
    fields (:mod:`fleetplan.profiles.schema`): its engine settings, and a cold prefix cache
    unless recorded warm. None when the row records neither (the study's runs, replayed on
    their series protocol)."""
    args = engine_args if isinstance(engine_args, str) and engine_args.strip() else None
    cache = prefix_cache if isinstance(prefix_cache, str) and prefix_cache.strip() else None
    if args is None and cache is None:
        return None
    return ServerDescription(
        engine_args=parse_engine_args(args.split() if args else (),
                                      option=f"run {run_id}: engine_args"),
        warm_prefix_cache=cache == "warm" or None)


def _cap(value: object) -> int | None:
    """A row's client-side concurrency cap (empty or 0: none)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    cap = int(value)  # type: ignore[call-overload]
    return cap if cap > 0 else None


def _typed_runs(frame: pd.DataFrame, ref: pd.DataFrame, fl: dict[str, str]) -> list[MeasuredRun]:
    max_rate = ref.groupby(["model", "config"])["request_rate"].max().to_dict()
    config_tpot = (ref.groupby(["model", "config"])["tpot_p50_ms"].quantile(0.75).to_dict()
                   if "tpot_p50_ms" in ref.columns else {})
    out = []
    for rec in frame.to_dict("records"):
        key = (str(rec["model"]), str(rec["config"]))
        meas = {m: float(rec[m]) for m in FIT_METRICS if m in rec and pd.notna(rec[m])}
        excluded = _excluded(meas, float(config_tpot.get(key, math.nan)))
        rid = str(rec["run_id"])
        dur = rec.get("duration_s")
        out.append(MeasuredRun(
            run_id=rid, model=key[0], config=key[1], gpu=str(rec["gpu"]),
            gpu_count=int(rec["gpu_count"]), request_rate=float(rec["request_rate"]),
            num_prompts=int(rec["num_prompts"]), burstiness=float(rec["burstiness"]),
            total_input_tokens=int(rec["total_input_tokens"]),
            total_output_tokens=int(rec["total_output_tokens"]),
            series_max_rate=float(max_rate.get(key, rec["request_rate"])), measured=meas,
            flagged=rid in fl, flag_reason=fl.get(rid),
            source=f"{rec['source_file']}:{rec['source_line']}",
            duration_s=float(dur) if dur is not None and pd.notna(dur) else math.nan,
            engine_version=_text(rec.get("engine_version")),
            excluded=tuple(excluded),
            request_lengths=_lengths(rec.get("input_lens"), rec.get("output_lens")),
            server=recorded_server(rec.get("engine_args"), rec.get("prefix_cache"), rid),
            max_concurrency=_cap(rec.get("max_concurrency")),
            dataset=_text(rec.get("dataset")),
        ))
    return out


def predict_run(params: ReplicaParams, run: MeasuredRun, *, lengths: LengthModel | None = None,
                seeds: Sequence[int] = (0, 1, 2), warm: bool | None = None,
                catalog: Catalog | None = None) -> dict[str, float]:
    """Replay ``run``'s protocol (exact send times, its token totals, the pinned lengths of the
    replies that end its burst, its prefix-cache state after the runs that preceded it on the
    server, :mod:`fleetplan.replica.prefix_cache`; ``warm`` True / False overrides it with all
    prompts cached / none), with its client's cap on requests in flight where it had one
    (``max_concurrency``). The result has ``prefix_hit_share`` when the LRU state was used.
    ``catalog``: where the run's model and GPU are read for the server's KV cache (default: the
    bundled one). A run of a vLLM release whose server takes requests in one at a time
    (0.5.x, :func:`~fleetplan.replica.engine_defaults.intake_is_serial`) is replayed with that
    intake (:func:`~fleetplan.replica.protocol.intake_release`)."""
    own = replay_lengths(run) if lengths is None else {}
    res = replay(params, rate=run.request_rate, num_prompts=run.num_prompts,
                 burstiness=run.burstiness, max_concurrency=run.max_concurrency,
                 lengths=own.get("lengths", lengths), seeds=seeds,
                 arrival_seed=VLLM_BENCHMARK_SEED,
                 totals=(run.total_input_tokens, run.total_output_tokens),
                 warm_prefix_cache=bool(warm),
                 pinned_outputs=run.pinned_outputs,
                 request_lengths=run.request_lengths or own.get("request_lengths"),
                 prefix_runs_before=(runs_before(run.request_rate, run.series_max_rate)
                                     if warm is None else None),
                 prefix_capacity_tokens=server_kv_tokens(run.model, run.config, catalog),
                 serial_intake=(run.max_concurrency is None
                                and intake_is_serial(run.engine_version)))
    return {k: v.mean for k, v in res.metrics.items()}

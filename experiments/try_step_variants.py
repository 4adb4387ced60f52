"""An experiment, not adopted: one calibrated server replayed with a step time, KV cache or reply
spread of your choosing, to see which measured figures each one can explain.

Usage: python experiments/try_step_variants.py [--model M] [--config C] [--c-step-ms X ...]
           [--kv-factor F ...] [--cv-output V ...]
  e.g. python experiments/try_step_variants.py --c-step-ms 50 --kv-factor 1 0.9 --cv-output 0.8 1.6

Defaults: DeepSeek-R1-Distill-Llama-70B on 2xH100-PCIe, the configuration whose calibrated TPOT
is ~30 % high at every rate (issue 12). Each variant changes the bundled calibration's
parameters (``c_step`` set to X ms, ``kv_capacity_tokens`` scaled by F, whole blocks) or the
protocol length model's reply spread (``cv_output``), keeps every other parameter, and replays
each of the configuration's runs as calibration does (its send times, token totals, burst-tail
pins, prefix-cache state, the calibration's length seeds). Prints the error % of throughput,
TTFT p50 / p90 / p99, TPOT p50 and ITL p50 per run, and the mean preemptions per replay.
docs/replica-model.md ("The 70B fp16 server on 2 x H100 PCIe") has the results.
"""

from __future__ import annotations

import argparse
import itertools

from fleetplan.profiles.store import load_profiles
from fleetplan.replica.calibrate import FIT_SEEDS
from fleetplan.replica.calibration_file import load_calibration_file
from fleetplan.replica.params import ReplicaParams
from fleetplan.replica.prefix_cache import runs_before
from fleetplan.replica.protocol import replay
from fleetplan.replica.runs import MeasuredRun, runs_from_frame, server_kv_tokens
from fleetplan.workload.lengths import PROTOCOL_CV_OUTPUT, protocol_length_model

METRICS = ("request_throughput", "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "tpot_p50_ms",
           "itl_p50_ms")


def errors(params: ReplicaParams, run: MeasuredRun, cv_output: float) -> tuple[list[str], float]:
    res = replay(params, rate=run.request_rate, num_prompts=run.num_prompts,
                 burstiness=run.burstiness, seeds=FIT_SEEDS, arrival_seed=42,
                 lengths=protocol_length_model(cv_output=cv_output),
                 totals=(run.total_input_tokens, run.total_output_tokens),
                 pinned_outputs=run.pinned_outputs, request_lengths=run.request_lengths,
                 prefix_runs_before=runs_before(run.request_rate, run.series_max_rate),
                 prefix_capacity_tokens=server_kv_tokens(run.model, run.config))
    out = []
    for m in METRICS:
        meas = run.measured.get(m)
        out.append(f"{100 * (res.metrics[m].mean - meas) / meas:+6.0f}" if meas else "     -")
    return out, res.preemptions


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="DeepSeek-R1-Distill-Llama-70B")
    ap.add_argument("--config", default="2xH100-PCIe")
    ap.add_argument("--c-step-ms", type=float, nargs="*", default=[])
    ap.add_argument("--kv-factor", type=float, nargs="*", default=[1.0])
    ap.add_argument("--cv-output", type=float, nargs="*", default=[PROTOCOL_CV_OUTPUT])
    args = ap.parse_args()
    runs = sorted((r for r in runs_from_frame(load_profiles().frame)
                   if (r.model, r.config) == (args.model, args.config)),
                  key=lambda r: r.request_rate)
    if not runs:
        raise SystemExit(f"no bundled runs of {args.model} on {args.config}")
    entry = load_calibration_file().entry(args.model, args.config)
    if entry is None:
        raise SystemExit(f"the bundled calibration has no {args.model} on {args.config}")
    base = entry.params
    steps = [None, *args.c_step_ms]
    print("rate: throughput / TTFT p50 / p90 / p99 / TPOT p50 / ITL p50 error %, preemptions")
    for c_step_ms, kv_f, cv in itertools.product(steps, args.kv_factor, args.cv_output):
        kv = int(base.kv_capacity_tokens * kv_f) // base.block_size * base.block_size
        p = base.with_(kv_capacity_tokens=kv,
                       **({} if c_step_ms is None else {"c_step": c_step_ms / 1e3}))
        print(f"c_step {p.c_step * 1e3:.1f} ms{'' if c_step_ms else ' (calibrated)'}, "
              f"KV {kv} tokens, cv_output {cv:g}")
        for r in runs:
            errs, pre = errors(p, r, cv)
            print(f"  {r.request_rate:4g}{' flagged' if r.flagged else ''}: {' '.join(errs)}"
                  f"  {pre:.0f}")


if __name__ == "__main__":
    main()

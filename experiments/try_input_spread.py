"""An experiment, not adopted: the prompt-length spread read from the shape of low-load TTFT.

Usage: python experiments/try_input_spread.py [CV ...] [--seeds N]
  e.g. python experiments/try_input_spread.py 0.8 1.5 2.0 3.0

Every measured run sends the same 200 prompts, so the spread of their lengths is one fact per
prompt set. Where no prompt is in the prefix cache and nothing queues (runs below their series'
highest rate on servers whose KV cache cannot keep the prompts, TTFT p99 under
``burst_tail.MAX_QUEUE_STEPS`` decode steps), a request's TTFT is about ``a + b x`` its prompt
length, so the shape ratios of the run's TTFT,

    S = (mean - p50) / (p99 - p50)    R = (p90 - p50) / (p99 - p50),

are those of the prompt lengths whatever ``a`` and ``b`` (the step coefficients) are. This
prints them for each such run, measured, and replayed with the bundled calibration and the
protocol length model at each input cv given (default 0.8, the committed value, to 3.0), with
the mean squared difference over the runs (S and R) as the score. docs/replica-model.md
("Tried: the prompts' spread read from low-load TTFT, and stratified lengths") has the results
and what a recalibration at each spread did to the held-out figures.
"""

from __future__ import annotations

import argparse
import math

from fleetplan.profiles.store import load_profiles
from fleetplan.replica.burst_tail import MAX_QUEUE_STEPS
from fleetplan.replica.calibration_file import load_calibration
from fleetplan.replica.params_record import ReplicaParams
from fleetplan.replica.runs import MeasuredRun, predict_run, runs_from_frame
from fleetplan.workload.lengths import PROTOCOL_CV_OUTPUT, protocol_length_model


def shape(m: dict[str, float]) -> tuple[float, float, float]:
    """(S, R, p99 / p50) of a run's TTFT (module docstring)."""
    p50, p90, p99, mean = (m[k] for k in ("ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms",
                                          "ttft_mean_ms"))
    return (mean - p50) / (p99 - p50), (p90 - p50) / (p99 - p50), p99 / p50


def length_revealing(runs: list[MeasuredRun], params: dict[tuple[str, str], ReplicaParams]
                     ) -> list[MeasuredRun]:
    """Cold-cache runs below the series' top rate that do not queue (module docstring)."""
    return [r for r in runs if r.key in params and not r.flagged and not r.warm_cache()
            and r.request_rate < r.series_max_rate and r.request_rate <= 4
            and r.measured["ttft_p99_ms"] < MAX_QUEUE_STEPS * r.measured["tpot_p50_ms"]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cv", nargs="*", type=float, default=[0.8, 1.25, 1.5, 2.0, 2.5, 3.0])
    ap.add_argument("--seeds", type=int, default=16, help="length seeds per replay")
    args = ap.parse_args()
    cal = load_calibration(None)
    params = {(e["model"], e["config"]): ReplicaParams.model_validate(e["params"])
              for e in cal["configs"]}
    runs = length_revealing(runs_from_frame(load_profiles().frame), params)
    measured = [shape(r.measured) for r in runs]
    print(f"{len(runs)} runs: model, config, rate, measured S / R / p99:p50")
    for r, (s, q, ratio) in zip(runs, measured, strict=True):
        print(f"  {r.model:30s} {r.config:11s} {r.request_rate:3g}  {s:.3f} / {q:.3f} / "
              f"{ratio:.2f}")
    for cv in args.cv:
        lm = protocol_length_model(cv, PROTOCOL_CV_OUTPUT)
        got = [shape(predict_run(params[r.key], r, lengths=lm, seeds=tuple(range(args.seeds))))
               for r in runs]
        score = math.fsum((g[0] - m[0]) ** 2 + (g[1] - m[1]) ** 2
                          for g, m in zip(got, measured, strict=True)) / len(runs)
        print(f"cv_input {cv:g}: score {score:.4f}; replayed S / R / p99:p50 per run: "
              + ", ".join(f"{a:.3f}/{b:.3f}/{c:.2f}" for a, b, c in got), flush=True)


if __name__ == "__main__":
    main()

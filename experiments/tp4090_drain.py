"""Experiment (issue 42): why replayed bursts drain faster than the measured servers.

For each configuration (committed calibration, in-sample) and its 16 / 32 req/s runs: the
replay's duration, the request that ends it (index, reply tokens, send time), the engine's
decode speed after the last send (mean step time and batch), against the measured duration
and the per-token time the measured tail implies for that same request.

Usage: python experiments/tp4090_drain.py [--all] (length seed 0; about a minute with --all)
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from fleetplan.catalog.catalog import Catalog, bundled_catalog
from fleetplan.profiles.store import load_profiles
from fleetplan.replica.calibrate import group_runs
from fleetplan.replica.calibration_file import load_calibration_file
from fleetplan.replica.delivery import client_lags
from fleetplan.replica.measured_run import MeasuredRun, server_kv_tokens
from fleetplan.replica.params_record import ReplicaParams
from fleetplan.replica.prefix_cache import runs_before
from fleetplan.replica.protocol import protocol_length_model, simulate_one
from fleetplan.replica.runs import VLLM_BENCHMARK_SEED
from fleetplan.validate.core import load_runs


def drain(params: ReplicaParams, run: MeasuredRun, seed: int, cat: Catalog) -> dict[str, Any]:
    """The replay's duration and the request that ends it (module docstring)."""
    reqs, eng, end_min, _ = simulate_one(
        params, seed=seed, rate=run.request_rate, num_prompts=run.num_prompts,
        burstiness=1.0, max_concurrency=None, lengths=protocol_length_model(),
        arrival_seed=VLLM_BENCHMARK_SEED,
        totals=(run.total_input_tokens, run.total_output_tokens), warm_prefix_cache=False,
        request_lengths=None, pinned_outputs=run.pinned_outputs,
        prefix_runs_before=runs_before(run.request_rate, run.series_max_rate),
        prefix_capacity_tokens=server_kv_tokens(run.model, run.config, cat))
    first = np.array([r.first_token_s for r in reqs])
    fin = np.array([r.finish_s for r in reqs])
    lf, ll = client_lags(first, fin, params)
    fin_c = fin + ll
    i = int(np.argmax(fin_c))
    arr = np.array([r.arrival_s for r in reqs])
    outs = np.array([r.output_tokens for r in reqs])
    # engine decode per-token time of the last request: (finish - first) / (outs - 1)
    per_tok = (fin[i] - first[i]) / max(outs[i] - 1, 1)
    return dict(dur=float(fin_c.max()), idx=i, out=int(outs[i]), sent=float(arr[i]),
                first=float(first[i] + lf[i]), per_tok=per_tok, lag=float(ll[i]),
                top=sorted(((int(o), k) for k, o in enumerate(outs)), reverse=True)[:3])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--all", action="store_true", help="every configuration, not only TP 4090")
    args = ap.parse_args()
    cat = bundled_catalog()
    cal = load_calibration_file()
    params = {(e.params.model, e.params.config): e.params for e in cal.configs}
    for key, g in group_runs(load_runs(load_profiles())).items():
        if not args.all and not (g[0].gpu == "RTX-4090" and g[0].gpu_count > 1):
            continue
        p = params[key]
        print(f"{key[0][:28]:28s} {key[1]:12s} c_step {p.c_step * 1e3:.1f} ms "
              f"pins {g[0].pinned_outputs}")
        done = set()
        for r in g:
            if r.request_rate < 4 or r.request_rate in done:
                continue
            done.add(r.request_rate)
            d = drain(p, r, 0, cat)
            meas = r.duration_s
            # the same request measured: tail = duration - sent - its TTFT (p50 as a proxy)
            mt = (meas - d["sent"] - r.measured["ttft_p50_ms"] / 1e3) / d["out"]
            print(f"   {r.request_rate:4g} {'F' if r.flagged else ' '} dur meas {meas:5.1f} pred "
                  f"{d['dur']:5.1f} ({100*(meas/d['dur']-1):+4.0f}% thr) last #{d['idx']} "
                  f"{d['out']} tok sent {d['sent']:5.1f} 1st {d['first']-d['sent']:5.2f} s; "
                  f"pred {d['per_tok']*1e3:5.1f} ms/tok, meas-implied {mt*1e3:5.1f}; "
                  f"TPOT p50 meas {r.measured.get('tpot_p50_ms', float('nan')):5.1f} "
                  f"ITL p50 {r.measured.get('itl_p50_ms', float('nan')):5.1f}")


if __name__ == "__main__":
    main()

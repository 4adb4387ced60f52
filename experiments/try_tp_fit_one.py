import sys, time
from fleetplan.profiles.store import load_profiles
from fleetplan.validate.core import load_runs
from fleetplan.replica.calibrate import fit_config
from fleetplan.replica.burst_tail import infer_burst_tails
from fleetplan.replica.runs import with_burst_tails, VLLM_BENCHMARK_SEED
runs = load_runs(load_profiles())
tails = infer_burst_tails(runs, seed=VLLM_BENCHMARK_SEED)
for cfg in sys.argv[1:]:
    m, c = cfg.split("@")
    rs = with_burst_tails([r for r in runs if r.config == c and m in r.model], tails)
    t = time.time()
    f = fit_config(rs)
    p = f.params
    print(cfg, f"{time.time()-t:.0f}s loss={f.loss:.3f} c2={p.c_tok2*1e9:.2f}ns c_step={p.c_step*1e3:.2f}ms pf={p.c_prefill_tok*1e6:.1f}us seq={p.c_seq*1e6:.1f}us kv={p.c_kv_tok*1e9:.1f}ns ovh={p.overhead_s*1e3:.1f}ms kvcap={p.kv_capacity_tokens}")
    for r in f.runs:
        e = r.error_pct
        print(f"  {r.request_rate:4g} {'F' if r.flagged else ' '} " + " ".join(f"{k[:8]}={v:6.1f}" for k, v in e.items() if k in ("request_throughput","tpot_p50_ms","itl_p50_ms","ttft_p50_ms","ttft_p99_ms")))

"""A measurement: does NVIDIA's AIConfigurator (measured kernel tables) predict other people's
runs better than fleetplan's spec path, on the runs it can take? (Issue 41, item 3.)

Usage::

    python3 -m venv /tmp/aicv && /tmp/aicv/bin/pip install aiconfigurator==0.12.0
    FLEETPLAN_CACHE_DIR=/tmp/cache .venv/bin/python experiments/try_aiconfigurator.py \
        /tmp/aicv/bin/aiconfigurator

(about 5 s per AIConfigurator call, two calls per run at most; AIConfigurator is Apache-2.0 and
runs offline on its bundled tables; it is never a dependency of fleetplan.)

Which runs: the rows of ``data/external/`` on a GPU AIConfigurator 0.12.0 has tables for
(``SYSTEMS``) whose model has a config AIConfigurator can read (``AIC_MODELS``: its vendored
configs, the same architecture as the run's checkpoint, or the checkpoint's own
``config.json`` from ``data/external/configs``), served by vLLM. Today that is the
``lambdalabs-vllm-benchmark`` rows (H100 SXM and A100 SXM, vLLM 0.5.4, bursts); the AMD,
RTX 3090 and RTX 4090 rows have no AIConfigurator system.

How a run is mapped (the most favourable reading we could make of AIConfigurator's single-point
``estimate --estimate-mode agg``, a steady state at a fixed batch): a burst of N prompts
all sent at once runs in waves of at most ``max_num_seqs`` (256, vLLM 0.5.4's default)
requests; each wave costs AIConfigurator's request latency at its batch size, the run's
duration is their sum, its throughput N over that, and its TPOT p50 the wave that holds the
median request. AIConfigurator's database for the run's vLLM version is used where it has one,
else its newest (``0.24.0`` on H100 SXM, ``0.14.0`` on A100 SXM: the runs used 0.5.4). TTFT is
not compared: AIConfigurator's TTFT is a steady-state request's context phase, and these runs'
first tokens wait in a burst's queue (seconds).

fleetplan's figures are ``scripts/eval_external.py``'s ``predict_row`` for the same rows, with
the engine settings each row states (``engine_args``, as ``scripts/fit_family_efficiency.py``
judges them), printed twice: the spec path alone, and as the product predicts today (the
family fit of ``data/family_efficiency.json`` where one is kept, which is fitted on these rows
among others, so in-sample; its held-out figures are in docs/validation.md). Prints one line
per run and the median |error| of each; docs/catalogs.md records the finding.
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SYSTEMS = {"H100-SXM": "h100_sxm", "A100-80GB": "a100_sxm", "H100-PCIe": "h100_pcie",
           "H200-SXM": "h200_sxm", "B200": "b200_sxm", "L40S": "l40s"}
# the run's checkpoint -> what AIConfigurator reads: its vendored config of the same
# architecture (Llama 3 and 3.1 8B differ only in RoPE scaling and context; Mixtral's instruct
# build has the base model's architecture), or the checkpoint's own config.json read as a Llama
# (Mistral 7B v0.3: a Llama block with no sliding window; AIConfigurator 0.12.0 does not list
# MistralForCausalLM)
AIC_MODELS = {
    "meta-llama/Meta-Llama-3-8B-Instruct": ("hub", "meta-llama/Meta-Llama-3.1-8B"),
    "mistralai/Mixtral-8x7B-Instruct-v0.1": ("vendored", "mistralai--Mixtral-8x7B-v0.1"),
    "mistralai/Mistral-7B-Instruct-v0.3": ("as-llama", "mistralai--Mistral-7B-Instruct-v0.3"),
}
MAX_NUM_SEQS = 256  # vLLM 0.5.4's default


def _eval_module() -> Any:
    spec = importlib.util.spec_from_file_location("eval_external",
                                                  ROOT / "scripts" / "eval_external.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["eval_external"] = mod
    spec.loader.exec_module(mod)
    return mod


def model_path(exe: str, how: tuple[str, str], scratch: Path) -> str:
    """The --model-path AIConfigurator gets for ``how`` (AIC_MODELS): a hub id it vendors, or
    a folder with a config.json written here."""
    kind, name = how
    if kind == "hub":
        return name
    folder = scratch / name
    folder.mkdir(parents=True, exist_ok=True)
    if kind == "vendored":
        site = Path(exe).resolve().parents[1] / "lib"
        src = next(site.glob(f"python3*/site-packages/aiconfigurator_core/model_configs/"
                             f"{name}_config.json"))
        cfg = json.loads(src.read_text())
    else:
        cfg = json.loads((ROOT / "data" / "external" / "configs" / name / "config.json")
                         .read_text())
        cfg.update(architectures=["LlamaForCausalLM"], model_type="llama")
    (folder / "config.json").write_text(json.dumps(cfg))
    return str(folder)


def aic_estimate(exe: str, model: str, system: str, tp: int, batch: int, isl: int,
                 osl: int) -> dict[str, float] | str:
    """AIConfigurator's agg estimate at one batch size: request latency, TPOT (ms), or why
    it has none."""
    cmd = [exe, "cli", "estimate", "--model-path", model, "--system", system, "--backend",
           "vllm", "--isl", str(isl), "--osl", str(osl), "--batch-size", str(batch),
           "--tp-size", str(tp), "--estimate-mode", "agg", "--no-color"]
    if "Mixtral" in model:  # vLLM shards a Mixtral's experts over its tensor-parallel GPUs
        cmd += ["--moe-tp-size", str(tp)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    text = out.stdout + out.stderr
    got = {k: re.search(rf"{k}:\s+([\d,.]+) ms", text) for k in ("TPOT", "Request Latency")}
    if out.returncode != 0 or not all(got.values()):
        last = [ln for ln in text.splitlines() if ln.strip()][-1:] or ["no output"]
        return f"no estimate: {last[0][-160:]}"
    return {k: float(m.group(1).replace(",", "")) for k, m in got.items() if m}


def aic_burst(exe: str, model: str, system: str, tp: int, n: int, isl: int,
              osl: int) -> tuple[float, float] | str:
    """A burst of ``n`` prompts in waves of at most MAX_NUM_SEQS: (requests/s, TPOT p50 ms)."""
    waves, left = [], n
    while left > 0:
        waves.append(min(left, MAX_NUM_SEQS))
        left -= waves[-1]
    est: dict[int, dict[str, float]] = {}
    for b in sorted(set(waves)):
        e = aic_estimate(exe, model, system, tp, b, isl, osl)
        if isinstance(e, str):
            return e
        est[b] = e
    duration_s = sum(est[b]["Request Latency"] for b in waves) / 1000.0
    median_wave = waves[min((n // 2) // MAX_NUM_SEQS, len(waves) - 1)]
    return n / duration_s, est[median_wave]["TPOT"]


def _spec_path(ev: Any, run: Any, res: Any) -> Any:
    """``predict_row`` with no family fit: the spec path alone (as the fit script's
    ``Predictor`` replays it)."""
    import fleetplan.replica.params as params_mod

    saved = params_mod.family_efficiency
    params_mod.family_efficiency = lambda gpu, path=None: None
    try:
        return ev.predict_row(run, res, engine_args=True)
    finally:
        params_mod.family_efficiency = saved


def main(exe: str) -> int:
    from fleetplan.profiles.external import load_external_runs

    ev = _eval_module()
    res = ev.Resolver()
    ours: dict[str, list[float]] = {"throughput": [], "TPOT p50": []}
    spec_only: dict[str, list[float]] = {"throughput": [], "TPOT p50": []}
    theirs: dict[str, list[float]] = {"throughput": [], "TPOT p50": []}
    taken = refused = 0
    scratch = Path(tempfile.mkdtemp(prefix="aic-models-"))
    for source, runs in sorted(load_external_runs().by_source().items()):
        for run in runs:
            system = SYSTEMS.get(run.gpu or "")
            how = AIC_MODELS.get(run.model or "")
            if system is None or how is None or run.engine != "vllm" or (run.pp or 1) > 1:
                continue
            if (run.load_kind != "burst" or run.num_prompts is None
                    or run.input_tokens_mean is None or run.output_tokens is None
                    or not run.completed_rps or not run.tpot_p50_ms):
                print(f"{source} {run.run_id}: skipped (not a burst of stated size, lengths, "
                      "throughput and TPOT)")
                continue
            isl = int(round(run.input_tokens_mean))
            osl = int(round(run.output_tokens))
            got = aic_burst(exe, model_path(exe, how, scratch), system, run.tp or 1,
                            run.num_prompts, isl, osl)
            mine = ev.predict_row(run, res, engine_args=True)
            spec = _spec_path(ev, run, res)
            if isinstance(got, str) or mine.refused:
                refused += 1
                aic = got if isinstance(got, str) else "ok"
                print(f"{source} {run.run_id}: AIConfigurator {aic}; fleetplan "
                      f"{mine.refused or 'ok'}")
                continue
            taken += 1
            rps, tpot = got
            aic_err = {"throughput": rps / run.completed_rps - 1.0,
                       "TPOT p50": tpot / run.tpot_p50_ms - 1.0}
            for label in ("throughput", "TPOT p50"):
                if label in mine.errors and label in spec.errors:
                    ours[label].append(mine.errors[label])
                    spec_only[label].append(spec.errors[label])
                    theirs[label].append(aic_err[label])
            print(f"{source} {run.model} {run.gpu} x{run.tp} N={run.num_prompts}: "
                  f"throughput measured {run.completed_rps:.2f} req/s, AIConfigurator "
                  f"{aic_err['throughput']:+.0%}, fleetplan "
                  f"{mine.errors.get('throughput', math.nan):+.0%}; TPOT p50 measured "
                  f"{run.tpot_p50_ms:.1f} ms, AIConfigurator {aic_err['TPOT p50']:+.0%}, "
                  f"fleetplan {mine.errors.get('TPOT p50', math.nan):+.0%} (spec path "
                  f"{spec.errors.get('throughput', math.nan):+.0%} / "
                  f"{spec.errors.get('TPOT p50', math.nan):+.0%})")
    print(f"{taken} runs compared, {refused} that one of the two could not take")
    for label in ("throughput", "TPOT p50"):
        if ours[label]:
            med = [statistics.median(abs(x) for x in v)
                   for v in (theirs[label], spec_only[label], ours[label])]
            print(f"{label}: median |error| AIConfigurator {med[0]:.0%}, fleetplan's spec path "
                  f"{med[1]:.0%}, with today's family fit (in-sample) {med[2]:.0%} "
                  f"(n={len(ours[label])})")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    raise SystemExit(main(sys.argv[1]))

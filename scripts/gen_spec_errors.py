"""Generate data/spec_errors.json and docs/spec-path-validation.md: the spec path's held-out
errors on the bundled store (leave-one-model-out, -config-out, -gpu-out), per GPU type.

Usage: python scripts/gen_spec_errors.py [--seeds N]
Both files are written atomically and must only ever be produced this way
(fleetplan.validate.bands reads the JSON; its module docstring says how).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from fleetplan._io import atomic_write_text
from fleetplan.catalog.hardware import server_kind
from fleetplan.profiles.store import load_profiles
from fleetplan.replica.calibration_file import load_calibration_file
from fleetplan.validate.core import load_runs
from fleetplan.validate.cv import leave_one_config_out
from fleetplan.validate.spec_cv import (
    PATH_CHOICE_METRICS,
    choose_path,
    error_quantiles,
    leave_one_gpu_out,
    leave_one_model_out,
    spec_path_markdown,
)

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, default=5, help="length seeds per prediction")
    args = ap.parse_args()
    t0 = time.monotonic()
    store, cal = load_profiles(), load_calibration_file()
    keys = {e.key for e in cal.configs}
    runs = [r for r in load_runs(store) if r.key in keys]
    seeds = tuple(range(args.seeds))
    # the spec path of each server kind (GPU type, one GPU or tensor-parallel): transfer
    # efficiencies where they are no worse than the ratios on every leave-one-model-out metric
    # of that kind's runs (fleetplan.replica.params.spec_path)
    gpus = sorted({r.gpu for r in runs})
    kinds = sorted({server_kind(r.gpu, r.gpu_count) for r in runs})
    by_path = {path: error_quantiles(leave_one_model_out(
        runs, cal.configs, seeds=seeds, paths=dict.fromkeys(gpus, path)).runs, PATH_CHOICE_METRICS,
        by=lambda r: server_kind(r.gpu, r.gpu_count)) for path in ("ratios", "transfer")}
    paths = {k: choose_path(by_path["ratios"].get(k, {}), by_path["transfer"].get(k, {}))
             for k in kinds}
    folds = {"leave-one-model-out": leave_one_model_out(runs, cal.configs, seeds=seeds,
                                                        paths=paths),
             "leave-one-config-out": leave_one_config_out(runs, cal.configs, seeds=seeds,
                                                          paths=paths),
             "leave-one-gpu-out": leave_one_gpu_out(runs, cal.configs, seeds=seeds)}
    table = {
        "paths": paths,
        "path_choice": {path: {g: {m: q["median_abs_pct"] for m, q in row.items()}
                               for g, row in rows.items() if g in kinds}
                        for path, rows in by_path.items()},
        "source": (f"Spec-path predictions of the {len(runs)} runs of the bundled store's "
                   f"{len(keys)} calibrated configurations (data/profiles.csv, "
                   f"data/calibration.json), {args.seeds} length seeds each; "
                   "scripts/gen_spec_errors.py."),
        "folds": {f: error_quantiles(res.runs) for f, res in folds.items()},
        "not_covered": {f: [list(k) for k in res.not_covered or ()] for f, res in folds.items()},
    }
    atomic_write_text(ROOT / "data" / "spec_errors.json", json.dumps(table, indent=1) + "\n")
    atomic_write_text(ROOT / "docs" / "spec-path-validation.md", spec_path_markdown(
        table, command="python scripts/gen_spec_errors.py") + "\n")
    for f, by_gpu in table["folds"].items():
        row = by_gpu["all"]
        print(f, {m: q["median_abs_pct"] for m, q in row.items()})
    print(f"wrote data/spec_errors.json, docs/spec-path-validation.md in "
          f"{time.monotonic() - t0:.0f} s")


if __name__ == "__main__":
    main()

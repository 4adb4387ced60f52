"""Generate docs/validation.md from the validation of the bundled store.

Usage:
  python scripts/gen_validation_doc.py                  # runs `fleetplan validate --cv` itself
  python scripts/gen_validation_doc.py --from-json F    # renders a saved
                                                        # `fleetplan validate --cv --format json`
The Markdown is the same as `fleetplan validate --cv --format markdown`; the file is written
atomically. docs/validation.md must only ever be produced this way (its last section, on
other people's runs, by scripts/fit_family_efficiency.py; this script keeps it as it is).
The same run writes data/model_errors.json (--errors-out): the held-out TTFT p99 errors
that `solve --confidence`, the plans' model bands and the report take
(fleetplan/validate/model_errors.py), so the page and the figures planned with come from one
validation.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from fleetplan._io import atomic_write_text
from fleetplan.profiles.store import load_profiles
from fleetplan.replica.calibration_file import load_calibration_file
from fleetplan.validate.core import load_runs, validate
from fleetplan.validate.cv import leave_one_config_out, leave_one_rate_out
from fleetplan.validate.markdown import validation_markdown
from fleetplan.validate.model_errors import ModelErrors, write_model_errors
from fleetplan.validate.records import CrossValidation, ValidationResult

ROOT = Path(__file__).resolve().parents[1]
EXTERNAL_SECTION = "## Other people's runs (data/external)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--from-json", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "validation.md")
    ap.add_argument("--errors-out", type=Path, default=ROOT / "data" / "model_errors.json")
    ap.add_argument("--jobs", type=int, default=None)
    args = ap.parse_args()
    if args.from_json is not None:
        result = ValidationResult.from_dict(
            json.loads(args.from_json.read_text(encoding="utf-8")), str(args.from_json))
    else:
        store, cal = load_profiles(), load_calibration_file()
        runs = load_runs(store)
        result = validate(runs, calibration=cal)
        keys = {e.key for e in cal.configs}
        mine = [r for r in runs if r.key in keys]
        result = replace(result, cv=CrossValidation(
            leave_one_rate_out(mine, jobs=args.jobs), leave_one_config_out(mine, cal.configs)))
    text = validation_markdown(result, command="fleetplan validate --cv --format markdown "
                                                "(via scripts/gen_validation_doc.py)")
    errors = ModelErrors.from_validation(
        result, "fleetplan validate --cv over the bundled store (scripts/gen_validation_doc.py)")
    # the section on other people's runs is scripts/fit_family_efficiency.py's: kept as written
    old = args.out.read_text(encoding="utf-8") if args.out.is_file() else ""
    kept = old[old.index(EXTERNAL_SECTION):] if EXTERNAL_SECTION in old else ""
    atomic_write_text(args.out, text + "\n" + ("\n" + kept if kept else ""))
    write_model_errors(errors, args.errors_out)
    print(f"wrote {args.out} and {args.errors_out}")


if __name__ == "__main__":
    main()

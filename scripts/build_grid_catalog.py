"""Build data/grid_intensity.csv from CodeCarbon's bundled per-country energy-mix data.

CodeCarbon (MIT licence) ships Our World in Data / Ember figures per country
(``codecarbon/data/private_infra/global_energy_mix.json``). This script turns them into
fleetplan's grid catalog and adds the EU27 2023 average the IOG Foundation study used.

Usage: python scripts/build_grid_catalog.py [PATH_TO_global_energy_mix.json]
(default: the file of an installed ``codecarbon`` package). Run once by a maintainer; the
product reads only the CSV it writes.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fleetplan._io import atomic_write_text  # noqa: E402


def _default_source() -> Path:
    import codecarbon  # type: ignore[import-not-found]

    return Path(codecarbon.__file__).parent / "data/private_infra/global_energy_mix.json"


def main(argv: list[str]) -> None:
    src = Path(argv[1]) if len(argv) > 1 else _default_source()
    mix = json.loads(src.read_text())
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["region", "name", "g_co2_per_kwh", "year", "source"])
    w.writerow(["EU27", "European Union (27)", 242, 2023,
                "Ember / EEA EU27 2023 average, as used by the IOG Foundation study (AIBC 2025)"])
    for iso, rec in sorted(mix.items()):
        ci = rec.get("carbon_intensity")
        if ci is None or not (ci > 0):
            continue
        w.writerow([iso, rec["country_name"], round(float(ci), 1), rec["year"],
                    "Our World in Data / Ember, via CodeCarbon global_energy_mix.json (MIT)"])
    atomic_write_text(ROOT / "data" / "grid_intensity.csv", out.getvalue())


if __name__ == "__main__":
    main(sys.argv)

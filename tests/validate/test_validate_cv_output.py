"""``fleetplan validate --cv`` on a tiny store: progress on stderr by default (plain lines off a
terminal, one per fold, naming the configuration where the fold is one), the answer first on
stdout (the lines README.md quotes), the per-run in-sample table only with ``--verbose``."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README_LINE = re.compile(r"(\w+): model ([\d.]+)% median error, interpolation baseline "
                         r"([\d.]+)%")


@pytest.fixture(scope="module")
def tiny_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Two configurations of the bundled store on one H100: Meta-Llama-3-8B at its three
    lowest rates (one interior rate: one leave-one-rate-out fold) and DeepSeek-R1-Distill-
    Llama-8B at its two lowest (no interior rate); each predicts the other when left out."""
    with (ROOT / "data" / "profiles.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    keep = []
    for model, n in (("Meta-Llama-3-8B-Instruct", 3), ("DeepSeek-R1-Distill-Llama-8B", 2)):
        mine = sorted((r for r in rows if r["model"] == model and r["config"] == "1xH100-PCIe"),
                      key=lambda r: float(r["request_rate"]))
        keep += mine[:n]
    path = tmp_path_factory.mktemp("cv") / "tiny.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(keep)
    return str(path)


def test_cv_shows_progress_lines_off_a_terminal_and_the_answer_first(cli, tiny_store) -> None:
    res = cli("validate", "--cv", "--store", tiny_store)
    assert res.exit_code == 0, res.stderr
    err = res.stderr.splitlines()
    assert "fleetplan: leave-one-rate-out folds 1/1" in err, res.stderr
    assert ("fleetplan: leave-one-config-out folds 1/2: DeepSeek-R1-Distill-Llama-8B on "
            "1xH100-PCIe") in err
    assert ("fleetplan: leave-one-config-out folds 2/2: Meta-Llama-3-8B-Instruct on "
            "1xH100-PCIe") in err
    out = res.stdout.splitlines()
    assert out[0].startswith("leave-one-rate-out: ") and "(1 unflagged run held out)" in out[0]
    quoted = {m[1]: i for i, line in enumerate(out)
              if (m := README_LINE.fullmatch(line.strip()))}
    assert set(quoted) >= {"ttft_p99_ms", "request_throughput"}
    # the lines come before any table, and the per-run table waits for --verbose
    first_table = next(i for i, line in enumerate(out) if "━" in line)
    assert max(quoted.values()) < first_table
    assert "Predicted vs measured" not in res.stdout and "per run: --verbose" in res.stdout
    quiet = cli("validate", "--cv", "--store", tiny_store, "--quiet", "--verbose")
    assert quiet.exit_code == 0 and "folds" not in quiet.stderr
    assert "Predicted vs measured" in quiet.stdout

"""Evidence: how long the benchmark client took between two runs of one server.

Usage: python scripts/run_pauses.py [--store FILE]

Each result file of vLLM 0.8.5's ``benchmark_serving.py`` records ``date``, the second it was
saved (just after its run ended), and ``duration``, the run's length. The rates of a server ran
one after the other (32, 16, 8, 4, 1 req/s), so between two consecutive runs

    pause = date(next) - date(previous) - duration(next)

is what the client did before the next run began: start a new process, load the tokenizer,
sample the 200 prompts, and send one test request (the first prompt, its whole reply) to a
server with nothing else to do. This prints the pause before the 16 and the 1 req/s runs of
every configuration (the pause before 4 req/s holds the held-back 8 req/s run and is left out),
beside the 1 req/s run's TTFT p50, and the pauses' median per server kind. docs/replica-model.md
("The tensor-parallel RTX 4090 first-token delays: what they are") reads the table.
"""

from __future__ import annotations

import argparse
import statistics
from datetime import datetime

from fleetplan.profiles.store import load_profiles

ORDER = (32.0, 16.0, 8.0, 4.0, 1.0)  # the protocol's sequence of rates on one server


def kind(config: str) -> str:
    """'H100-PCIe, one GPU', 'RTX-4090, 4 GPUs' ...: the server kind a pause belongs to."""
    count, gpu = config.split("x", 1)
    return f"{gpu}, {'one GPU' if count == '1' else count + ' GPUs'}"


def pauses(frame) -> list[dict[str, object]]:  # type: ignore[no-untyped-def]
    """One row per configuration: the pauses (s) before its 16 and 1 req/s runs (the first
    series when a server ran the sequence twice) and its 1 req/s TTFT p50 (ms)."""
    rows = []
    for (model, config), g in frame.groupby(["model", "config"], sort=True):
        g = g.assign(t=[datetime.strptime(d, "%Y%m%d-%H%M%S") for d in g["date"]])
        g = g.sort_values("t")
        row: dict[str, object] = {"model": model, "config": config}
        prev = None
        for r in g.itertuples():
            if prev is not None and ORDER.index(r.request_rate) == ORDER.index(
                    prev.request_rate) + 1 and f"before_{r.request_rate:g}" not in row:
                row[f"before_{r.request_rate:g}"] = ((r.t - prev.t).total_seconds()
                                                     - r.duration_s)
            if r.request_rate == 1.0 and "ttft_p50_1" not in row:
                row["ttft_p50_1"] = r.ttft_p50_ms
            prev = r
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", default=None, help="profile store (default: the bundled one)")
    args = ap.parse_args()
    rows = pauses(load_profiles(args.store).frame)
    print(f"{'model':48s} {'config':12s} {'pause before 16':>15s} {'before 1':>9s} "
          f"{'TTFT p50 at 1 req/s':>20s}")
    by_kind: dict[str, list[float]] = {}
    for row in sorted(rows, key=lambda r: (kind(str(r["config"])), str(r["model"]))):
        p16, p1 = row.get("before_16"), row.get("before_1")
        cells = [f"{p:15.0f}" if isinstance(p, float) else f"{'-':>15s}" for p in (p16,)]
        cells += [f"{p1:9.0f}" if isinstance(p1, float) else f"{'-':>9s}"]
        t1 = row.get("ttft_p50_1")
        print(f"{row['model']!s:48s} {row['config']!s:12s} {' '.join(cells)} "
              f"{t1 if not isinstance(t1, float) else round(t1):>17} ms")
        by_kind.setdefault(kind(str(row["config"])), []).extend(
            p for p in (p16, p1) if isinstance(p, float))
    print("\nmedian pause per server kind (s): "
          + "; ".join(f"{k} {statistics.median(v):.0f} (n {len(v)}, {min(v):.0f}-{max(v):.0f})"
                      for k, v in sorted(by_kind.items())))


if __name__ == "__main__":
    main()

"""Evidence: how long the benchmark client took between two runs of one server.

Usage: python experiments/run_pauses.py [--store FILE]

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
from dataclasses import dataclass
from datetime import datetime

import pandas as pd

from fleetplan.profiles.store import load_profiles

ORDER = (32.0, 16.0, 8.0, 4.0, 1.0)  # the protocol's sequence of rates on one server


@dataclass(frozen=True)
class SeriesPauses:
    """The client's pauses (s) before a server's 16 and 1 req/s runs (the first series where
    the sequence ran twice; None where the store lacks the pair) and its 1 req/s TTFT p50."""

    model: str
    config: str
    before_16: float | None
    before_1: float | None
    ttft_p50_1_ms: float | None

    @property
    def kind(self) -> str:
        """'H100-PCIe, one GPU', 'RTX-4090, 4 GPUs' ...: the server kind."""
        count, gpu = self.config.split("x", 1)
        return f"{gpu}, {'one GPU' if count == '1' else count + ' GPUs'}"


def pauses(frame: pd.DataFrame) -> list[SeriesPauses]:
    """One record per configuration of a store's frame (module docstring)."""
    out = []
    for (model, config), g in frame.groupby(["model", "config"], sort=True):
        runs = sorted(zip((datetime.strptime(str(d), "%Y%m%d-%H%M%S") for d in g["date"]),
                          map(float, g["request_rate"]), map(float, g["duration_s"]),
                          map(float, g["ttft_p50_ms"]), strict=True))
        before: dict[float, float] = {}
        for (t0, rate0, _, _), (t, rate, duration, _) in zip(runs, runs[1:], strict=False):
            if (rate not in before and rate in ORDER and rate0 in ORDER
                    and ORDER.index(rate) == ORDER.index(rate0) + 1):
                before[rate] = (t - t0).total_seconds() - duration
        low = [ttft for _, rate, _, ttft in runs if rate == 1.0]
        out.append(SeriesPauses(str(model), str(config), before.get(16.0), before.get(1.0),
                                low[0] if low else None))
    return out


def _cell(v: float | None, width: int, unit: str = "") -> str:
    return f"{v:{width}.0f}{unit}" if v is not None else f"{'-':>{width}s}{unit}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", default=None, help="profile store (default: the bundled one)")
    args = ap.parse_args()
    rows = sorted(pauses(load_profiles(args.store).frame), key=lambda r: (r.kind, r.model))
    print(f"{'model':48s} {'config':12s} {'pause before 16':>15s} {'before 1':>9s} "
          f"{'TTFT p50 at 1 req/s':>20s}")
    by_kind: dict[str, list[float]] = {}
    for r in rows:
        print(f"{r.model:48s} {r.config:12s} {_cell(r.before_16, 15)} {_cell(r.before_1, 9)} "
              f"{_cell(r.ttft_p50_1_ms, 17, ' ms')}")
        by_kind.setdefault(r.kind, []).extend(
            p for p in (r.before_16, r.before_1) if p is not None)
    print("\nmedian pause per server kind (s): "
          + "; ".join(f"{k} {statistics.median(v):.0f} (n {len(v)}, {min(v):.0f}-{max(v):.0f})"
                      for k, v in sorted(by_kind.items()) if v))


if __name__ == "__main__":
    main()

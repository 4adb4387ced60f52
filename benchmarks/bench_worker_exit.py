"""Evidence: how long a pool's workers outlive a ``kill -9`` of the fleetplan command (issue 45).

Usage: python benchmarks/bench_worker_exit.py KIND [--runs N]   (Linux; KIND: solve, simulate,
frontier, calibrate, cv)

Starts the command with every process tagged by a unique environment variable, waits (polling)
until its pool's two workers run (for ``solve`` also a first cache entry; for ``frontier`` the
capacity step done, so the points' pool is the one killed), sends SIGKILL to the command, and
prints the seconds until no tagged process is left (polled every 2 ms; workers still there after
30 s are killed and listed) and the temporary files left in the run's cache folder. Runs use a
private cache folder (``/tmp/fleetplan-exit-KIND``: cold searches) with ``jit/`` linked to the
user's, so the compiled engine is loaded, not compiled. The scenarios are the bundled example
made slower (longer capacity runs for ``solve``, 3000 s x 4 replications for ``simulate``, 2000 s
verification runs for ``frontier``). docs/optimizer.md ("Executors") quotes the figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARK = "FLEETPLAN_TEST_RUN"
EXAMPLE = ROOT / "examples" / "hybrid-chat-batch.yaml"


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _tagged(tag: str) -> list[int]:
    out = []
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            env = Path(f"/proc/{e}/environ").read_bytes()
        except OSError:
            continue
        f = _stat(int(e))
        if f and f[0] != "Z" and f"{MARK}={tag}".encode() in env.split(b"\0"):
            out.append(int(e))
    return out


def _children(pid: int) -> list[int]:
    return [int(e) for e in os.listdir("/proc")
            if e.isdigit() and (f := _stat(int(e))) and f[1] == str(pid) and f[0] != "Z"]


def _scenarios(folder: Path) -> dict[str, Path]:
    text = EXAMPLE.read_text()
    sim = "sim: {duration_s: 300, warmup_s: 30, seed: 7, replications: 3}"
    assert sim in text
    base = "\n".join(line for line in text.splitlines()
                     if not line.startswith(("fleet:", "  - {config")))
    out = {
        "solve": base.replace(sim, "sim: {duration_s: 60, warmup_s: 10, seed: 7}\ncapacity: "
                              "{duration_s: 4000, min_requests: 40000, max_rps: 1000}"),
        "simulate": text.replace(sim, "sim: {duration_s: 3000, warmup_s: 30, seed: 7, "
                                 "replications: 4}"),
        "frontier": base.replace(sim, "sim: {duration_s: 2000, warmup_s: 10, seed: 7}"),
    }
    paths = {}
    for k, t in out.items():
        paths[k] = folder / f"{k}.yaml"
        paths[k].write_text(t + "\n")
    return paths


def once(kind: str, work: Path) -> str:
    cache = Path(f"/tmp/fleetplan-exit-{kind}")
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir()
    jit = Path(os.environ.get("FLEETPLAN_CACHE_DIR", Path.home() / ".cache" / "fleetplan")) / "jit"
    if jit.is_dir():
        (cache / "jit").symlink_to(jit)
    sc = _scenarios(work)
    args, need, after = {
        "solve": (["solve", str(sc["solve"]), "--executor", "local:2", "--quiet"], 1, None),
        "simulate": (["simulate", str(sc["simulate"]), "--executor", "local:2", "--quiet",
                      "--format", "json"], 0, None),
        "frontier": (["frontier", str(sc["frontier"]), "--sweep", "rate", "--points", "4",
                      "--progress", "--format", "json"], 0, "capacity searches"),
        "calibrate": (["calibrate", "--jobs", "2", "--out", str(work / "cal.json"), "--quiet"],
                      0, None),
        "cv": (["validate", "--cv", "--jobs", "2", "--format", "json"], 0, None),
    }[kind]
    tag = uuid.uuid4().hex
    err = work / "stderr.txt"
    env = {**os.environ, MARK: tag, "FLEETPLAN_CACHE_DIR": str(cache),
           "XDG_DATA_HOME": str(work / "data")}
    with open(err, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-c", "from fleetplan.cli.app import run; run()",
                                 *args], stdout=subprocess.DEVNULL, stderr=fh, env=env,
                                cwd=work, start_new_session=True)
    deadline = time.monotonic() + 120
    workers: list[int] = []
    while time.monotonic() < deadline and proc.poll() is None:
        if after is None or after in err.read_text():
            workers = _children(proc.pid)
            entries = [p for p in cache.rglob("*.json") if "jit" not in p.parts]
            if len(workers) >= 2 and len(entries) >= need:
                break
        time.sleep(0.02)
    if proc.poll() is not None:
        return f"{kind}: the command ended before its workers were seen"
    os.kill(proc.pid, signal.SIGKILL)
    t0 = time.monotonic()
    proc.wait()
    while _tagged(tag) and time.monotonic() - t0 < 30:
        time.sleep(0.002)
    dt = time.monotonic() - t0
    left = _tagged(tag)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    temps = [p.name for p in cache.rglob("*.tmp")]
    return (f"{kind}: {len(workers)} workers, gone {dt:.3f} s after kill -9; "
            f"left after 30 s: {left or 'none'}; temporary files: {temps or 'none'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kind", choices=["solve", "simulate", "frontier", "calibrate", "cv"])
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    if not sys.platform.startswith("linux"):
        sys.exit("reads /proc: Linux only")
    work = Path(f"/tmp/fleetplan-exit-{a.kind}-work")
    work.mkdir(exist_ok=True)
    for _ in range(a.runs):
        print(once(a.kind, work), flush=True)


if __name__ == "__main__":
    main()

"""Progress of long commands: on stderr only, when forced (--progress) or on a terminal;
never in stdout (the JSON is the same bytes either way)."""

from __future__ import annotations

import json

import pytest
import yaml

from fleetplan._progress import step, tracked_map
from fleetplan.optimize.executors import LocalExecutor, SerialExecutor

FAST = {
    "model": "DeepSeek-R1-Distill-Qwen-14B",
    "sim": {"duration_s": 240, "warmup_s": 60, "seed": 7, "replications": 2},
    "capacity": {"duration_s": 120, "warmup_s": 30, "min_requests": 300, "seeds": 2},
    "classes": [{"name": "chat", "rate_rps": 16, "slo": {"ttft_p99_ms": 1000}}],
}
SOLVE_STEPS = ("capacity searches", "round 1: MILP", "round 1: simulate the plan")


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, int | None]] = []

    def start(self, name: str, total: int | None = None) -> None:
        self.events.append(("start", name, total))

    def advance(self, name: str, amount: int = 1) -> None:
        self.events.append(("advance", name, amount))

    def finish(self, name: str) -> None:
        self.events.append(("finish", name, None))


def _square(x: int) -> int:
    return x * x


@pytest.mark.parametrize("executor", [SerialExecutor(), LocalExecutor(2)])
def test_tracked_map_keeps_order_and_reports_one_unit_per_item(executor) -> None:
    rec = Recorder()
    assert tracked_map(executor, _square, [3, 1, 2], rec, "jobs") == [9, 1, 4]
    assert rec.events == [("start", "jobs", 3), *[("advance", "jobs", 1)] * 3,
                          ("finish", "jobs", None)]
    assert tracked_map(executor, _square, [3, 1, 2], None, "jobs") == [9, 1, 4]


def test_a_failing_step_is_still_finished() -> None:
    rec = Recorder()
    with pytest.raises(ZeroDivisionError), step(rec, "boom", 2):
        1 / 0  # noqa: B018
    assert rec.events == [("start", "boom", 2), ("finish", "boom", None)]


@pytest.fixture
def scenario(tmp_path, monkeypatch, capacity_cache_dir) -> str:
    monkeypatch.setenv("FLEETPLAN_CACHE_DIR", capacity_cache_dir)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(FAST))
    return str(path)


def test_solve_progress_is_on_stderr_when_forced_and_absent_by_default(cli, scenario) -> None:
    args = ("solve", scenario, "--format", "json", "--no-timing", "--executor", "serial")
    plain = cli(*args)
    assert plain.exit_code == 0, plain.stderr
    assert not any(s in plain.stderr for s in SOLVE_STEPS)  # pytest's stderr is no terminal
    forced = cli(*args, "--progress")
    assert forced.exit_code == 0, forced.stderr
    for s in SOLVE_STEPS:
        assert s in forced.stderr, s
    assert forced.stdout == plain.stdout
    json.loads(forced.stdout)
    quiet = cli(*args, "--progress", "--quiet")
    assert not any(s in quiet.stderr for s in SOLVE_STEPS) and quiet.stdout == plain.stdout


def test_calibrate_progress_names_the_configuration_fits(cli, tmp_path) -> None:
    args = ("calibrate", "--model", "DeepSeek-R1-Distill-Qwen-1.5B", "--config", "1xH100-PCIe",
            "--max-nfev", "6", "--jobs", "1", "--format", "json")
    forced = cli(*args, "--out", str(tmp_path / "a.json"), "--progress")
    assert forced.exit_code == 0, forced.stderr
    assert "configuration fits: 1/1" in forced.stderr
    plain = cli(*args, "--out", str(tmp_path / "b.json"))
    assert "configuration fits" not in plain.stderr
    strip = [json.loads(r.stdout) for r in (forced, plain)]
    for d in strip:
        d.pop("out")
    assert strip[0] == strip[1]

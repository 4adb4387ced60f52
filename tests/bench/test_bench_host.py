"""The client host's CPUs over a run (bench/host.py): read where the host says, None elsewhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetplan.bench.host import HostFacts, cpu_limit, start_host_watch, throttled_s


def _v2(root: Path, cpu_max: str, stat: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "cpu.max").write_text(cpu_max + "\n")
    (root / "cpu.stat").write_text(stat)
    return root


def _v1(root: Path, quota: str, period: str, stat: str = "") -> Path:
    d = root / "cpu"
    d.mkdir(parents=True, exist_ok=True)
    (d / "cpu.cfs_quota_us").write_text(quota + "\n")
    (d / "cpu.cfs_period_us").write_text(period + "\n")
    (d / "cpu.stat").write_text(stat)
    return root


@pytest.mark.parametrize(("cpu_max", "want"), [("200000 100000", 2.0), ("50000 100000", 0.5),
                                               ("max 100000", None), ("junk", None),
                                               ("x 100000", None), ("0 100000", None)])
def test_a_cgroup_v2_limit_is_quota_over_period(tmp_path: Path, cpu_max: str,
                                                want: float | None) -> None:
    assert cpu_limit(_v2(tmp_path, cpu_max)) == want


@pytest.mark.parametrize(("quota", "want"), [("150000", 1.5), ("-1", None), ("abc", None)])
def test_a_cgroup_v1_limit_is_quota_over_period(tmp_path: Path, quota: str,
                                                want: float | None) -> None:
    assert cpu_limit(_v1(tmp_path, quota, "100000")) == want


def test_no_cgroup_files_say_nothing(tmp_path: Path) -> None:
    assert cpu_limit(tmp_path) is None and throttled_s(tmp_path) is None


def test_throttled_time_reads_either_cgroup_version(tmp_path: Path) -> None:
    v2 = _v2(tmp_path / "a", "max 100000", "nr_periods 10\nthrottled_usec 2500000\n")
    v1 = _v1(tmp_path / "b", "-1", "100000", "nr_throttled 3\nthrottled_time 4000000000\n")
    assert throttled_s(v2) == pytest.approx(2.5) and throttled_s(v1) == pytest.approx(4.0)
    bad = _v2(tmp_path / "c", "max 100000", "throttled_usec lots\n")
    assert throttled_s(bad) is None


def test_a_run_reports_the_throttling_it_saw_and_its_own_cpu(tmp_path: Path) -> None:
    root = _v2(tmp_path, "100000 100000", "throttled_usec 1000000\n")
    watch = start_host_watch(root)
    sum(i * i for i in range(200_000))  # some client CPU time
    (root / "cpu.stat").write_text("throttled_usec 1250000\n")
    facts = watch.stop()
    assert facts.cpu_limit == 1.0
    assert facts.throttled_ms == pytest.approx(250.0)  # the run's share, not the total
    assert facts.client_cpu_s is not None and facts.client_cpu_s > 0
    assert facts.client_cpu_share is not None and 0 < facts.client_cpu_share <= 1.5
    assert facts.cpus is not None and facts.cpus >= 1


def test_an_unknown_host_is_null_in_the_result() -> None:
    assert set(HostFacts().fields().values()) == {None}

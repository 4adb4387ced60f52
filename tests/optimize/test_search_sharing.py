"""Classes with the same workload share one capacity search (issue 10, part 5): one executor
item per (configuration, workload), whatever the classes are called and however many tiers."""

from __future__ import annotations

from fleetplan.optimize.inputs import build_problem
from fleetplan.scenario import scenario_from_dict

FAST = {"duration_s": 60, "warmup_s": 10, "min_requests": 100, "seeds": 1}


class Recorder:
    """An executor that runs items here and keeps them."""

    def __init__(self) -> None:
        self.items: list = []

    def map(self, fn, items):
        self.items += list(items)
        return [fn(x) for x in items]


def _classes(second_lengths: dict | None) -> list[dict]:
    lengths = {"input_tokens": {"dist": "uniform", "low": 100, "high": 300},
               "output_tokens": {"dist": "uniform", "low": 50, "high": 150}}
    return [{"name": "chat", "rate_rps": 2, "slo": {"ttft_p99_ms": 300}, **lengths},
            {"name": "agent", "rate_rps": 1, "slo": {"ttft_p99_ms": 1000},
             **(second_lengths or lengths)},
            {"name": "chat-eu", "rate_rps": 3, "slo": {"ttft_p99_ms": 300}, **lengths}]


def _items(classes: list[dict], tmp_path) -> list:
    sc = scenario_from_dict({"model": "DeepSeek-R1-Distill-Qwen-14B", "classes": classes,
                             "candidates": ["1xH100-PCIe"], "capacity": FAST})
    rec = Recorder()
    build_problem(sc, executor=rec, cache_dir=str(tmp_path))
    return rec.items


def test_classes_with_one_workload_share_one_search(tmp_path) -> None:
    (item,) = _items(_classes(None), tmp_path / "a")
    # the two SLOs (300 and 1000 ms) of the one workload: one search, the runs shared
    assert sorted(j.ttft_p99_ms for j in item) == [300.0, 1000.0]


def test_another_workload_is_another_search(tmp_path) -> None:
    other = {"input_tokens": {"dist": "uniform", "low": 1000, "high": 3000},
             "output_tokens": {"dist": "uniform", "low": 50, "high": 150}}
    items = _items(_classes(other), tmp_path / "b")
    assert len(items) == 2

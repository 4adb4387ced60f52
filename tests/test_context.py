"""A data context's files (profile store, calibration, cache folder) reach every reader because
they are passed down, never set for the whole process: two contexts used side by side each read
their own, a call given none reads the default files, and a capacity search run in a worker
process writes into the context's cache folder."""

from __future__ import annotations

import csv
import json
import multiprocessing as mp
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from fleetplan.catalog._tables import data_dir
from fleetplan.context import DataContext
from fleetplan.fleet.pools import build_pools
from fleetplan.optimize.inputs import build_problem, candidate_configs
from fleetplan.profiles.store import default_store_path, load_profiles
from fleetplan.replica.calibration_file import default_calibration_path
from fleetplan.replica.predict import resolve_params
from fleetplan.scenario import scenario_from_dict

MODEL = "DeepSeek-R1-Distill-Llama-8B"
CONFIG = "1xH100-PCIe"  # calibrated for MODEL in the bundled file
OTHER = "1xRTX-4090"  # measured for MODEL in the bundled store too
SCENARIO = {"model": MODEL,
            "classes": [{"name": "chat", "rate_rps": 1.0, "slo": {"ttft_p99_ms": 2000},
                         "input_tokens": {"dist": "fixed", "value": 300},
                         "output_tokens": {"dist": "fixed", "value": 50}}],
            "fleet": [{"config": CONFIG, "count": 1}]}


def _store(path: Path, configs: set[str]) -> Path:
    """The bundled store's runs of MODEL on ``configs`` only."""
    with (data_dir() / "profiles.csv").open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        rows = [r for r in reader if r["model"] == MODEL and r["config"] in configs]
        fields = reader.fieldnames or []
    assert {r["config"] for r in rows} == configs  # the bundled store measured them all
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    return path


def _calibration(path: Path, c_step: float) -> Path:
    """The bundled calibration with MODEL on CONFIG given the fixed step cost ``c_step``."""
    data = json.loads((data_dir() / "calibration.json").read_text(encoding="utf-8"))
    (entry,) = [e for e in data["configs"] if (e["model"], e["config"]) == (MODEL, CONFIG)]
    entry["params"]["c_step"] = c_step
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_a_context_names_the_files_read_and_none_means_the_defaults(tmp_path: Path) -> None:
    store, cal = tmp_path / "runs.csv", tmp_path / "cal.json"
    ctx = DataContext.build(store=store, calibration=cal)
    assert default_store_path(ctx.store) == store
    assert default_calibration_path(ctx.calibration) == cal
    # no context (the autouse fixture gives an empty user folder): the bundled files
    assert default_store_path(DataContext().store) == data_dir() / "profiles.csv"
    assert default_calibration_path(None) == data_dir() / "calibration.json"


def test_two_contexts_used_in_turn_each_read_their_own_store_and_calibration(
        tmp_path: Path) -> None:
    a = DataContext.build(store=_store(tmp_path / "a.csv", {CONFIG, OTHER}),
                          calibration=_calibration(tmp_path / "a.json", 0.011))
    b = DataContext.build(store=_store(tmp_path / "b.csv", {CONFIG}),
                          calibration=_calibration(tmp_path / "b.json", 0.022))
    sa, sb = scenario_from_dict(SCENARIO, context=a), scenario_from_dict(SCENARIO, context=b)
    bundled = json.loads((data_dir() / "calibration.json").read_text(encoding="utf-8"))
    (entry,) = [e for e in bundled["configs"] if (e["model"], e["config"]) == (MODEL, CONFIG)]
    plain = scenario_from_dict(SCENARIO)
    # interleaved, no block around any of them: what a process-wide default would break
    for sc, ctx, c_step, configs in ((sa, a, 0.011, [CONFIG, OTHER]), (sb, b, 0.022, [CONFIG]),
                                     (sa, a, 0.011, [CONFIG, OTHER]),
                                     (plain, None, entry["params"]["c_step"], None),
                                     (sb, b, 0.022, [CONFIG])):
        (pool,) = build_pools(sc, sc.fleet or [])
        assert pool.params.c_step == pytest.approx(c_step)
        assert resolve_params(MODEL, CONFIG, context=ctx).c_step == pytest.approx(c_step)
        if configs is not None:
            assert sorted(c for c, _regions, _max in candidate_configs(sc)) == sorted(configs)
    assert len(load_profiles(default=b.store)) < len(load_profiles(default=a.store))


def test_a_named_store_that_does_not_exist_is_an_error_naming_it(tmp_path: Path) -> None:
    from fleetplan.errors import DataError

    missing = tmp_path / "nope.csv"
    sc = scenario_from_dict(SCENARIO, context=DataContext.build(store=missing))
    with pytest.raises(DataError, match=f"{missing}: profile store not found"):
        build_pools(sc, sc.fleet or [])


class SpawnExecutor:
    """Runs items in freshly *spawned* processes: nothing of this process's state is there,
    only what travels with each item."""

    name = "spawn"

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        with ProcessPoolExecutor(2, mp_context=mp.get_context("spawn")) as pool:
            return list(pool.map(fn, items))


def test_a_capacity_search_in_a_worker_process_writes_into_the_contexts_cache(
        tmp_path: Path) -> None:
    folder = tmp_path / "ctx-cache"
    data = {**SCENARIO, "fleet": None, "candidates": [CONFIG],
            "capacity": {"duration_s": 60, "warmup_s": 10, "seeds": 1, "min_requests": 100,
                         "refine_steps": 0, "max_rps": 16}}
    sc = scenario_from_dict(data, context=DataContext.build(cache_dir=folder))
    first = build_problem(sc, executor=SpawnExecutor())
    entries = {p.parent.parent.name for p in folder.rglob("*.json")}
    assert "capacity" in entries  # written by the worker, into the context's folder
    # the same folder given again: every capacity is read back, no search is sent out
    again = build_problem(scenario_from_dict(data, context=DataContext.build(cache_dir=folder)),
                          executor=_Refusing())
    assert again.problem.capacity == first.problem.capacity


class _Refusing:
    name = "refusing"

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        assert not items, "a search was sent out although its capacity is cached"
        return []


def _without_entry(path: Path, model: str = MODEL, config: str = CONFIG) -> Path:
    """The bundled calibration less its entry of ``model`` on ``config`` (that pair
    uncalibrated)."""
    data = json.loads((data_dir() / "calibration.json").read_text(encoding="utf-8"))
    data["configs"] = [e for e in data["configs"] if (e["model"], e["config"]) != (model, config)]
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_the_data_options_reach_simulate_predict_and_report(tmp_path: Path, cli: Any) -> None:
    import yaml

    sc = tmp_path / "s.yaml"
    sc.write_text(yaml.safe_dump({**SCENARIO, "sim": {"duration_s": 60, "warmup_s": 10,
                                                      "replications": 1}}))
    cal = str(_without_entry(tmp_path / "cal.json"))
    for args, calibrated in (((), True), (("--calibration", cal), False)):
        res = cli("simulate", str(sc), "--format", "json", "--quiet", *args)
        assert res.exit_code == 0, res.stderr
        assert json.loads(res.stdout)["pools"][0]["calibrated"] is calibrated
        res = cli("predict", "--model", MODEL, "--config", CONFIG, "--rate", "1",
                  "--num-prompts", "20", "--seeds", "1", "--format", "json", *args)
        assert res.exit_code == 0, res.stderr
        assert json.loads(res.stdout)["calibrated"] is calibrated
    # a named file that is not there is refused in one line that names it, never replaced by
    # the default one
    for option, name in (("--store", "runs.csv"), ("--calibration", "cal-missing.json")):
        missing = str(tmp_path / name)
        res = cli("simulate", str(sc), "--format", "json", "--quiet", option, missing)
        assert res.exit_code == 2 and missing in res.stderr
        assert len(res.stderr.strip().splitlines()) == 1, res.stderr

    # report: the accuracy table of a bundled example's plan, read with the scenario's files
    root = Path(__file__).resolve().parents[1]
    plan = root / "tests/data/golden/azure-trace.solve.json"  # a plan on CONFIG
    example = root / "examples/azure-trace.yaml"
    cal = str(_without_entry(tmp_path / "cal-14b.json", "DeepSeek-R1-Distill-Qwen-14B", CONFIG))
    for args, words in (((), "calibrated"),
                        (("--calibration", cal), "spec-based (not calibrated)")):
        page = tmp_path / f"r{len(args)}.html"
        res = cli("report", str(plan), "-s", str(example), "--out", str(page), *args)
        assert res.exit_code == 0, res.stderr
        assert f"<tr><td>{CONFIG}</td><td>{words}</td>" in page.read_text(encoding="utf-8")


@pytest.mark.parametrize("command", [
    ["validate"], ["validate", "--cv"], ["calibrate", "--out", "{out}"]])
def test_a_read_only_command_refuses_a_store_that_is_not_there(cli, tmp_path: Path,
                                                               command: list[str]) -> None:
    # a missing --store was read as an empty store: validate exited 2 without a word, calibrate
    # exited 0 and wrote an empty calibration; only ingest and bench --ingest start a new store
    out = tmp_path / "cal.json"
    missing = tmp_path / "runs.csv"
    args = [a.replace("{out}", str(out)) for a in command]
    res = cli(*args, "--store", str(missing))
    assert res.exit_code == 2
    assert res.stderr.strip() == f"fleetplan: error: --store {missing}: no such file"
    assert not out.exists() and not missing.exists()

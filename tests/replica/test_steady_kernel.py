"""The compiled steady-state engine (fleetplan.replica.steady_kernel) is the SimPy reference
engine's run, request by request: every first-token, finish and admission time, the stop, its
clock and the engine's busy and power-activity seconds, bit for bit. Small KV caches make it
preempt, prefix hits and chunked prefills change the admission arithmetic, and early stops and
overload limits end runs at the same instant."""

from __future__ import annotations

import inspect
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.catalog import HardwareConfig, bundled_catalog
from fleetplan.errors import ModelError
from fleetplan.replica.engine import ReplicaEngine, Request
from fleetplan.replica.priors import prior_params
from fleetplan.replica.steady import _run_simpy, _watch, steady_state
from fleetplan.replica.steady_kernel import STOP_ABOVE, STOP_DONE, STOP_OVERLOAD, run_steady

BASE = prior_params(bundled_catalog().model("DeepSeek-R1-Distill-Qwen-14B"),
                    HardwareConfig.parse("1xH100-PCIe"))


def _inputs(seed: int, n: int, rate: float, max_in: int, max_out: int, hit_share: float):
    rng = np.random.default_rng(seed)
    arr = np.cumsum(rng.gamma(0.5, 2.0 / rate, n))
    ins = rng.integers(1, max_in, n)
    outs = rng.integers(1, max_out, n)
    hits = np.floor(hit_share * ins).astype(np.int64)
    measured = (arr >= arr[n // 10]) & (arr < arr[-n // 5])
    return arr, ins, outs, hits, measured


def _both(params, arr, ins, outs, hits, measured, limit, stop_above=None):
    n_multi = int((measured & (outs > 1)).sum())
    watch = [(name, lim, need) for name, lim, need, _ in
             _watch(stop_above or {}, int(measured.sum()), n_multi)]
    a = run_steady(arr, ins, outs, hits, measured, params=params, limit=limit, watch=watch)
    b = _run_simpy(arr, ins, outs, hits, measured, params=params, limit=limit, watch=watch)
    return a, b


def _assert_same(a, b) -> None:
    for x, y in zip(a[:3], b[:3], strict=True):
        assert np.array_equal(x, y, equal_nan=True)
    assert tuple(a[3:]) == tuple(b[3:])


def _preemptions(params, arr, ins, outs) -> int:
    env = simpy.Environment()
    eng = ReplicaEngine(env, params, record_itl=False)
    for i, (t, a, b) in enumerate(zip(arr.tolist(), ins.tolist(), outs.tolist(), strict=True)):
        eng.submit(Request(i, t, a, b), at=t)
    env.run()
    return eng.stats.preemptions


@pytest.mark.parametrize("kv,seqs,budget,hit", [
    (3000, 256, 2048, 0.0), (6000, 32, 512, 0.0), (6000, 256, 256, 0.9), (100_000, 8, 2048, 0.5),
])
@pytest.mark.parametrize("state", [0, 25])
def test_the_compiled_run_is_the_reference_run(kv, seqs, budget, hit, state):
    """``state`` 25: every running sequence also holds 25 blocks (400 tokens' worth) of
    fixed-size state; the small caches then hold a handful of sequences."""
    kv += state * 16 * 4  # room for four states more
    params = BASE.with_(kv_capacity_tokens=kv, max_num_seqs=seqs, max_num_batched_tokens=budget,
                        max_model_len=1500, seq_state_blocks=state)
    arr, ins, outs, hits, measured = _inputs(3, 1500, 6.0, 900, 500, hit)
    a, b = _both(params, arr, ins, outs, hits, measured, limit=10_000)
    _assert_same(a, b)
    assert a[3] == STOP_DONE
    if kv <= 8000 and hit == 0.0:  # the small caches preempt: the test covers that path
        assert _preemptions(params, arr, ins, outs) > 0


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), rate=st.sampled_from([0.5, 4.0, 20.0, 80.0]),
       kv=st.sampled_from([2500, 8000, 200_000]), seqs=st.sampled_from([4, 64, 256]),
       budget=st.sampled_from([256, 1024, 8192]), hit=st.sampled_from([0.0, 0.6, 1.0]),
       overhead=st.sampled_from([0.0, 0.003]), limit=st.sampled_from([64, 400, 100_000]),
       stop=st.sampled_from([None, {"ttft_p99_ms": 100.0}, {"tpot_p99_ms": 30.0},
                             {"e2e_p99_ms": 8000.0, "ttft_p99_ms": 2000.0}]),
       state=st.sampled_from([0, 0, 2, 30]))
def test_the_compiled_run_is_the_reference_run_for_any_settings(seed, rate, kv, seqs, budget, hit,
                                                                overhead, limit, stop, state):
    """``state``: the KV blocks every running sequence's fixed-size state holds (a model with
    linear-attention layers), which both engines charge at admission and free at preemption
    and completion."""
    seqs = min(seqs, budget)
    params = BASE.with_(kv_capacity_tokens=kv, max_num_seqs=seqs, max_num_batched_tokens=budget,
                        overhead_s=overhead, max_model_len=1200, seq_state_blocks=state)
    arr, ins, outs, hits, measured = _inputs(seed, 400, rate, 700, 400, hit)
    a, b = _both(params, arr, ins, outs, hits, measured, limit=limit, stop_above=stop)
    _assert_same(a, b)
    assert a[3] in (STOP_DONE, STOP_OVERLOAD, STOP_ABOVE)


@pytest.mark.parametrize("rate,stop,state", [(3.0, None, 0), (40.0, None, 0),
                                              (12.0, {"ttft_p99_ms": 80.0}, 0),
                                              (3.0, None, 600), (20.0, None, 600)])
def test_steady_state_gives_the_same_result_on_either_engine(rate, stop, state):
    """``state`` 600: every sequence holds 600 blocks (9,600 tokens' worth) of fixed-size
    state, so the cache runs at most 24 sequences at once (queueing at 3 req/s, overloaded
    at 20)."""
    params = BASE.with_(seq_state_blocks=state)
    kw = dict(rate=rate, duration_s=200, warmup_s=20, seed=4, stop_above=stop,
              prefix_cache_hit=0.3)
    a = steady_state(params, **kw)
    b = steady_state(params, engine="simpy", **kw)
    assert json.dumps(a.to_dict()) == json.dumps(b.to_dict())


def test_a_request_the_engine_refuses_is_refused_with_its_message():
    arr, ins, outs, hits, measured = _inputs(1, 50, 2.0, 300, 300, 0.0)
    ins[7] = 5000
    with pytest.raises(ModelError, match=r"request 7: 5000 \+ \d+ tokens exceed max_model_len"):
        run_steady(arr, ins, outs, hits, measured, params=BASE.with_(max_model_len=4096),
                   limit=100, watch=[])
    with pytest.raises(Exception, match="engine"):
        steady_state(BASE, rate=1.0, engine="fast")


def _double(x):
    return 2 * x


def test_the_compiled_code_is_cached_in_the_cache_folder_and_never_beside_the_package(
        tmp_path, monkeypatch):
    from pathlib import Path

    from fleetplan.replica import steady_kernel

    package = Path(steady_kernel.__file__).parent
    here = Path(__file__).parent  # where Numba's in-tree fallback would cache _double

    def beside() -> set[Path]:
        return set(package.rglob("*.nb[ic]")) | set(here.rglob("*.nb[ic]"))

    before = beside()
    monkeypatch.delenv("FLEETPLAN_NO_JIT", raising=False)  # this test is about compiling
    monkeypatch.setenv("FLEETPLAN_CACHE_DIR", str(tmp_path / "cache"))
    assert steady_kernel._compile(_double)(21) == 42
    assert list((tmp_path / "cache" / "jit").rglob("*.nbi"))  # cached where the docs say
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv("FLEETPLAN_CACHE_DIR", str(blocked / "cache"))  # cannot be a folder
    assert steady_kernel._compile(_double)(4) == 8  # compiled in memory instead
    assert beside() == before


@pytest.mark.parametrize("params,kw", [
    # arrivals 3e-14 s apart with no overhead: the later one is the source's next check, not
    # submitted yet when the engine's timer fires, so it is not admitted in that step
    ({"overhead_s": 0.0}, dict(rate=4.0, burstiness=0.01, duration_s=120, warmup_s=0, seed=5)),
    # the engine idles from 18.5 s; the idle wake-up is armed at the submission's clock
    ({}, dict(rate=0.5, burstiness=0.01, duration_s=60, warmup_s=0, seed=34,
              overload_queue_s=1.0)),
    # ~1e5 s in, a timeout lands an ulp past the clock it was asked for
    ({}, dict(rate=0.001, duration_s=1e7, warmup_s=60, seed=0)),
])
def test_edge_runs_are_the_reference_run(params, kw):
    from fleetplan.replica import replica_params

    p = replica_params("DeepSeek-R1-Distill-Qwen-14B", "1xH100-PCIe").with_(**params)
    a = steady_state(p, **kw)
    b = steady_state(p, engine="simpy", **kw)
    assert json.dumps(a.to_dict()) == json.dumps(b.to_dict())


def test_a_bad_request_the_run_never_reaches_is_not_refused():
    from fleetplan.workload.lengths import EmpiricalLengths, FixedLengths, LengthModel

    lm = LengthModel(input=EmpiricalLengths(values=(100,) * 99 + (3000,)),
                     output=FixedLengths(value=50))
    p = BASE.with_(max_model_len=2048)
    kw = dict(rate=1.0, duration_s=60, warmup_s=0, seed=3, lengths=lm)
    a = steady_state(p, **kw)  # a 3000-token prompt is drawn after the run ends
    b = steady_state(p, engine="simpy", **kw)
    assert a.stable and json.dumps(a.to_dict()) == json.dumps(b.to_dict())


@pytest.mark.parametrize("kw", [
    {"overload_queue_s": 0}, {"overload_queue_s": float("nan")}, {"overload_queue_s": None},
    {"seed": -1}, {"seed": 1.5}, {"seed": True}, {"rate": True}, {"rate": "2"},
    {"duration_s": "100"}, {"duration_s": float("inf")}, {"burstiness": "1"},
    {"stop_above": ["ttft_p99_ms"]}, {"stop_above": 0}, {"lengths": "protocol"},
    {"engine": "fast", "rate": 1e9},
])
def test_bad_arguments_are_refused_in_one_line(kw):
    from fleetplan.errors import InputError

    args = dict(rate=2.0, duration_s=100, warmup_s=10)
    args.update(kw)
    with pytest.raises(InputError) as exc:
        steady_state(BASE, **args)
    assert "\n" not in str(exc.value)


class _Steps:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def start(self, name: str, total: int | None = None) -> None:
        self.events.append(("start", name))

    def advance(self, name: str, amount: int = 1) -> None:
        self.events.append(("advance", name))

    def finish(self, name: str) -> None:
        self.events.append(("finish", name))


def test_the_engine_is_prepared_once_per_process_as_a_step_of_its_own(monkeypatch) -> None:
    import fleetplan.replica.steady_kernel as kernel

    monkeypatch.setattr(kernel, "_LOOP", [])  # as in a new process (loads the machine code)
    rec = _Steps()
    first = steady_state(BASE, rate=2.0, duration_s=120, warmup_s=30, progress=rec)
    assert rec.events == [("start", kernel.PREPARE_STEP), ("finish", kernel.PREPARE_STEP)]
    again = steady_state(BASE, rate=2.0, duration_s=120, warmup_s=30, progress=rec)
    assert len(rec.events) == 2  # ready: nothing more to report
    assert first.to_dict() == again.to_dict() == steady_state(
        BASE, rate=2.0, duration_s=120, warmup_s=30).to_dict()


def test_predict_steady_shows_the_preparation_on_stderr_only(cli, monkeypatch) -> None:
    import fleetplan.replica.steady_kernel as kernel

    args = ("predict", "-m", "DeepSeek-R1-Distill-Qwen-14B", "-c", "1xH100-PCIe", "-r", "2",
            "--steady", "--format", "json")
    monkeypatch.setattr(kernel, "_LOOP", [])
    shown = cli(*args, "--progress")
    assert shown.exit_code == 0, shown.stderr
    assert kernel.PREPARE_STEP in shown.stderr and kernel.PREPARE_STEP not in shown.stdout
    monkeypatch.setattr(kernel, "_LOOP", [])
    quiet = cli(*args, "--progress", "--quiet")
    assert kernel.PREPARE_STEP not in quiet.stderr and quiet.stdout == shown.stdout


def test_an_edit_of_any_file_compiled_into_the_loop_changes_its_cache_folder(tmp_path):
    """Numba's cache checks only the decorated function's file; a helper edited in another
    file must not load machine code compiled from the old helper."""
    from fleetplan.replica import steady_arrays, steady_kernel, steady_loop

    called = {sys.modules[v.__module__].__file__ for m in (steady_loop, steady_arrays)
              for v in vars(m).values()
              if inspect.isfunction(v) and v.__module__.startswith("fleetplan.")}
    assert {Path(f).name for f in called} == set(steady_kernel.LOOP_SOURCES)
    package = Path(steady_kernel.__file__).parent
    for name in steady_kernel.LOOP_SOURCES:
        shutil.copy(package / name, tmp_path / name)
    assert steady_kernel._source_tag(tmp_path) == steady_kernel._source_tag(package)
    for name in steady_kernel.LOOP_SOURCES:
        edited = tmp_path / f"edited-{name}"
        edited.mkdir()
        for other in steady_kernel.LOOP_SOURCES:
            shutil.copy(package / other, edited / other)
        with (edited / name).open("a") as f:
            f.write("\n# an edit\n")
        assert steady_kernel._source_tag(edited) != steady_kernel._source_tag(package), name


def _triple(x):
    return 3 * x


@pytest.mark.parametrize("damage", ["truncated", "empty", "garbage"])
def test_a_damaged_compiled_code_cache_means_compiling_again_with_one_warning(
        tmp_path, monkeypatch, caplog, damage):
    from fleetplan.replica import steady_kernel

    monkeypatch.delenv("FLEETPLAN_NO_JIT", raising=False)  # this test is about compiling
    monkeypatch.delenv("FLEETPLAN_JIT_CACHE", raising=False)
    monkeypatch.setenv("FLEETPLAN_CACHE_DIR", str(tmp_path / "cache"))
    _, y = steady_kernel.first_call(_triple, (2,))
    assert y == 6 and not caplog.records
    files = sorted((tmp_path / "cache" / "jit").rglob("*.nb[ic]"))
    assert len(files) == 2  # the index and the machine code
    for f in files:
        body = f.read_bytes()
        f.write_bytes({"truncated": body[:10], "empty": b"",
                       "garbage": bytes(range(256)) * 8}[damage])
    fn, y = steady_kernel.first_call(_triple, (5,))  # a later process's first call
    assert y == 15 and fn(7) == 21
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "could not be read" in warnings[0] \
        and "compiling it again" in warnings[0], warnings
    # the cache was written anew: the next first call loads it without a word
    caplog.clear()
    assert steady_kernel.first_call(_triple, (1,))[1] == 3 and not caplog.records
    assert len(sorted((tmp_path / "cache" / "jit").rglob("*.nb[ic]"))) == 2


def test_an_error_of_the_compiled_code_itself_is_not_taken_for_a_damaged_cache(
        tmp_path, monkeypatch):
    from fleetplan.replica import steady_kernel

    monkeypatch.delenv("FLEETPLAN_NO_JIT", raising=False)
    monkeypatch.setenv("FLEETPLAN_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(Exception, match="(?i)typing|cannot determine|resolution"):
        steady_kernel.first_call(_triple, (object(),))

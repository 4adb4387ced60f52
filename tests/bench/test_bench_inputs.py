"""What the benchmark sends (datasets, length options) and how it reads GPU power."""

from __future__ import annotations

import json
import sys
import time
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fleetplan.bench.power import open_power
from fleetplan.bench.requests import WORDS, load_dataset, parse_length_dist, synthetic_requests
from fleetplan.errors import InputError
from fleetplan.workload.lengths import FixedLengths, LengthModel, UniformLengths


def rng() -> np.random.Generator:
    return np.random.default_rng(0)


def test_synthetic_prompts_have_the_drawn_word_counts() -> None:
    lm = LengthModel(input=UniformLengths(low=5, high=50, min=5, max=50),
                     output=FixedLengths(value=9))
    reqs = synthetic_requests(30, lm, rng())
    assert all(len(r.prompt.split()) == r.prompt_tokens for r in reqs)
    assert all(set(r.prompt.split()) <= set(WORDS) for r in reqs)
    assert {r.max_tokens for r in reqs} == {9}


def test_jsonl_csv_and_sharegpt_datasets(tmp_path: Path) -> None:
    jl = tmp_path / "p.jsonl"
    jl.write_text('{"prompt": "a b c", "output_tokens": 5}\n\n{"prompt": "d e", "max_tokens": 7}\n')
    reqs = load_dataset(jl, 5, rng())
    assert len(reqs) == 5 and {r.max_tokens for r in reqs} == {5, 7}
    csv = tmp_path / "p.csv"
    csv.write_text('prompt,output_tokens\n"hello, world",3\nbye,4\n')
    assert {r.prompt for r in load_dataset(csv, 2, rng())} == {"hello, world", "bye"}
    sg = tmp_path / "sharegpt.json"
    sg.write_text(json.dumps([
        {"conversations": [{"from": "human", "value": "why is the sky blue"},
                           {"from": "gpt", "value": "because of Rayleigh scattering"}]},
        {"conversations": [{"from": "human", "value": "only one turn"}]},
    ]))
    (req,) = load_dataset(sg, 1, rng())
    assert req.prompt == "why is the sky blue" and req.max_tokens == 4
    (req,) = load_dataset(sg, 1, rng(), output_len=FixedLengths(value=64))
    assert req.max_tokens == 64


def test_dataset_order_is_seeded_and_covers_the_file_before_repeating(tmp_path: Path) -> None:
    jl = tmp_path / "p.jsonl"
    jl.write_text("".join(json.dumps({"prompt": f"p{i}", "output_tokens": 2}) + "\n"
                          for i in range(10)))
    a = [r.prompt for r in load_dataset(jl, 15, np.random.default_rng(3))]
    b = [r.prompt for r in load_dataset(jl, 15, np.random.default_rng(3))]
    assert a == b and len(set(a[:10])) == 10


@pytest.mark.parametrize("text, msg", [
    ('{"prompt": "x"}\n', "no output length"),
    ('{"prompt": ""}\n', "no non-empty 'prompt'"),
    ('{"prompt": "x", "output_tokens": "many"}\n', "not an integer"),
    ("not json\n", "not valid JSON"),
    ("", "no usable prompt"),
])
def test_bad_datasets_are_refused_with_the_line(tmp_path: Path, text: str, msg: str) -> None:
    p = tmp_path / "bad.jsonl"
    p.write_text(text)
    with pytest.raises(InputError, match=msg):
        load_dataset(p, 1, rng())


def test_length_options() -> None:
    assert parse_length_dist("128") == FixedLengths(value=128)
    assert parse_length_dist("uniform:10-20").mean == 15
    assert parse_length_dist("lognormal:mean=208,cv=0.5").mean == 208
    with pytest.raises(InputError, match="--output-len 'lognormal:cv=1'.*mean"):
        parse_length_dist("lognormal:cv=1", "--output-len")


def test_without_nvml_power_is_unknown_not_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    rep = open_power("nvml").stop()
    assert rep.status == "unknown" and "not installed" in rep.source
    assert rep.gpu_energy_j is None and rep.gpu_avg_power_w is None
    assert "--power none" in open_power("none").stop().source


class _FakeNvml(types.ModuleType):
    """pynvml's calls used by fleetplan, over two GPUs drawing 100 W and 300 W."""

    class NVMLError(Exception):
        pass

    def __init__(self, counter: bool = True) -> None:
        super().__init__("pynvml")
        self.counter, self.t0, self.shut = counter, time.perf_counter(), False
        self.watts = [100.0, 300.0]

    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names
        pass

    def nvmlShutdown(self) -> None:  # noqa: N802
        self.shut = True

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return 2

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:  # noqa: N802
        return i

    def nvmlDeviceGetName(self, h: int) -> bytes:  # noqa: N802
        return b"NVIDIA H100 PCIe"

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:  # noqa: N802
        return int(self.watts[h] * 1000)

    def nvmlDeviceGetTotalEnergyConsumption(self, h: int) -> int:  # noqa: N802
        if not self.counter:
            raise self.NVMLError("not supported")
        return int(5e6 + self.watts[h] * (time.perf_counter() - self.t0) * 1000)


@pytest.mark.parametrize("counter", [True, False])
def test_nvml_energy_from_counters_or_samples(monkeypatch: pytest.MonkeyPatch,
                                             counter: bool) -> None:
    fake = _FakeNvml(counter)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    mon = open_power("nvml", interval_s=0.02)
    mon.start()
    time.sleep(0.5)
    rep = mon.stop()
    assert rep.status == "measured" and fake.shut
    assert rep.gpu_names == ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe")
    assert rep.source.endswith("deltas") == counter
    assert rep.gpu_avg_power_w == pytest.approx(400.0, rel=0.02)
    assert rep.gpu_energy_j_per_gpu is not None
    assert rep.gpu_energy_j_per_gpu[1] == pytest.approx(3 * rep.gpu_energy_j_per_gpu[0], rel=0.1)
    assert rep.gpu_sampled_power_mean_w == pytest.approx(400.0)
    assert rep.samples >= 5


def test_nvml_refuses_unknown_gpu_indices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _FakeNvml())
    rep: Any = open_power("nvml", gpu_indices=[0, 5]).stop()
    assert rep.status == "unknown" and "[5]" in rep.source


@pytest.mark.parametrize("text, msg", [
    ('{"prompt": "x", "output_tokens": 1000000000000}\n', "must be from 1 to 100000000"),
    ('{"prompt": "x", "output_tokens": "1_000"}\n', "not an integer"),
    ('{"prompt": "x", "output_tokens": "\\u0661\\u0662"}\n', "not an integer"),
    ('{"prompt": "x", "output_tokens": true}\n', "not an integer"),
    ('{"prompt": "x", "output_tokens": 5.5}\n', "not an integer"),
    ("[" * 100_000 + "\n", "nested too deeply"),
    ('{"a": ' * 100_000 + "\n", "nested too deeply"),
])
def test_datasets_with_hostile_values_are_refused_with_one_line(tmp_path: Path, text: str,
                                                                 msg: str) -> None:
    p = tmp_path / "bad.jsonl"
    p.write_text(text)
    with pytest.raises(InputError, match=msg) as info:
        load_dataset(p, 1, rng())
    assert "\n" not in str(info.value) and len(str(info.value)) < 400


def test_a_csv_field_beyond_the_csv_limit_is_one_line(tmp_path: Path) -> None:
    p = tmp_path / "big.csv"
    p.write_text('prompt,output_tokens\n"' + "x" * 200_000 + '",3\n')
    with pytest.raises(InputError, match="line .*not valid CSV"):
        load_dataset(p, 1, rng())


def test_a_fifo_or_a_directory_as_dataset_is_refused_before_reading(tmp_path: Path) -> None:
    import os
    import threading

    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    errors: list[str] = []

    def load(p: Path) -> None:
        try:
            load_dataset(p, 1, rng())
        except InputError as exc:
            errors.append(str(exc))

    for p in (fifo, tmp_path):
        t = threading.Thread(target=load, args=(p,), daemon=True)
        t.start()
        t.join(20)  # a read of the FIFO would block here: a guard, not a timing
        assert not t.is_alive()
    assert "FIFO" in errors[0] and "directory" in errors[1]


@pytest.mark.parametrize("text, msg", [
    ("\u0661\u0662\u0668", "no ':'"),  # Arabic-Indic digits are not a token count
    ("fixed:1_000", "not a whole number"),
    ("fixed:99999999999", "more than 100000000 tokens"),
    ('{"dist": "empirical", "values": [5, 1000000000]}', "more than 100000000 tokens"),
    ("lognormal:mean=208,cv", "not key=value"),
    ("{" * 50_000, "--input-len"),
])
def test_length_options_refuse_hostile_spellings(text: str, msg: str) -> None:
    with pytest.raises(InputError, match=msg) as info:
        parse_length_dist(text, "--input-len")
    assert len(str(info.value)) < 400


def test_synthetic_prompts_are_bounded_before_they_are_built() -> None:
    lm = LengthModel(input=FixedLengths(value=100_000, max=100_000),
                     output=FixedLengths(value=2))
    with pytest.raises(InputError, match=r"1000 synthetic prompts would hold 100000000 words"):
        synthetic_requests(1000, lm, rng())

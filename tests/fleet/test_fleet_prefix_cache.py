"""A class's stated prefix-cache hit rate: validated, plumbed into the replicas, deterministic."""

from __future__ import annotations

import json

import pytest
from fleet_cases import MODEL, base_dict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetplan.errors import InputError
from fleetplan.fleet import simulate
from fleetplan.scenario import scenario_from_dict

LAW = settings(max_examples=5, deadline=None, derandomize=True,
               suppress_health_check=[HealthCheck.too_slow])


def _one_class(hit: float, rate: float, seed: int, count: int = 1):
    return scenario_from_dict({
        "model": MODEL,
        "classes": [{"name": "chat", "rate_rps": rate, "prefix_cache_hit": hit,
                     "slo": {"ttft_p99_ms": 200}}],
        "fleet": [{"config": "1xH100-PCIe", "count": count}],
        "routing": "slo-aware",
        "sim": {"duration_s": 80, "warmup_s": 10, "seed": seed, "replications": 2},
    })


def _half(c) -> float:
    lo, hi = c.ttft_p99_ci_ms
    return (hi - lo) / 2 if lo is not None else 0.0


@LAW
@given(lo=st.floats(0.0, 1.0), up=st.floats(0.0, 1.0), rate=st.sampled_from([1.0, 4.0]),
       seed=st.integers(0, 2**31))
def test_raising_the_hit_rate_never_raises_p99_ttft_beyond_noise(lo, up, rate, seed) -> None:
    hi = lo + (1.0 - lo) * up
    a = simulate(_one_class(lo, rate, seed)).classes[0]
    b = simulate(_one_class(hi, rate, seed)).classes[0]
    noise = max(_half(a), _half(b))
    assert b.ttft_p99_ms <= a.ttft_p99_ms + noise + 1.0, (lo, hi, a.ttft_p99_ms, b.ttft_p99_ms)


def test_cached_prompts_lower_simulated_ttft_on_the_same_requests() -> None:
    fresh = simulate(_one_class(0.0, 2.0, 1, count=2))
    cached = simulate(_one_class(1.0, 2.0, 1, count=2))
    assert cached.classes[0].ttft_p99_ms < 0.8 * fresh.classes[0].ttft_p99_ms
    assert cached.classes[0].requests == fresh.classes[0].requests  # same draws


def test_default_hit_is_fresh_prompts_and_output_stays_deterministic() -> None:
    plain = base_dict()
    zero = base_dict()
    zero["classes"][0]["prefix_cache_hit"] = 0.0
    a = json.dumps(simulate(scenario_from_dict(plain)).to_dict(), sort_keys=True)
    b = json.dumps(simulate(scenario_from_dict(zero)).to_dict(), sort_keys=True)
    assert a == b
    half = base_dict()
    half["classes"][0]["prefix_cache_hit"] = 0.5
    c1 = json.dumps(simulate(scenario_from_dict(half)).to_dict(), sort_keys=True)
    c2 = json.dumps(simulate(scenario_from_dict(half)).to_dict(), sort_keys=True)
    assert c1 == c2


@pytest.mark.parametrize(("value", "expected"), [
    (1.5, "classes[0].prefix_cache_hit = 1.5: Input should be less than or equal to 1"),
    (-0.25, "classes[0].prefix_cache_hit = -0.25: Input should be greater than or equal to 0"),
    ("0.5", "classes[0].prefix_cache_hit = '0.5': Input should be a valid number"),
    (float("nan"), "classes[0].prefix_cache_hit = nan: Input should be a finite number"),
])
def test_out_of_range_hit_is_one_line_with_the_full_path(value, expected) -> None:
    d = base_dict()
    d["classes"][0]["prefix_cache_hit"] = value
    with pytest.raises(InputError) as e:
        scenario_from_dict(d, "s.yaml")
    msg = str(e.value)
    assert "\n" not in msg and expected in msg


def test_hit_one_is_accepted_as_an_integer_and_defaults_to_zero() -> None:
    d = base_dict()
    d["classes"][1]["prefix_cache_hit"] = 1
    sc = scenario_from_dict(d)
    assert sc.classes[0].prefix_cache_hit == 0.0 and sc.classes[1].prefix_cache_hit == 1.0

"""Laws of the fleet simulator (hypothesis): more capacity never hurts, more load never idles."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetplan.fleet import simulate
from fleetplan.scenario import scenario_from_dict

MODEL = "DeepSeek-R1-Distill-Qwen-14B"
LAW = settings(max_examples=6, deadline=None, derandomize=True,
               suppress_health_check=[HealthCheck.too_slow])
LENGTHS = {"input_tokens": {"dist": "lognormal", "mean": 200, "cv": 0.8, "max": 1000},
           "output_tokens": {"dist": "lognormal", "mean": 60, "cv": 0.5, "max": 300}}


def _scenario(config: str, count: int, rates: list[float], routing: str, seed: int,
              duration: float = 120.0):
    return scenario_from_dict({
        "model": MODEL,
        "classes": [{"name": f"c{i}", "rate_rps": r, "burstiness": 0.7, **LENGTHS}
                    for i, r in enumerate(rates)],
        "fleet": [{"config": config, "count": count}],
        "routing": routing,
        "sim": {"duration_s": duration, "warmup_s": 10, "seed": seed, "replications": 3},
    })


@LAW
@given(config=st.sampled_from(["1xH100-PCIe", "2xRTX-4090"]), count=st.integers(1, 3),
       load=st.floats(0.1, 0.9), routing=st.sampled_from(["least-outstanding", "round-robin"]),
       seed=st.integers(0, 2**31))
def test_adding_a_replica_never_raises_p99_ttft_beyond_noise(config, count, load, routing,
                                                             seed) -> None:
    # load is a fraction of a rate one replica sustains comfortably (about 3 req/s with these
    # lengths): the base fleet is stable, so P99 is not a censored lower bound
    rates = [3.0 * count * load * 0.6, 3.0 * count * load * 0.4]
    small = simulate(_scenario(config, count, rates, routing, seed))
    big = simulate(_scenario(config, count + 1, rates, routing, seed))
    assert not small.overloaded
    for a, b in zip(small.classes, big.classes, strict=True):
        noise = max(_half(a), _half(b))
        assert b.ttft_p99_ms <= a.ttft_p99_ms + noise + 1.0, (a.name, a.ttft_p99_ms,
                                                               b.ttft_p99_ms, noise)


def _half(c) -> float:
    lo, hi = c.ttft_p99_ci_ms
    return (hi - lo) / 2 if lo is not None else 0.0


@LAW
@given(r1=st.floats(0.05, 1.0), r2=st.floats(0.05, 1.0), count=st.integers(1, 2),
       routing=st.sampled_from(["least-outstanding", "round-robin", "slo-aware"]),
       seed=st.integers(0, 2**31))
def test_doubling_every_rate_never_lowers_utilization(r1, r2, count, routing, seed) -> None:
    base = simulate(_scenario("1xH100-PCIe", count, [r1, r2], routing, seed, duration=90.0))
    double = simulate(_scenario("1xH100-PCIe", count, [2 * r1, 2 * r2], routing, seed,
                                duration=90.0))
    u1, u2 = base.pools[0].utilization, double.pools[0].utilization
    assert u2 >= u1 - 1e-9 or u1 == 1.0, (u1, u2)

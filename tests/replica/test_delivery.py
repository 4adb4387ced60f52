"""The host's lag on streamed outputs (fleetplan.replica.delivery) and where it is applied."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.errors import InputError
from fleetplan.replica.delivery import delivery_lags
from fleetplan.replica.params import replica_params
from fleetplan.replica.priors import C_DELIVER_S
from fleetplan.replica.protocol import replay
from fleetplan.replica.steady import steady_state

C = 1e-4


def test_a_first_token_waits_for_the_steps_decoders_and_the_first_tokens_before_it():
    # A decodes from t=1 to 5; B and C get their first tokens in the step ending at t=2,
    # B first (request order); D's first token at t=4.5 comes after B finished (t=3) but while
    # A and C still decode; E never got a first token
    first = np.array([1.0, 2.0, 2.0, 4.5, math.nan])
    fin = np.array([5.0, 3.0, 6.0, math.nan, math.nan])
    lag_first, lag_last = delivery_lags(first, fin, C)
    assert lag_first == pytest.approx([C * 1, C * 2, C * 3, C * 3, 0.0])
    # last tokens at the mean place among their step's decoders: at t=5 A, C and D decode
    # (3 -> place 2), at t=3 A, B, C (place 2), at t=6 C alone with D (place 1.5)
    assert lag_last == pytest.approx([C * 2, C * 2, C * 1.5, 0.0, 0.0])


def test_a_request_finishing_in_the_step_still_had_its_output_listed():
    # B's last token and C's first token come out of the same step (t=2)
    lag_first, lag_last = delivery_lags(np.array([1.0, 2.0]), np.array([2.0, 3.0]), C)
    assert lag_first == pytest.approx([C, 2 * C])
    # one output token: its last token is its first
    lf, ll = delivery_lags(np.array([1.0, 1.0]), np.array([1.0, 4.0]), C)
    assert ll[0] == lf[0] == pytest.approx(C)


def test_outputs_of_other_replicas_do_not_delay_each_other():
    first = np.array([1.0, 1.5, 2.0, 2.0])
    fin = np.array([9.0, 9.0, 9.0, 9.0])
    same, _ = delivery_lags(first, fin, C)
    split, _ = delivery_lags(first, fin, C, replica=np.array([0, 1, 0, 1]))
    assert same == pytest.approx([C, 2 * C, 3 * C, 4 * C])
    assert split == pytest.approx([C, C, 2 * C, 2 * C])


def test_no_host_time_means_no_lag():
    for lag in delivery_lags(np.array([1.0, 2.0]), np.array([3.0, 4.0]), 0.0):
        assert not lag.any()


@pytest.mark.parametrize(("first", "fin", "c", "replica", "match"), [
    ([1.0], [2.0], -1e-6, None, "c_deliver"),
    ([1.0], [2.0], math.nan, None, "c_deliver"),
    ([1.0, 2.0], [2.0], C, None, "one length"),
    ([1.0, 2.0], [2.0, 3.0], C, [0], "replica"),
])
def test_bad_arguments_are_one_line_errors(first, fin, c, replica, match):
    with pytest.raises(InputError, match=match):
        delivery_lags(np.array(first), np.array(fin), c,
                      replica=None if replica is None else np.array(replica))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40), st.integers(0, 2)),
                min_size=1, max_size=40),
       st.floats(1e-6, 1e-3))
def test_the_lags_are_linear_in_the_host_time_and_bounded_by_the_outputs_listed(rows, c):
    first = np.array([float(a) for a, _, _ in rows])
    fin = first + np.array([float(b) for _, b, _ in rows])
    rep = np.array([r for _, _, r in rows])
    lf, ll = delivery_lags(first, fin, c, replica=rep)
    hf, hl = delivery_lags(first, fin, c / 2, replica=rep)
    assert lf == pytest.approx(2 * hf) and ll == pytest.approx(2 * hl)
    for i in range(len(rows)):
        mine = rep == rep[i]
        # at least its own output, at most every request of its replica started by then
        assert c * (1 - 1e-9) <= lf[i] <= c * np.sum(mine & (first <= first[i])) * (1 + 1e-9)
        assert 0 < ll[i] <= c * np.sum(mine & (first <= fin[i])) * (1 + 1e-9)
        assert fin[i] + ll[i] >= first[i] + lf[i] - 1e-12  # delivered in order


def _with_host(p, c):
    return p.with_(c_deliver=c)


def test_the_bundled_servers_carry_the_shared_host_time():
    p = replica_params("DeepSeek-R1-Distill-Qwen-7B", "1xRTX-4090")
    q = replica_params("DeepSeek-R1-Distill-Qwen-7B", "1xL40S")  # spec path
    assert p.c_deliver == q.c_deliver == C_DELIVER_S > 0


def test_a_replay_delays_first_tokens_by_load_and_keeps_tpot_and_throughput():
    p = _with_host(replica_params("DeepSeek-R1-Distill-Qwen-7B", "1xRTX-4090"), 0.0)
    kw = {"num_prompts": 120, "seeds": (0,), "arrival_seed": 42}
    lo0, lo1 = (replay(_with_host(p, c), rate=1, **kw).metrics for c in (0.0, 2e-4))
    hi0, hi1 = (replay(_with_host(p, c), rate=16, **kw).metrics for c in (0.0, 2e-4))
    d_lo = lo1["ttft_p50_ms"].mean - lo0["ttft_p50_ms"].mean
    d_hi = hi1["ttft_p50_ms"].mean - hi0["ttft_p50_ms"].mean
    # a few requests in flight at 1 req/s, dozens at 16: the lag grows with the load
    assert 0.2 < d_lo < 2.0 and d_hi > 3 * d_lo
    for m in (lo0, lo1), (hi0, hi1):
        a, b = m
        # the two lags differ by a few host times, spread over a reply's tokens
        assert b["tpot_p50_ms"].mean == pytest.approx(a["tpot_p50_ms"].mean, abs=0.1)
        assert b["itl_p50_ms"].mean == a["itl_p50_ms"].mean  # the engine's own gaps
        assert b["request_throughput"].mean == pytest.approx(
            a["request_throughput"].mean, rel=0.01)


@pytest.mark.parametrize("engine", ["compiled", "simpy"])
def test_steady_state_reports_the_clients_view_on_both_engines(engine):
    p = replica_params("DeepSeek-R1-Distill-Qwen-1.5B", "1xH100-PCIe")
    a = steady_state(_with_host(p, 0.0), rate=20, duration_s=120, warmup_s=20, engine=engine)
    b = steady_state(_with_host(p, 2e-4), rate=20, duration_s=120, warmup_s=20, engine=engine)
    assert b.ttft_p50_ms > a.ttft_p50_ms + 0.2
    assert b.tpot_p50_ms == pytest.approx(a.tpot_p50_ms, abs=0.1)
    assert b.throughput_rps == a.throughput_rps


def test_the_two_steady_engines_agree_with_a_host_time():
    p = _with_host(replica_params("DeepSeek-R1-Distill-Qwen-7B", "1xRTX-4090"), 1.5e-4)
    a = steady_state(p, rate=6, duration_s=90, warmup_s=10, engine="compiled").to_dict()
    b = steady_state(p, rate=6, duration_s=90, warmup_s=10, engine="simpy").to_dict()
    assert a == b


def test_the_fleet_simulator_adds_each_replicas_lag_and_keeps_tpot(monkeypatch):
    import sys

    import fleetplan.fleet.pools as pools

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[1] / "fleet"))
    from fleet_cases import make

    from fleetplan.fleet import simulate

    real = pools.replica_params

    def run(c):
        monkeypatch.setattr(pools, "replica_params",
                            lambda m, cfg, **kw: real(m, cfg, **kw).with_(c_deliver=c))
        return simulate(make(routing="round-robin"))

    a, b = run(0.0), run(5e-4)
    for ca, cb in zip(a.classes, b.classes, strict=True):
        assert cb.ttft_p50_ms > ca.ttft_p50_ms + 0.4  # at least its own output's 0.5 ms
        assert cb.tpot_p50_ms == pytest.approx(ca.tpot_p50_ms, abs=0.1)
        assert cb.requests == ca.requests

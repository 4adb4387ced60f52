"""The all-reduce of a tensor-parallel group over a stated link between its GPUs (issue 41):
vLLM's path over the link (its custom kernel, NCCL's ring, or NCCL through host memory where
the GPUs have no peer-to-peer) sets the latency each all-reduce pays and what its bytes cost.
Expected values are worked out by hand from the catalog rows (data/interconnects.csv) and
Meta-Llama-3-8B-Instruct's config (32 layers, hidden size 4096: 64 all-reduces a step, 8192
bytes of each per token)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetplan.catalog.catalog import bundled_catalog
from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.errors import InputError
from fleetplan.replica.priors import allreduce_cost, allreduce_path, ideal_parts

LLAMA = "Meta-Llama-3-8B-Instruct"


def _parts(config: str) -> dict[str, float]:
    cat = bundled_catalog()
    spec = cat.model(LLAMA)
    assert (spec.layers, spec.hidden_size) == (32, 4096)
    return ideal_parts(spec, HardwareConfig.parse(config, cat))


@pytest.mark.parametrize(("config", "comm_step", "comm_tok"), [
    # no peer-to-peer (PCIe 4.0, 10 us, 31.5 GB/s): NCCL's ring of 2 x 3 hops per all-reduce,
    # and every GPU's 2 x 3 / 4 of the message through host memory: 2 x 3 messages at 31.5 GB/s
    ("4xRTX-4090+tp4+PCIe-4.0-x16-noP2P", 64 * 6 * 10e-6, 64 * 8192 * 6 / 31.5e9),
    # peer to peer over PCIe, four GPUs not all linked to each other: NCCL's ring
    ("4xRTX-4090+tp4+PCIe-4.0-x16", 64 * 6 * 10e-6, 64 * 8192 * 1.5 / 31.5e9),
    # two GPUs peer to peer: vLLM's custom kernel, one exchange's latency
    ("2xRTX-4090+tp2+PCIe-4.0-x16", 64 * 10e-6, 64 * 8192 * 1.0 / 31.5e9),
    # NVSwitch: the custom kernel at four GPUs too (NVLink-4: 5 us, 450 GB/s per direction)
    ("4xH100-SXM+tp4+NVLink-4", 64 * 5e-6, 64 * 8192 * 1.5 / 450e9),
    # nothing stated on GeForce cards (issue 42): their own PCIe row (32 GB/s) without
    # peer-to-peer, 10 us a hop through host memory: 2 x 3 hops, 2 x 3 messages
    ("4xRTX-4090", 64 * 6 * 10e-6, 64 * 8192 * 6 / 32e9),
    # nothing stated on a data-centre card: as before, 30 us per all-reduce over PCIe and the
    # GPU row's ring (H100 PCIe: 128 GB/s)
    ("4xH100-PCIe", 64 * 30e-6, 64 * 8192 * 1.5 / 128e9),
])
def test_the_all_reduce_costs_what_vllms_path_over_the_link_costs(
        config: str, comm_step: float, comm_tok: float) -> None:
    parts = _parts(config)
    assert parts["comm_step"] == pytest.approx(comm_step, rel=1e-12)
    assert parts["comm_tok"] == pytest.approx(comm_tok, rel=1e-12)


def test_the_path_follows_vllms_conditions() -> None:
    cat = bundled_catalog()
    nvlink, pcie, host = (cat.interconnect(n) for n in
                          ("NVLink-4", "PCIe-4.0-x16", "PCIe-3.0 x16, P2P disabled"))
    assert host.name == "PCIe-3.0-x16-noP2P" and host.peer_to_peer == "none"
    assert [allreduce_path(nvlink, n) for n in (2, 3, 4, 6, 8)] == [
        "custom", "ring", "custom", "custom", "custom"]  # group sizes 2, 4, 6, 8 only
    assert [allreduce_path(pcie, n) for n in (2, 4, 8)] == ["custom", "ring", "ring"]
    assert [allreduce_path(host, n) for n in (2, 4, 8)] == ["host", "host", "host"]
    # a group of three over NVLink: NCCL's ring, 2 x 2 hops of 5 us
    assert allreduce_cost(nvlink, 3)[0] == pytest.approx(20e-6, rel=1e-12)


LINKS = ("NVLink-4", "NVLink-3", "PCIe-3.0-x16", "PCIe-5.0-x16")


@given(st.sampled_from(LINKS), st.integers(2, 8))
def test_going_through_host_memory_never_costs_less(name: str, tp: int) -> None:
    """The same link without peer-to-peer: no cheaper per all-reduce, in latency or bytes."""
    link = bundled_catalog().interconnect(name)
    cut = link.model_copy(update={"peer_to_peer": "none"})
    lat, per_byte = allreduce_cost(link, tp)
    lat_host, per_byte_host = allreduce_cost(cut, tp)
    assert lat_host >= lat and per_byte_host >= per_byte


@given(st.sampled_from((*LINKS, "PCIe-4.0-x16-noP2P")), st.integers(2, 7))
def test_a_larger_group_moves_no_fewer_bytes_per_gpu(name: str, tp: int) -> None:
    link = bundled_catalog().interconnect(name)
    assert allreduce_cost(link, tp + 1)[1] >= allreduce_cost(link, tp)[1]


def test_a_stated_link_is_part_of_the_name_and_reads_back() -> None:
    hw = HardwareConfig.parse("4xRTX-4090+tp4+pcie-4.0-x16-nop2p")
    assert hw.name == "4xRTX-4090+tp4+PCIe-4.0-x16-noP2P"
    assert HardwareConfig.parse(hw.name) == hw
    assert hw.stated_gpu_link is not None and hw.stated_gpu_link.peer_to_peer == "none"
    assert HardwareConfig.split(hw.name) == (4, "RTX-4090")
    assert HardwareConfig.split_layout(hw.name) == {"tp_size": 4,
                                                    "gpu_link": "PCIe-4.0-x16-noP2P"}
    # nothing stated: the plain name, no link
    plain = HardwareConfig.parse("4xRTX-4090")
    assert plain.name == "4xRTX-4090" and plain.stated_gpu_link is None


@pytest.mark.parametrize(("config", "why"), [
    ("2xRTX-4090+tp2+IB-NDR-400", "names the link between nodes"),  # not inside a node
    ("2xRTX-4090+tp2+PCIe-9", "unknown interconnect"),
])
def test_a_link_that_is_not_between_one_nodes_gpus_is_refused(config: str, why: str) -> None:
    with pytest.raises((InputError, ValueError), match=why):
        HardwareConfig.parse(config)


def test_a_gpu_link_is_stated_on_one_node_only() -> None:
    with pytest.raises(ValueError, match="one node only"):
        HardwareConfig(gpu="H100-SXM", gpu_count=16, tp_size=8, pp_size=2, nodes=2,
                       gpu_link="NVLink-4")

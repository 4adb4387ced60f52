"""The catalog of interconnects (interconnects.csv) and the configuration names that carry a
server's layout (issue 41, item 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fleet_cases import base_dict
from hypothesis import given
from hypothesis import strategies as st

from fleetplan.catalog.catalog import Catalog, bundled_catalog
from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.errors import DataError, InputError, UnknownNameError
from fleetplan.scenario import scenario_from_dict

HEAD = "name,scope,bandwidth_gb_s,latency_us,aliases,bandwidth_source,latency_source\n"


def test_every_bundled_link_names_its_sources() -> None:
    links = bundled_catalog().interconnects()
    for name in ("NVLink-4", "PCIe-4.0-x16", "PCIe-5.0-x16", "IB-NDR-400", "IB-HDR-200",
                 "RoCE-400G", "Ethernet-100G"):
        link = links[name]
        assert link.bandwidth_source.strip() and link.latency_source.strip()
    # datasheet figures, per direction: 400 Gb/s = 50 GB/s; NVLink-4's 900 GB/s both ways
    assert links["IB-NDR-400"].bandwidth_gb_s == 50
    assert links["IB-HDR-200"].bandwidth_gb_s == 25
    assert links["Ethernet-100G"].bandwidth_gb_s == 12.5
    assert links["NVLink-4"].bandwidth_gb_s == 450
    assert links["IB-NDR-400"].scope == "inter-node" and links["NVLink-4"].scope == "intra-node"


@pytest.mark.parametrize(("spelling", "name"), [
    ("IB-NDR-400", "IB-NDR-400"), ("ib ndr 400", "IB-NDR-400"), ("InfiniBand NDR", "IB-NDR-400"),
    ("PCIe-3.0 x16", "PCIe-3.0-x16"), ("100GbE", "Ethernet-100G")])
def test_a_link_is_found_by_any_spelling(spelling: str, name: str) -> None:
    assert bundled_catalog().interconnect(spelling).name == name


def test_an_unknown_link_is_one_line_naming_the_valid_ones() -> None:
    with pytest.raises(UnknownNameError) as exc:
        bundled_catalog().interconnect("carrier pigeon")
    assert "\n" not in str(exc.value) and "IB-NDR-400" in str(exc.value)


def _folder(tmp_path: Path, rows: str) -> Path:
    folder = tmp_path / "cat"
    folder.mkdir()
    (folder / "interconnects.csv").write_text(HEAD + rows)
    return folder


def test_a_user_folder_adds_and_replaces_links(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "Slingshot-11,inter-node,25,2,,HPE datasheet,my guess\n"
                               "IB-NDR-400,inter-node,45,4,,measured here,measured here\n")
    cat = Catalog(folder)
    assert cat.interconnect("slingshot 11").bandwidth_gb_s == 25
    ndr = cat.interconnect("IB-NDR-400")
    assert ndr.bandwidth_gb_s == 45 and str(folder / "interconnects.csv") in ndr.bandwidth_source
    hw = HardwareConfig.parse("16xH100-SXM+tp8pp2n2+Slingshot-11", cat)
    assert hw.link is not None and hw.link.latency_us == 2


@pytest.mark.parametrize(("row", "words"), [
    ("X,inter-node,0,5,,a,b\n", ["row 2", "bandwidth_gb_s", "must be > 0"]),
    ("X,wifi,10,5,,a,b\n", ["row 2", "scope", "wifi"]),
    ("X,inter-node,ten,5,,a,b\n", ["row 2", "bandwidth_gb_s", "not a finite number"]),
    ("X+Y,inter-node,10,5,,a,b\n", ["row 2", "name", "interconnect name"]),
])
def test_a_bad_user_row_is_one_line_naming_file_row_and_column(
        tmp_path: Path, row: str, words: list[str]) -> None:
    folder = _folder(tmp_path, row)
    with pytest.raises(DataError) as exc:
        Catalog(folder).checked()
    msg = str(exc.value)
    assert "\n" not in msg and "interconnects.csv" in msg
    for w in words:
        assert w in msg


GPUS = st.sampled_from(sorted(bundled_catalog().gpus()))


@given(gpu=GPUS, count=st.integers(1, 64))
def test_a_plain_name_reads_back_byte_identical(gpu: str, count: int) -> None:
    name = f"{count}x{gpu}"
    hw = HardwareConfig.parse(name)
    assert hw.name == name and hw.engines == 1 and hw.tp_size == count
    assert HardwareConfig.split(name) == (count, gpu)


@given(gpu=GPUS, tp=st.sampled_from([1, 2, 4]), pp=st.sampled_from([1, 2, 4]),
       dp=st.sampled_from([1, 2, 4]))
def test_a_layout_name_reads_back_to_the_same_layout(gpu: str, tp: int, pp: int,
                                                     dp: int) -> None:
    hw = HardwareConfig.model_validate({"gpu": gpu, "gpu_count": tp * pp * dp, "tp_size": tp,
                                        "pp_size": pp, "dp": dp})
    back = HardwareConfig.parse(hw.name)
    assert (back.tp_size, back.pp_size, back.dp, back.gpu_count) == (tp, pp, dp, tp * pp * dp)
    assert back.name == hw.name and back.engines == pp * dp
    assert ("+" in hw.name) == (pp * dp > 1)


@pytest.mark.parametrize(("name", "words"), [
    ("8xH100-SXM+tp4pp3", ["gpu_count(=8) must equal tp_size(=4) x pp_size(=3)"]),
    ("8xH100-SXM+fast", ["after '+' expected a layout"]),
    ("2xH100-SXM+tp2+IB-NDR-400", ["names the link between nodes"]),
    ("16xH100-SXM+tp8pp2n2+NVLink-4", ["a link inside one node"]),
])
def test_a_bad_layout_is_one_line(name: str, words: list[str]) -> None:
    with pytest.raises(InputError) as exc:
        HardwareConfig.parse(name)
    assert "\n" not in str(exc.value)
    for w in words:
        assert w in str(exc.value)


def test_a_scenario_names_a_layout_by_its_canonical_name() -> None:
    """Plans place whole servers: a scenario may name a pipeline-parallel or data-parallel
    one (its replica is a group of engines in the fleet simulator,
    tests/fleet/test_engine_group.py), spelled any way the catalog reads."""
    d = base_dict()
    d["fleet"][0].update(config="8xh100-sxm+tp4pp2")
    assert scenario_from_dict(d).fleet[0].config == "8xH100-SXM+tp4pp2"

"""User catalogs extend the bundled tables by name, keep every figure's source, and are read only
where they are passed (no process-wide catalog; nothing frozen, nothing written into the
package)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fleetplan.catalog import Catalog, HardwareConfig, bundled_catalog
from fleetplan.catalog._tables import data_dir
from fleetplan.context import DataContext
from fleetplan.errors import DataError, InputError, UnknownNameError

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "hf-configs"
L4_ROW = ("gpu,vendor_name,vram_gb,tdp_w,fp16_tflops_dense,mem_bandwidth_gb_s,interconnect,"
          "interconnect_gb_s,spec_source,spec_date\n"
          "L4,NVIDIA L4,24,72,121,300,PCIe-4.0,32,NVIDIA L4 datasheet,2023-03\n")


def _folder(tmp_path: Path, **tables: str) -> Path:
    d = tmp_path / "cat"
    d.mkdir(exist_ok=True)
    for name, text in tables.items():
        (d / f"{name}.csv").write_text(text)
    return d


def test_a_new_gpu_row_adds_to_the_bundled_ones_only_inside_its_catalog(tmp_path: Path) -> None:
    cat = Catalog(_folder(tmp_path, gpus=L4_ROW))
    with pytest.raises(UnknownNameError):
        bundled_catalog().normalize_gpu("L4")
    l4 = cat.gpu("NVIDIA-L4")  # the vendor spelling of result files
    assert (l4.gpu, l4.vram_gb, l4.mem_bandwidth_gb_s) == ("L4", 24, 300)
    assert "NVIDIA L4 datasheet" in l4.spec_source and str(tmp_path) in l4.spec_source
    assert "estimate" in l4.idle_w_source and "estimate" in l4.embodied_source
    assert HardwareConfig.parse("2xL4", cat).spec.tdp_w == 72
    assert set(cat.gpus()) > {"L4", "H100-PCIe", "RTX-4090"}
    with pytest.raises(UnknownNameError):  # a configuration parsed without it
        HardwareConfig.parse("2xL4")
    with pytest.raises(UnknownNameError):
        bundled_catalog().normalize_gpu("L4")


def test_user_rows_override_bundled_rows_by_name_and_say_so(tmp_path: Path) -> None:
    folder = _folder(
        tmp_path,
        gpus="gpu,vram_gb,tdp_w,fp16_tflops_dense,mem_bandwidth_gb_s,interconnect_gb_s\n"
             "H100-PCIe,80,300,756,2000,64\n",
        prices="gpu,market,price_usd_per_gpu_hour,source\nH100-PCIe,alternative,1.5,my quote\n"
               "NVIDIA-GeForce-RTX-4090,hyperscaler,0.9,\n",
        grid_intensity="region,g_co2_per_kwh\nEU27,100\n")
    bundled = bundled_catalog()
    before = bundled.gpu("H100-PCIe")
    cat = Catalog(folder)
    h100 = cat.gpu("H100-PCIe")
    assert h100.tdp_w == 300 and h100.idle_w == before.idle_w  # unset columns kept
    assert str(folder) in h100.spec_source
    p = cat.price("H100-PCIe")
    assert p.price_usd_per_gpu_hour == 1.5 and "my quote" in p.source
    assert str(folder) in p.source
    hyper = cat.price("RTX-4090", "hyperscaler")  # a vendor spelling, no source column
    assert hyper.price_usd_per_gpu_hour == 0.9 and str(folder) in hyper.source
    g = cat.grid_intensity("EU27")
    assert g.g_co2_per_kwh == 100 and str(folder) in g.source
    assert bundled.price("H100-PCIe").price_usd_per_gpu_hour == 2.0  # bundled unchanged


def test_later_folders_win(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for d, price in ((a, 0.5), (b, 0.7)):
        d.mkdir()
        (d / "prices.csv").write_text(f"gpu,market,price_usd_per_gpu_hour\nH100-PCIe,x,{price}\n")
    assert Catalog(a, b).price("H100-PCIe", "x").price_usd_per_gpu_hour == 0.7
    assert Catalog(b, a).price("H100-PCIe", "x").price_usd_per_gpu_hour == 0.5


def test_bad_user_tables_name_file_row_and_column(tmp_path: Path) -> None:
    folder = _folder(tmp_path, gpus="gpu,vram_gb,tdp_w,fp16_tflops_dense,mem_bandwidth_gb_s,"
                                    "interconnect_gb_s\nX1,24,-5,100,300,32\n")
    with pytest.raises(DataError, match=r"gpus.csv: row 2, column tdp_w: .*-5"):
        Catalog(folder).gpus()
    missing = _folder(tmp_path, gpus="gpu,vram_gb\nX1,24\n")
    with pytest.raises(DataError, match="missing required column"):
        Catalog(missing).gpus()
    with pytest.raises(InputError, match="no such catalog folder"):
        Catalog(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="holds none of"):
        Catalog(tmp_path / "empty")


def test_model_configs_join_the_catalog_through_a_context(tmp_path: Path) -> None:
    # a checkpoint of the team's own, named as no bundled table or library folder is
    folder = tmp_path / "team--Team-MoE-30B"
    shutil.copytree(CONFIGS / "Qwen3-30B-A3B", folder)
    ctx = DataContext.build(model_configs=[folder])
    with pytest.raises(UnknownNameError):
        bundled_catalog().model("Team-MoE-30B")
    assert ctx.catalog.model("team--Team-MoE-30B").is_moe
    assert ctx.catalog.model("team/Team-MoE-30B").model == "team--Team-MoE-30B"
    assert ctx.model is not None and ctx.model.model == "team--Team-MoE-30B"
    # building it changes nothing process-wide: the bundled catalog stays as it is
    with pytest.raises(UnknownNameError):
        bundled_catalog().model("team/Team-MoE-30B")


def test_the_data_dir_variable_is_read_when_used_not_frozen(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "data"
    other.mkdir()
    for name in ("gpus.csv", "gpu_aliases.csv", "prices.csv", "models.csv", "grid_intensity.csv"):
        (other / name).write_bytes((data_dir() / name).read_bytes())
    text = (other / "gpus.csv").read_text().replace("RTX-4090,NVIDIA GeForce RTX 4090,24,",
                                                     "RTX-4090,NVIDIA GeForce RTX 4090,25,")
    (other / "gpus.csv").write_text(text)
    assert bundled_catalog().gpu("RTX-4090").vram_gb == 24
    monkeypatch.setenv("FLEETPLAN_DATA_DIR", str(other))
    assert bundled_catalog().gpu("RTX-4090").vram_gb == 25
    monkeypatch.delenv("FLEETPLAN_DATA_DIR")
    assert bundled_catalog().gpu("RTX-4090").vram_gb == 24


def test_an_alias_must_stand_for_a_gpu_of_the_catalog(tmp_path: Path) -> None:
    folder = _folder(tmp_path, gpu_aliases="alias,gpu\nGeForce 4090 OC,RTX-4090\nMy Card,AAA\n")
    with pytest.raises(DataError) as err:
        Catalog(folder).normalize_gpu("My Card")
    msg = str(err.value)
    assert "\n" not in msg and f"{folder / 'gpu_aliases.csv'}: row 3, column gpu: 'AAA'" in msg
    assert "'My Card'" in msg and "RTX-4090" in msg  # the alias, and the valid names
    # an alias of a GPU the same catalog adds is fine, and so is one of a bundled GPU
    folder = _folder(tmp_path, gpus=L4_ROW, gpu_aliases="alias,gpu\nMy Card,L4\nOC,RTX-4090\n")
    cat = Catalog(folder)
    assert cat.normalize_gpu("my card") == "L4" and cat.normalize_gpu("OC") == "RTX-4090"


def test_every_bundled_alias_stands_for_a_bundled_gpu() -> None:
    import csv

    rows = list(csv.DictReader((data_dir() / "gpu_aliases.csv").open()))
    gpus = set(bundled_catalog().gpus())
    assert rows and {r["gpu"] for r in rows} <= gpus


SCENARIO = {"model": "DeepSeek-R1-Distill-Qwen-14B",
            "classes": [{"name": "chat", "rate_rps": 1.0, "slo": {"ttft_p99_ms": 2000},
                         "input_tokens": {"dist": "fixed", "value": 300},
                         "output_tokens": {"dist": "fixed", "value": 50}}],
            "fleet": [{"config": "1xNVIDIA-L4", "count": 2}]}


def test_a_scenario_keeps_the_context_it_was_read_in(tmp_path: Path) -> None:
    from fleetplan.scenario import scenario_from_dict

    ctx = DataContext.build(catalog=_folder(tmp_path, gpus=L4_ROW))
    sc = scenario_from_dict(SCENARIO, context=ctx)
    assert sc.data_context().catalog is ctx.catalog
    assert sc.fleet is not None and sc.fleet[0].config == "1xL4"  # the user GPU, by its alias
    assert sc.fleet[0].hardware.spec.tdp_w == 72  # the user row's figure, not a lookup later
    # a validated copy (what-if runs) reads the same catalog
    copy = sc.with_updates(fleet=[{"config": "2xL4", "count": 1}])
    assert copy.fleet is not None and copy.fleet[0].hardware.spec.vram_gb == 24
    assert copy.data_context().catalog is ctx.catalog
    # read without it, the same scenario names an unknown GPU, in one line
    with pytest.raises(InputError) as err:
        scenario_from_dict(SCENARIO)
    assert "\n" not in str(err.value) and "fleet[0].config" in str(err.value)
    assert "L4" in str(err.value)


@pytest.mark.parametrize(("spelling", "gpu"), [
    ("A100-SXM4-80GB", "A100-80GB"),  # nvidia-smi's name without its "NVIDIA "
    ("H100 80GB HBM3", "H100-SXM"),
    ("Instinct MI300X", "MI300X"),
    ("H200-SXM", "H200"),
    ("H100-SXM5-80GB", "H100-SXM"),
])
def test_a_gpu_named_without_its_vendor_is_found(spelling: str, gpu: str) -> None:
    assert bundled_catalog().normalize_gpu(spelling) == gpu


def test_a_name_two_gpus_could_answer_is_refused() -> None:
    # "X1" without its vendor is both "NVIDIA X1" and "AMD X1": neither is chosen
    from fleetplan.catalog.gpus import canonical_gpu

    gpus = {g: bundled_catalog().gpus()["H200"] for g in ("A", "B")}
    with pytest.raises(UnknownNameError):
        canonical_gpu("X1", gpus, {"nvidia-x1": "A", "amd-x1": "B"})
    assert canonical_gpu("X1", gpus, {"nvidia-x1": "A"}) == "A"

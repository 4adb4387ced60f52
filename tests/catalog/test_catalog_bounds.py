"""Catalog rows and config.json files are checked for plausibility, not only for being finite
and positive: a value no GPU or served model can have is refused where it is read, as one line
naming the file, the row or field and the value; never a pydantic or float traceback later.
One rule for both model readers: what models.csv refuses, config.json refuses too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetplan.catalog import Catalog, HardwareConfig, ModelSpec
from fleetplan.errors import DataError, FleetplanError, InputError

GPU_HEAD = ("gpu,vram_gb,tdp_w,fp16_tflops_dense,mem_bandwidth_gb_s,interconnect_gb_s,"
            "idle_w\n")
GOOD_GPU = {"gpu": "L4", "vram_gb": "24", "tdp_w": "72", "fp16_tflops_dense": "121",
            "mem_bandwidth_gb_s": "300", "interconnect_gb_s": "32", "idle_w": "7"}
MODEL_HEAD = ("model,hf_id,architecture,params_b,layers,hidden_size,intermediate_size,"
              "attention_heads,kv_heads,head_dim,vocab_size,context_length,served_dtype,"
              "weight_bytes_per_param,source,num_experts,experts_per_token\n")
GOOD_MODEL = {"model": "Mine-8B", "hf_id": "me/Mine-8B", "architecture": "Llama",
              "params_b": "8.03", "layers": "32", "hidden_size": "4096",
              "intermediate_size": "14336", "attention_heads": "32", "kv_heads": "8",
              "head_dim": "128", "vocab_size": "128256", "context_length": "131072",
              "served_dtype": "bfloat16", "weight_bytes_per_param": "2", "source": "mine",
              "num_experts": "", "experts_per_token": ""}
GOOD_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
               "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
               "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 128256,
               "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}


def _csv(tmp_path: Path, name: str, head: str, row: dict[str, str]) -> Path:
    folder = tmp_path / "cat"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(head + ",".join(row[c] for c in head.strip().split(",")) + "\n")
    return folder


def _one_line(exc: BaseException, *words: str) -> None:
    msg = str(exc)
    assert "\n" not in msg and all(w in msg for w in words), msg



@pytest.mark.parametrize("column,value", [
    ("fp16_tflops_dense", "1e-9"), ("vram_gb", "1e12"), ("mem_bandwidth_gb_s", "0.00001"),
    ("tdp_w", "1e9"), ("interconnect_gb_s", "1e-12"), ("idle_w", "500"),  # above its 72 W TDP
])
def test_an_implausible_gpu_figure_is_one_line_naming_file_row_column_value(
        tmp_path: Path, column: str, value: str) -> None:
    folder = _csv(tmp_path, "gpus.csv", GPU_HEAD, {**GOOD_GPU, column: value})
    with pytest.raises(DataError) as err:
        Catalog(folder).gpu("L4")
    _one_line(err.value, f"{folder / 'gpus.csv'}: row 2, column {column}: ")


def test_a_plausible_gpu_row_is_read(tmp_path: Path) -> None:
    cat = Catalog(_csv(tmp_path, "gpus.csv", GPU_HEAD, GOOD_GPU))
    assert HardwareConfig.parse("2xL4", cat).spec.vram_gb == 24


@pytest.mark.parametrize("column,value", [
    ("layers", "1" + "0" * 400), ("context_length", "1"), ("weight_bytes_per_param", "-0.5"),
    ("hidden_size", "4"), ("kv_heads", "64"), ("kv_heads", "5"), ("head_dim", "1e9"),
])
def test_an_implausible_model_figure_is_one_line_naming_file_row_column_value(
        tmp_path: Path, column: str, value: str) -> None:
    folder = _csv(tmp_path, "models.csv", MODEL_HEAD, {**GOOD_MODEL, column: value})
    with pytest.raises(DataError) as err:
        Catalog(folder).model("Mine-8B")
    _one_line(err.value, f"{folder / 'models.csv'}: row 2, column {column}: ")


def test_models_csv_refuses_what_config_json_refuses(tmp_path: Path) -> None:
    # more KV heads than heads, and more experts per token than experts: config.json refused
    # both before; models.csv took them
    for change, column in (({"kv_heads": "64"}, "kv_heads"),
                           ({"num_experts": "8", "experts_per_token": "9"}, "experts_per_token")):
        folder = _csv(tmp_path, "models.csv", MODEL_HEAD, {**GOOD_MODEL, **change})
        with pytest.raises(DataError) as err:
            Catalog(folder).model("Mine-8B")
        _one_line(err.value, f"row 2, column {column}")
        cfg = dict(GOOD_CONFIG)
        if column == "kv_heads":
            cfg["num_key_value_heads"] = 64
        else:
            cfg |= {"num_local_experts": 8, "num_experts_per_tok": 9}
        p = tmp_path / f"cfg-{column}" / "config.json"
        p.parent.mkdir()
        p.write_text(json.dumps(cfg))
        with pytest.raises(InputError) as err2:
            ModelSpec.from_hf_config(p)
        _one_line(err2.value, str(p), "field num_")


@pytest.mark.parametrize("change,field", [
    ({"num_hidden_layers": 10**400}, "num_hidden_layers"),
    ({"max_position_embeddings": 1}, "max_position_embeddings"),
    ({"hidden_size": 16, "num_attention_heads": 32, "num_key_value_heads": 32}, "hidden_size"),
    ({"vocab_size": 10**12}, "vocab_size"),
    ({"head_dim": 0}, "head_dim"),
    ({"quantization_config": {"quant_method": "compressed-tensors", "config_groups": {
        "g": {"weights": {"num_bits": -4}}}}}, "num_bits"),
])
def test_an_implausible_config_json_is_one_line_naming_file_field_value(
        tmp_path: Path, change: dict[str, object], field: str) -> None:
    p = tmp_path / "m" / "config.json"
    p.parent.mkdir()
    p.write_text(json.dumps({**GOOD_CONFIG, **change}))
    with pytest.raises(FleetplanError) as err:
        ModelSpec.from_hf_config(p)
    _one_line(err.value, str(p), field)


def test_a_plausible_config_json_is_read(tmp_path: Path) -> None:
    p = tmp_path / "m" / "config.json"
    p.parent.mkdir()
    p.write_text(json.dumps(GOOD_CONFIG))
    spec = ModelSpec.from_hf_config(p)
    assert (spec.layers, spec.kv_heads, spec.context_length) == (32, 8, 131072)
    assert spec.params_b == pytest.approx(8.03, rel=0.01)  # Llama-3.1-8B's published count


def test_the_docs_state_the_bounds_the_records_apply() -> None:
    # docs/catalogs.md's tables against the records' own bounds (each "lo to hi" of a column)
    import re

    from fleetplan.catalog.gpus import GPUSpec
    from fleetplan.catalog.models import plausible_bounds

    page = (Path(__file__).resolve().parents[2] / "docs" / "catalogs.md").read_text()
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(\w+)`[^|]*\| ([^|]+) \|$",
                                                         page, re.M)}

    def said(lo: float, hi: float) -> str:
        return f"{lo:.10g} to {hi:.10g}"

    for name in ("vram_gb", "tdp_w", "fp16_tflops_dense", "mem_bandwidth_gb_s",
                 "interconnect_gb_s", "embodied_kg_co2e", "idle_w"):
        meta = GPUSpec.model_fields[name].metadata
        lo = next(m.ge for m in meta if hasattr(m, "ge"))
        hi = next(m.le for m in meta if hasattr(m, "le"))
        assert rows[name].startswith(said(lo, hi)), (name, rows[name])
    for name in ("layers", "hidden_size", "intermediate_size", "attention_heads", "kv_heads",
                 "head_dim", "vocab_size", "context_length", "weight_bytes_per_param",
                 "num_experts"):
        assert rows[name].startswith(said(*plausible_bounds(name))), (name, rows[name])


@pytest.mark.parametrize("table,head,row,column", [
    ("grid_intensity.csv", "region,g_co2_per_kwh\n", "EU27~spot,50\n", "region"),
    ("grid_intensity.csv", "region,g_co2_per_kwh\n", "FRA/200ms,50\n", "region"),
    ("grid_intensity.csv", "region,g_co2_per_kwh\n", "a@b,50\n", "region"),
    ("gpus.csv", GPU_HEAD, "$x^{2}$,24,72,121,300,32,7\n", "gpu"),
    ("gpus.csv", GPU_HEAD, "L4@EU27,24,72,121,300,32,7\n", "gpu"),
    ("gpus.csv", GPU_HEAD, "L4+H100,24,72,121,300,32,7\n", "gpu"),
])
def test_a_name_holding_a_pool_name_separator_is_refused_where_it_is_read(
        tmp_path: Path, table: str, head: str, row: str, column: str) -> None:
    # a region 'EU27~spot' would be read back from a pool name as a spot pool in EU27
    folder = tmp_path / "cat"
    folder.mkdir()
    (folder / table).write_text(head + row)
    with pytest.raises(DataError) as err:
        Catalog(folder).grid() if column == "region" else Catalog(folder).gpus()
    _one_line(err.value, f"{folder / table}: row 2, column {column}: ", "separators")


@pytest.mark.parametrize("name", ["EU27", "US-CA", "R_1", "9ZONE"])
def test_region_codes_of_the_grammar_are_read(tmp_path: Path, name: str) -> None:
    folder = tmp_path / "cat"
    folder.mkdir()
    (folder / "grid_intensity.csv").write_text(f"region,g_co2_per_kwh\n{name},50\n")
    assert Catalog(folder).grid()[name].g_co2_per_kwh == 50


@pytest.mark.parametrize("table,text,words", [
    ("gpus.csv", GPU_HEAD + "L4,24,72,121,300,32,7\nL4,48,72,121,300,32,7\n", "gpu 'L4'"),
    ("grid_intensity.csv", "region,g_co2_per_kwh\nZZ,10\nYY,5\n ZZ,20\n", "region 'ZZ'"),
    ("prices.csv", "gpu,market,price_usd_per_gpu_hour\nRTX-4090,alternative,0.3\n"
     "RTX-4090,alternative,0.4\n", "gpu 'RTX-4090', market 'alternative'"),
    ("gpu_aliases.csv", "alias,gpu\nMy Card,RTX-4090\nMy Card,L40S\n", "alias 'My Card'"),
])
def test_a_name_given_twice_in_one_table_is_refused_naming_both_rows(
        tmp_path: Path, table: str, text: str, words: str) -> None:
    # the later row used to win silently
    folder = tmp_path / "cat"
    folder.mkdir()
    (folder / table).write_text(text)
    cat = Catalog(folder)
    read = {"gpus.csv": cat.gpus, "grid_intensity.csv": cat.grid, "prices.csv": cat.prices,
            "gpu_aliases.csv": lambda: cat.normalize_gpu("My Card")}[table]
    with pytest.raises(DataError) as err:
        read()
    _one_line(err.value, f"{folder / table}: rows 2 and ", f"the same {words} twice")


def test_a_model_given_twice_in_models_csv_is_refused(tmp_path: Path) -> None:
    row = ",".join(GOOD_MODEL[c] for c in MODEL_HEAD.strip().split(",")) + "\n"
    folder = tmp_path / "cat"
    folder.mkdir()
    (folder / "models.csv").write_text(MODEL_HEAD + row + row)
    with pytest.raises(DataError) as err:
        Catalog(folder).model("Mine-8B")
    _one_line(err.value, "rows 2 and 3: the same model 'Mine-8B' twice")

"""Issue 44 in the scenario: `models:` beside `model:`, `classes[].model`, `fleet[].model`.

Each refusal is one line naming the file, the field and the value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fleetplan.errors import InputError
from fleetplan.scenario import Pool, load_scenario, parse_fleet, scenario_from_dict
from fleetplan.scenario.served import (
    class_model,
    class_variants,
    is_multi_model,
    served_models,
)

LLAMA, QWEN = "Meta-Llama-3-8B-Instruct", "DeepSeek-R1-Distill-Qwen-7B"
HF = Path(__file__).resolve().parents[1] / "data" / "hf-configs"


def _two(**top: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "models": [LLAMA, {"name": QWEN}],
        "classes": [{"name": "chat", "model": LLAMA, "rate_rps": 2},
                    {"name": "agent", "model": QWEN, "rate_rps": 1}]}
    data.update(top)
    return data


def _refused(data: dict[str, Any]) -> str:
    with pytest.raises(InputError) as exc:
        scenario_from_dict(data, "s.yaml")
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("s.yaml: ")
    return msg


def test_two_models_each_class_its_own() -> None:
    sc = scenario_from_dict(_two())
    assert served_models(sc) == (LLAMA, QWEN)
    assert is_multi_model(sc)
    assert [class_model(sc, i) for i in range(2)] == [LLAMA, QWEN]
    sub = sc.for_model(QWEN)
    assert sub.model == QWEN and sub.models is None
    assert [c.name for c in sub.classes] == ["agent"]


def test_one_model_stays_as_it_was() -> None:
    one = scenario_from_dict({"model": LLAMA, "classes": [{"name": "a", "rate_rps": 1}]})
    assert not is_multi_model(one) and one.one_model == LLAMA
    assert class_model(one, 0) == LLAMA
    # a class may name the only model; a list of one model is one model too
    named = scenario_from_dict({"model": LLAMA, "classes": [
        {"name": "a", "rate_rps": 1, "model": "meta-llama/Meta-Llama-3-8B-Instruct"}]})
    assert named.classes[0].model == LLAMA
    listed = scenario_from_dict({"models": [LLAMA], "classes": [{"name": "a", "rate_rps": 1}]})
    assert not is_multi_model(listed) and listed.one_model == LLAMA


def test_several_models_need_a_step_that_plans_them() -> None:
    sc = scenario_from_dict(_two())
    with pytest.raises(InputError, match="not supported yet for a scenario with several"):
        sc.one_model  # noqa: B018


@pytest.mark.parametrize(("change", "field", "value"), [
    ({"model": LLAMA}, "model and models", None),
    ({"models": None}, "model: required", None),
    ({"classes": [{"name": "chat", "rate_rps": 1, "model": LLAMA},
                  {"name": "agent", "rate_rps": 1}]}, "classes[1].model: required", None),
    ({"classes": [{"name": "chat", "rate_rps": 1, "model": LLAMA},
                  {"name": "agent", "rate_rps": 1, "model": "gemma-2-9b-it"}]},
     "classes[1].model = gemma-2-9b-it", "not a served model"),
    ({"classes": [{"name": "chat", "rate_rps": 1, "model": "no-such-model"},
                  {"name": "agent", "rate_rps": 1, "model": QWEN}]},
     "classes[0].model", "no-such-model"),
    ({"classes": [{"name": "chat", "rate_rps": 1, "model": [LLAMA, "gemma-2-9b-it"]},
                  {"name": "agent", "rate_rps": 1, "model": QWEN}]},
     "classes[0].model", "gemma-2-9b-it is not a served model"),
    ({"classes": [{"name": "chat", "rate_rps": 1, "model": [LLAMA, LLAMA]},
                  {"name": "agent", "rate_rps": 1, "model": QWEN}]},
     "classes[0].model", "listed twice"),
    ({"classes": [{"name": "chat", "rate_rps": 1, "model": []},
                  {"name": "agent", "rate_rps": 1, "model": QWEN}]},
     "classes[0].model", "at least one"),
    ({"models": [LLAMA, LLAMA]}, f"models: {LLAMA} is listed twice", None),
    ({"fleet": [{"config": "1xH100-PCIe", "count": 1}]}, "fleet[0].model: required", None),
    ({"fleet": [{"config": "1xH100-PCIe", "count": 1, "model": "gemma-2-9b-it"}]},
     "fleet[0].model = gemma-2-9b-it", "not a served model"),
])
def test_refusals_name_the_field_and_value(change: dict[str, Any], field: str,
                                           value: str | None) -> None:
    data = _two(**change)
    if data["models"] is None:
        del data["models"]
    msg = _refused(data)
    assert field in msg
    if value is not None:
        assert value in msg


def test_one_model_pool_names_no_model() -> None:
    msg = _refused({"model": LLAMA, "classes": [{"name": "a", "rate_rps": 1}],
                    "fleet": [{"config": "1xH100-PCIe", "count": 1, "model": LLAMA}]})
    assert "fleet[0].model" in msg


def test_pool_names_gain_the_model() -> None:
    sc = scenario_from_dict(_two(fleet=[
        {"config": "1xH100-PCIe", "count": 1, "model": LLAMA},
        {"config": "1xH100-PCIe", "count": 2, "model": QWEN, "tier_ttft_p99_ms": 200}]))
    assert sc.fleet is not None
    assert [p.label for p in sc.fleet] == [f"{LLAMA}/1xH100-PCIe@EU27",
                                          f"{QWEN}/1xH100-PCIe@EU27/200ms"]
    assert Pool(config="1xH100-PCIe", count=1).label == "1xH100-PCIe@EU27"
    sub = sc.for_model(QWEN)
    assert sub.fleet is not None and [(p.label, p.count) for p in sub.fleet] == [
        ("1xH100-PCIe@EU27/200ms", 2)]


def test_models_with_their_own_config(tmp_path: Path) -> None:
    """`{name, model_config}` entries: each config joins the catalog (paths relative to the
    scenario file), and a class may list the two precisions of one model as variants."""
    import shutil

    for name in ("Llama-3.1-8B-Instruct", "Meta-Llama-3.1-8B-Instruct-FP8"):
        shutil.copytree(HF / name, tmp_path / "models" / name)
    (tmp_path / "s.yaml").write_text(
        "models:\n"
        "  - {name: Llama-3.1-8B-Instruct, model_config: models/Llama-3.1-8B-Instruct}\n"
        "  - {name: Meta-Llama-3.1-8B-Instruct-FP8,\n"
        "     model_config: models/Meta-Llama-3.1-8B-Instruct-FP8}\n"
        "classes:\n"
        "  - {name: chat, rate_rps: 1,\n"
        "     model: [Llama-3.1-8B-Instruct, Meta-Llama-3.1-8B-Instruct-FP8]}\n",
        encoding="utf-8")
    sc = load_scenario(tmp_path / "s.yaml")
    cat = sc.data_context().catalog
    assert served_models(sc) == ("Llama-3.1-8B-Instruct", "Meta-Llama-3.1-8B-Instruct-FP8")
    assert all(cat.knows_model(m) for m in served_models(sc))
    assert class_variants(sc, 0) == served_models(sc)
    with pytest.raises(InputError, match="lists variants"):
        class_model(sc, 0)
    assert sc.for_model("Meta-Llama-3.1-8B-Instruct-FP8").one_model == \
        "Meta-Llama-3.1-8B-Instruct-FP8"


def test_fleet_spec_names_the_model() -> None:
    pools = parse_fleet(f"2x{LLAMA}/1xH100-PCIe+1x{QWEN}/2xRTX-4090@FRA~spot+1x1xH100-PCIe")
    assert [(p.model, p.config, p.count, p.region, p.market) for p in pools] == [
        (LLAMA, "1xH100-PCIe", 2, "EU27", None), (QWEN, "2xRTX-4090", 1, "FRA", "spot"),
        (None, "1xH100-PCIe", 1, "EU27", None)]
    with pytest.raises(InputError, match="unknown model"):
        parse_fleet("2xno-such-model/1xH100-PCIe")

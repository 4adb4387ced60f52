"""The bounded YAML/JSON loader (``fleetplan._load``, issue 16 part 1): what an adversary's file
can make it do is refuse, in one line naming the file (and line), before anything large is built.

Each test is a case the adversarial pass found hanging, eating memory or raising a traceback.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fleetplan._load import (
    MAX_DEPTH,
    load_data,
    load_json,
    load_yaml,
    read_text_bounded,
    show_value,
)
from fleetplan.errors import InputError, InputLimitError
from fleetplan.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
HYBRID = ROOT / "examples" / "hybrid-chat-batch.yaml"


def _laughs(levels: int, width: int = 10) -> str:
    """A billion-laughs document: ``width ** levels`` leaves once its aliases are expanded."""
    lines = ["a0: &a0 [" + ", ".join(["lol"] * width) + "]"]
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def test_a_billion_laughs_is_refused_without_being_built() -> None:
    # 10^9 leaves expanded: the check counts on the node graph (each node once)
    with pytest.raises(InputLimitError, match=r"bomb\.yaml: its aliases expand to more than"):
        load_yaml(_laughs(9), source="bomb.yaml")


def test_a_recursive_alias_is_refused() -> None:
    with pytest.raises(InputLimitError, match="recursive"):
        load_yaml("a: &a [1, *a]\n", source="rec.yaml")


def test_aliases_nesting_deep_structures_in_each_other_are_refused() -> None:
    # 100 aliases of 30 levels each: few values, but 3000 levels once expanded (RecursionError
    # in whatever walks the value next)
    lines = [f"a{i}: &a{i} " + "[" * 30 + (f"*a{i - 1}" if i else "1") + "]" * 30
             for i in range(100)]
    with pytest.raises(InputLimitError, match="nested too deeply once its aliases are expanded"):
        load_yaml("\n".join(lines) + "\n", source="s.yaml")
    # an alias within the depth limit reads
    flat = "[" * (MAX_DEPTH - 3) + "1" + "]" * (MAX_DEPTH - 3)
    assert load_yaml(f"a: &a {flat}\nb: [*a]\n")["b"][0] == load_yaml(f"a: {flat}\n")["a"]


def test_a_document_of_too_many_values_is_refused_while_parsing() -> None:
    # 2e6 values made PyYAML hold ~740 MB of nodes for 14 s; the count stops at the limit
    with pytest.raises(InputLimitError, match=r"big\.yaml: more than 5 values \(at line 2\)"):
        load_yaml("a:\n- [1, 2, 3, 4, 5, 6]\n", source="big.yaml", max_nodes=5)
    assert load_yaml("a: [1, 2]\n", max_nodes=5) == {"a": [1, 2]}


def test_a_json_scenario_of_too_many_values_is_refused_before_validation(tmp_path: Path) -> None:
    # 2e6 values in `classes` held 2.9 GB for 14 s (one pydantic error each); a plain JSON read
    # (a detailed vLLM result) has no count limit
    p = tmp_path / "s.json"
    p.write_text(json.dumps({"model": "m", "classes": [1] * 1_000_001}))
    with pytest.raises(InputLimitError, match=r"s\.json: more than 1000000 values \(1000002\)"):
        load_scenario(p)
    assert len(load_json(p)["classes"]) == 1_000_001


def test_one_error_per_field_not_one_per_bad_item() -> None:
    from fleetplan.scenario import scenario_from_dict

    d = {"model": "DeepSeek-R1-Distill-Qwen-14B", "classes": [1] * 100_000}
    with pytest.raises(InputError) as err:
        scenario_from_dict(d, "s.yaml")
    assert str(err.value) == ("s.yaml: classes[0] = 1: expected a mapping of fields (name, "
                              "arrivals, rate_rps, rate_profile_rps, trace, burstiness, "
                              "input_tokens, output_tokens, max_total_tokens, slo, "
                              "prefix_cache_hit, overlong, pin, split, model)")


def test_a_few_aliases_and_merge_keys_still_read() -> None:
    got = load_yaml("slo: &s {ttft_p99_ms: 150}\na: *s\nb: {<<: *s, tpot_p99_ms: 60}\n")
    assert got == {"slo": {"ttft_p99_ms": 150}, "a": {"ttft_p99_ms": 150},
                   "b": {"ttft_p99_ms": 150, "tpot_p99_ms": 60}}


def test_too_many_aliases_are_refused() -> None:
    text = "a: &a 1\nb: [" + ", ".join(["*a"] * 50) + "]\n"
    assert load_yaml(text)["b"] == [1] * 50
    with pytest.raises(InputLimitError, match=r"line 2: more than 10 aliases"):
        load_yaml(text, max_aliases=10)


@pytest.mark.parametrize("text", [
    "[" * 100_000 + "]" * 100_000,                                    # flow, past libyaml's cap
    "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1),                    # flow, just over ours
    "".join("  " * i + "k:\n" for i in range(MAX_DEPTH + 1)) + "  " * (MAX_DEPTH + 1) + "v: 1\n",
])
def test_deep_yaml_is_refused_as_one_line_not_a_recursion_error(text: str) -> None:
    with pytest.raises(InputLimitError, match=r"deep\.yaml: nested too deeply"):
        load_yaml(text, source="deep.yaml")


def test_deep_json_is_refused_by_a_prescan() -> None:
    with pytest.raises(InputLimitError, match=r"deep\.json: nested too deeply \(more than 64 "
                                              r"levels, at line 3\)"):
        load_json('{"a":\n\n' + "[" * 70 + "]" * 70 + "}", source="deep.json")
    # brackets inside strings are text, not nesting
    assert load_json(json.dumps({"a": "[" * 1000})) == {"a": "[" * 1000}


def test_nesting_at_the_limit_reads() -> None:
    assert load_json("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    assert load_yaml("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None


def test_duplicate_yaml_keys_are_refused_naming_key_and_line() -> None:
    with pytest.raises(InputError, match=r"s\.yaml: line 4: duplicate key 'rate_rps'"):
        load_yaml("classes:\n  - name: chat\n    rate_rps: 1\n    rate_rps: 2\n", source="s.yaml")
    # the same key in two mappings is fine
    assert load_yaml("a: {x: 1}\nb: {x: 2}\n") == {"a": {"x": 1}, "b": {"x": 2}}


def test_duplicate_json_keys_are_refused_naming_key_and_line() -> None:
    text = '{"a": {"x": 1},\n "b": {"x": 1,\n       "x": 2}}'
    with pytest.raises(InputError, match=r"s\.json: line 3: duplicate key 'x'"):
        load_json(text, source="s.json")
    # escapes are compared decoded: "\u0041" is "A"
    with pytest.raises(InputError, match="duplicate key 'A'"):
        load_json('{"A": 1, "\\u0041": 2}')


def test_yaml_exponent_floats_read_as_numbers() -> None:
    # YAML 1.1 (PyYAML) reads 1e5 as the text "1e5"; fleetplan reads it as JSON and YAML 1.2 do
    got = load_yaml("a: 1e5\nb: 1.0e+5\nc: -2E-3\nd: '1e5'\ne: x1e5\nf: 1_000\n")
    assert got == {"a": 100000.0, "b": 100000.0, "c": -0.002, "d": "1e5", "e": "x1e5", "f": 1000}


def test_huge_integers_are_one_line() -> None:
    with pytest.raises(InputError, match=r"big\.yaml: not readable YAML"):
        load_yaml("a: " + "9" * 5000, source="big.yaml")
    with pytest.raises(InputError, match=r"big\.json: not readable JSON"):
        load_json('{"a": ' + "9" * 5000 + "}", source="big.json")


def test_a_fifo_is_refused_by_type_before_opening(tmp_path: Path) -> None:
    fifo = tmp_path / "s.yaml"
    os.mkfifo(fifo)  # no writer: opening it for reading would block forever
    with pytest.raises(InputError, match=r"s\.yaml: a FIFO \(named pipe\), not a scenario file"):
        load_scenario(fifo)


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_a_device_is_refused_by_type() -> None:
    with pytest.raises(InputError, match="/dev/zero: a device, not a scenario file"):
        load_scenario("/dev/zero")


def test_a_directory_and_a_symlink_to_one_are_refused(tmp_path: Path) -> None:
    (tmp_path / "link.yaml").symlink_to(tmp_path)
    for p in (tmp_path, tmp_path / "link.yaml"):
        with pytest.raises(InputError, match="a directory, not a scenario file"):
            load_scenario(p)


def test_a_symlink_to_a_regular_file_reads(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").symlink_to(HYBRID)
    assert load_scenario(tmp_path / "s.yaml").classes[0].name == "chat"


def test_a_file_over_the_size_limit_is_refused_from_its_size(tmp_path: Path) -> None:
    p = tmp_path / "big.json"
    p.write_bytes(b" " * 2000 + b"{}")
    with pytest.raises(InputLimitError, match=r"big\.json: 2002 bytes, more than the 1000"):
        read_text_bounded(p, what="plan file", max_bytes=1000)
    assert load_data(p, what="plan file") == {}


def test_show_value_renders_only_what_it_prints() -> None:
    x: list[object] = [1]
    for _ in range(80):  # 2^80 leaves once walked: only the shown prefix is rendered
        x = [x, x]
    text = show_value(x, 80)
    assert len(text) == 80 and text.endswith("...")
    assert show_value({"a": "b" * 500}).startswith('{"a": "bbb') and len(show_value("x" * 10**6)) \
        == 80
    assert show_value([1, "a", None, True]) == '[1, "a", null, true]'
    assert show_value(3.5) == "3.5" and show_value("abc") == "'abc'"
    assert "integer of" in show_value(10**5000)

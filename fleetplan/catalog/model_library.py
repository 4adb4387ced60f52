"""The bundled library of Hugging Face ``config.json`` files: popular checkpoints by hub id.

A model that is neither a row of the catalog's ``models.csv`` nor a config.json the user gave
(``--model-config``) is looked up here, so that a run or a scenario naming
``deepseek-ai/DeepSeek-R1`` or ``Qwen/Qwen3-235B-A22B-FP8`` is predicted without hunting for
its config.json. ``data/model_configs/<org>--<name>/config.json`` (and, for a ModelOpt export
that states its format there, ``hf_quant_config.json``) are the files NVIDIA's
aiconfigurator-core ships (Apache-2.0; ``data/model_configs/README.md``), read by the same
reader as a user's (:func:`fleetplan.catalog.hf_config.hf_config_fields`): what it cannot model
is refused in one line naming the file and field.

A name matches a folder by its hub id (``org/name``, any case), else by its short name when one
folder alone has it. A checkpoint whose name differs from one folder's only by an
instruction-tuning part (``-Instruct``, ``-it``, ``-Chat``) and Meta's ``Meta-`` prefix, in the
same organisation (``meta-llama/Llama-3.1-70B-Instruct`` and ``meta-llama/Meta-Llama-3.1-70B``,
``mistralai/Mixtral-8x7B-Instruct-v0.1`` and ``mistralai/Mixtral-8x7B-v0.1``), takes that
folder's architecture, which tuning does not change, and so do the later releases
:data:`SAME_ARCHITECTURE` names (Llama 3.3 70B, DeepSeek-V3-0324 and V3.1, DeepSeek-R1-0528);
the spec's ``source`` says so.

Main entry: :func:`library_spec` (``None`` when the library holds no such model).
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from fleetplan.catalog._tables import data_dir
from fleetplan.catalog.models import ModelSpec

LIBRARY = "model_configs"
PROVENANCE = "aiconfigurator-core 0.12.0, Apache-2.0; data/model_configs/README.md"
_TUNED = re.compile(r"-(instruct|it|chat)(?=-|$)", re.IGNORECASE)


def library_dir() -> Path:
    """The bundled library's folder (under the data folder ``FLEETPLAN_DATA_DIR`` may name)."""
    return data_dir() / LIBRARY


def _base_name(name: str) -> str:
    """A checkpoint's name folded for the base-model match: the case, an instruction-tuning
    suffix and Meta's ``Meta-`` prefix left out."""
    return _TUNED.sub("", name.casefold()).removeprefix("meta-")


@lru_cache(maxsize=4)
def _index(folder: str) -> tuple[dict[str, str], dict[str, list[str]], dict[str, list[str]]]:
    """(hub id folded -> hub id, short name folded -> hub ids, base name -> hub ids) of the
    library at ``folder``."""
    hub: dict[str, str] = {}
    short: dict[str, list[str]] = {}
    base: dict[str, list[str]] = {}
    root = Path(folder)
    if root.is_dir():
        for cfg in sorted(root.glob("*--*/config.json")):
            org, _, name = cfg.parent.name.partition("--")
            hid = f"{org}/{name}"
            hub[hid.casefold()] = hid
            short.setdefault(name.casefold(), []).append(hid)
            base.setdefault(_base_name(name), []).append(hid)
    return hub, short, base


# later releases of a library checkpoint whose config.json repeats its architecture (and
# context length): (the library's hub id, why)
SAME_ARCHITECTURE = {
    "meta-llama/Llama-3.3-70B-Instruct": (
        "meta-llama/Meta-Llama-3.1-70B", "Llama 3.3 70B is Llama 3.1 70B's architecture, as "
        "Meta's Llama 3.3 model card says"),
    "deepseek-ai/DeepSeek-V3-0324": (
        "deepseek-ai/DeepSeek-V3", "a later checkpoint of DeepSeek-V3, the same architecture "
        "as its model card says"),
    "deepseek-ai/DeepSeek-V3.1": (
        "deepseek-ai/DeepSeek-V3", "DeepSeek-V3.1 keeps DeepSeek-V3's architecture, as its "
        "model card says"),
    "deepseek-ai/DeepSeek-R1-0528": (
        "deepseek-ai/DeepSeek-R1", "a later checkpoint of DeepSeek-R1, the same architecture "
        "as its model card says"),
}
_TUNING = ("the names differ only by an instruction-tuning suffix or Meta's 'Meta-' prefix; "
           "tuning does not change the architecture")


def find(name: str) -> tuple[str, str, str | None] | None:
    """``(the library's hub id, the hub id asked for, why the library's architecture is that
    checkpoint's)`` for ``name`` (a hub id, or a short name one folder alone has); the why is
    None for the library's own checkpoint. A name of :data:`SAME_ARCHITECTURE`, or one that
    differs from a folder's only by an instruction-tuning part and Meta's ``Meta-`` prefix in
    the same organisation (the base's organisation where ``name`` has none), takes that
    folder's. None where the library holds none of these."""
    hub, short, base = _index(str(library_dir()))
    text = name.strip().rstrip("/")
    org, sep, short_name = text.rpartition("/")
    if sep and text.casefold() in hub:
        return hub[text.casefold()], hub[text.casefold()], None
    if not sep and len(short.get(text.casefold(), [])) == 1:
        return short[text.casefold()][0], short[text.casefold()][0], None
    for alias, (hid, why) in SAME_ARCHITECTURE.items():
        if text.casefold() in (alias.casefold(), alias.partition("/")[2].casefold()):
            return hid, alias, why
    found = [h for h in base.get(_base_name(short_name), [])
             if not sep or h.partition("/")[0].casefold() == org.casefold()]
    if len(found) == 1:
        return found[0], text if sep else f"{found[0].partition('/')[0]}/{text}", _TUNING
    return None


def library_spec(name: str) -> ModelSpec | None:
    """The spec of ``name`` (a hub id or short name) from the bundled library, None where it
    holds no such model; a config.json the reader cannot model raises its one-line
    :class:`~fleetplan.errors.InputError`."""
    hit = find(name)
    if hit is None:
        return None
    hid, asked, why = hit
    folder = library_dir() / hid.replace("/", "--", 1)
    return _spec(str(folder), folder.stat().st_mtime, asked, hid, why)


@lru_cache(maxsize=64)
def _spec(folder: str, _mtime: float, asked: str, hid: str, why: str | None) -> ModelSpec:
    short = asked.rstrip("/").split("/")[-1]
    spec = ModelSpec.from_hf_config(folder, name=short)
    how = hid if why is None else f"{hid}, whose architecture {asked} shares ({why})"
    return spec.model_copy(update={
        "hf_id": asked, "source": f"bundled config.json of {how} ({PROVENANCE})"})

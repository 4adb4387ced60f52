"""The models a scenario serves (``model:`` or ``models:``) and the model of each class.

A scenario names exactly one of ``model`` (the single served model, as always) and ``models`` (a
list of catalog names or ``{name, model_config}`` records). Each traffic class is served by one
model: its ``classes[].model``, required when ``models`` has more than one entry, else the only
model. A pool of replicas serves one model; in a scenario with several models every fleet pool
names its ``model`` and the pools' names carry it as a prefix
(``Meta-Llama-3-8B-Instruct/1xH100-PCIe@EU27/200ms``).

Main entries: :class:`ServedModel` (one ``models:`` entry), :func:`served_models`,
:func:`is_multi_model`, :func:`class_model` and :func:`check_served` (the cross-field checks the
scenario runs). The planning code turns a scenario with several models into one sub-scenario per
model (:meth:`~fleetplan.scenario.model.Scenario.for_model`) for what is measured per model
(capacities), and plans and simulates the fleet as a whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import Field, ValidationInfo, field_validator, model_validator

from fleetplan._load import show_value
from fleetplan.catalog.catalog import Catalog
from fleetplan.errors import FleetplanError, InputError
from fleetplan.scenario.base import Strict, catalog_of


class Scenario(Protocol):
    """What these rules read of a :class:`~fleetplan.scenario.model.Scenario` (a protocol: the
    scenario record imports this module)."""

    @property
    def model(self) -> str | None: ...
    @property
    def models(self) -> Sequence[ServedModel] | None: ...
    @property
    def classes(self) -> Sequence[Any]: ...
    @property
    def hf_model_config(self) -> str | None: ...
    @property
    def fleet(self) -> Sequence[Any] | None: ...

MODEL_MARK = "/"
"""What separates a pool's model from its configuration in a multi-model pool name."""


class ServedModel(Strict):
    """One model of `models:`: a catalog name, or a name with its own Hugging Face config."""

    name: str = Field(description="the model's short name or hub id in the catalog (with "
                                  "`model_config`: the name it joins the catalog under, the "
                                  "config folder's name)", examples=["Meta-Llama-3-8B-Instruct"])
    hf_model_config: str | None = Field(
        default=None, alias="model_config", description="a Hugging Face config.json of the "
        "model, or the folder holding one (relative to the scenario file; never downloaded): "
        "the model joins the catalog under the folder's name (default: none, a catalog model)",
        examples=["models/Qwen3-8B"])

    @model_validator(mode="before")
    @classmethod
    def _name_only(cls, v: Any) -> Any:
        return {"name": v} if isinstance(v, str) else v

    @field_validator("name")
    @classmethod
    def _known(cls, v: str, info: ValidationInfo) -> str:
        return canon_model(v, catalog_of(info))


def canon_model(name: str, catalog: Catalog) -> str:
    """The catalog's short name of a model (``ValueError`` naming the valid ones otherwise)."""
    try:
        return catalog.model(name).model
    except FleetplanError as exc:
        raise ValueError(str(exc)) from None


def served_models(scenario: Scenario) -> tuple[str, ...]:
    """The models the scenario serves, in the order of its file (one for ``model:``)."""
    if scenario.models is not None:
        return tuple(m.name for m in scenario.models)
    assert scenario.model is not None  # the scenario's checks hold one of the two
    return (scenario.model,)


def model_config_of(scenario: Scenario, model: str) -> str | None:
    """The ``config.json`` (path as the scenario resolved it) that ``model`` joined the catalog
    from: its ``models:`` entry's ``model_config``, else the scenario's own for its one model;
    ``None`` for a catalog model."""
    for m in scenario.models or ():
        if m.name == model:
            return m.hf_model_config
    return scenario.hf_model_config if scenario.models is None else None


def is_multi_model(scenario: Scenario) -> bool:
    """Whether the scenario serves more than one model (its pool names then carry the model)."""
    return len(served_models(scenario)) > 1


def class_variants(scenario: Scenario, index: int) -> tuple[str, ...]:
    """The models that may serve class ``index``: its ``model`` (one, or its list of
    interchangeable variants), else the only model."""
    own = scenario.classes[index].model
    if isinstance(own, str):
        return (own,)
    if isinstance(own, list):
        return tuple(own)
    return served_models(scenario)[:1]


def class_model(scenario: Scenario, index: int) -> str:
    """The model that serves class ``index``: its ``model``, else the only model.
    :class:`InputError` for a class that lists several variants (``solve`` chooses one)."""
    variants = class_variants(scenario, index)
    if len(variants) > 1:
        raise InputError(f"classes[{index}].model lists variants ({', '.join(variants)}): "
                         "fleetplan solve chooses one of them; here the class needs one model")
    return variants[0]


def serving_models(scenario: Scenario) -> tuple[str, ...]:
    """The served models that some class may use (a model no class names has nothing to plan;
    it may stay in ``models:``, e.g. the variant a solve did not choose)."""
    used = {m for i in range(len(scenario.classes)) for m in class_variants(scenario, i)}
    return tuple(m for m in served_models(scenario) if m in used)


def not_for_several(scenario: Scenario, what: str) -> InputError:
    """The one-line refusal of a step that does not yet handle a scenario with several models."""
    return InputError(f"{what} is not supported yet for a scenario with several models "
                      f"(models: {', '.join(served_models(scenario))}); plan each model on its "
                      "own for it, or leave it out")


def _check_variants(i: int, variants: list[str], names: Sequence[str]) -> None:
    """A class's list of interchangeable variants: at least one, each a served model, once."""
    if not variants:
        raise ValueError(f"classes[{i}].model = []: name at least one model")
    for m in variants:
        if m not in names:
            raise ValueError(f"classes[{i}].model = {show_value(variants, 60)}: {m} is not a "
                             f"served model (models: {', '.join(names)})")
    if len(set(variants)) != len(variants):
        raise ValueError(f"classes[{i}].model = {show_value(variants, 60)}: a variant is "
                         "listed twice")


def check_served(scenario: Scenario) -> None:
    """``model`` xor ``models``; every class's ``model`` one of them (required with several);
    every fleet pool's ``model`` one of them (required with several). ``ValueError`` naming
    the field and its value."""
    if scenario.model is not None and scenario.models is not None:
        raise ValueError("model and models: give one of them, not both (models: a list of the "
                         "models served)")
    if scenario.model is None and scenario.models is None:
        raise ValueError("model: required field is missing (or give models: a list of the "
                         "models served)")
    names = served_models(scenario)
    if len(set(names)) != len(names):
        seen: set[str] = set()
        dup = next(n for n in names if n in seen or seen.add(n))  # type: ignore[func-returns-value]
        raise ValueError(f"models: {dup} is listed twice")
    several = len(names) > 1
    for i, c in enumerate(scenario.classes):
        m = c.model
        if isinstance(m, list):
            _check_variants(i, m, names)
            continue
        if m is None:
            if several:
                raise ValueError(f"classes[{i}].model: required when models lists several "
                                 f"models (one of {', '.join(names)})")
        elif m not in names:
            raise ValueError(f"classes[{i}].model = {m}: not a served model (models: "
                             f"{', '.join(names)})")
    for i, p in enumerate(scenario.fleet or ()):
        if p.model is None:
            if several:
                raise ValueError(f"fleet[{i}].model: required when models lists several models "
                                 f"(one of {', '.join(names)})")
        elif p.model not in names:
            raise ValueError(f"fleet[{i}].model = {p.model}: not a served model (models: "
                             f"{', '.join(names)})")
        elif not several:
            raise ValueError(f"fleet[{i}].model = {p.model}: name a pool's model only when "
                             "models lists several")

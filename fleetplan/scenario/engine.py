"""A candidate's ``server:`` record: the engine settings its replicas are started with.

``candidates[].server`` states, for one hardware configuration, the vLLM settings the
optimizer's replicas of it run with (``{max_num_seqs: 64, gpu_memory_utilization: 0.85}``):
the same keys, types and bounds as ``--engine-arg`` on ``validate``, ``predict``, ``ingest``
and ``bench`` (:data:`fleetplan.profiles.server.ENGINE_ARGS`, checked by its
:meth:`~fleetplan.profiles.server.EngineArg.check`; settings vLLM refuses together by
:class:`~fleetplan.profiles.server.ServerDescription`). A bad key or value is one line naming
the file, the field's path and the value (``candidates[0].server.max_num_seqs = 0: must be >=
1``).

:class:`EngineSettings` is the record; :meth:`EngineSettings.description` turns it into the
:class:`~fleetplan.profiles.server.ServerDescription` that
:func:`fleetplan.validate.server_params.apply_server` maps onto a replica's parameters (the
capacity the optimizer measures, and the plan's simulation). :func:`candidate_servers` reads a
scenario's candidates into one record per configuration; :func:`server_notes` says so in a
plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field, ValidationInfo, create_model, field_validator, model_validator

from fleetplan.errors import InputError
from fleetplan.profiles.server import ENGINE_ARGS, EngineValue, ServerDescription
from fleetplan.scenario.base import Strict


def _bounds(key: str) -> dict[str, float]:
    """The setting's bounds as the schema states them (the checks are EngineArg.check's,
    which run first and word the errors)."""
    arg = ENGINE_ARGS[key]
    out: dict[str, float] = {}
    if arg.low is not None:
        out["gt" if arg.low_open else "ge"] = int(arg.low) if arg.kind is int else arg.low
    if arg.high is not None:
        out["le"] = int(arg.high) if arg.kind is int else arg.high
    return out


class _EngineBase(Strict):
    """The checks of every engine setting (the fields are made from ENGINE_ARGS below)."""

    @field_validator("*", mode="before")
    @classmethod
    def _check(cls, v: Any, info: ValidationInfo) -> Any:
        if v is not None and info.field_name is not None:
            ENGINE_ARGS[info.field_name].check(v)  # ValueError: the one-line reason
        return v

    @model_validator(mode="after")
    def _together(self) -> Any:
        # settings vLLM refuses together (fewer batched tokens than sequences)
        try:
            ServerDescription(engine_args=self.stated(), names={"engine_args": "server"})
        except InputError as exc:
            raise ValueError(str(exc).removeprefix("server ")) from None
        return self

    def stated(self) -> dict[str, EngineValue]:
        """The settings given, in :data:`~fleetplan.profiles.server.ENGINE_ARGS`' order."""
        return {k: v for k in ENGINE_ARGS if (v := getattr(self, k)) is not None}

    def description(self, where: str = "server") -> ServerDescription:
        """The settings as the server description that validate's mapping reads (its errors
        name ``where``, e.g. ``candidates[0].server``)."""
        return ServerDescription(engine_args=self.stated(), names={"engine_args": where})


EngineSettings: Any = create_model(
    "EngineSettings", __base__=_EngineBase,
    __doc__="Engine settings a candidate's replicas are started with (vLLM's flags in snake "
            "case; each optional: not given, the engine version's default).",
    **{a.key: ((Literal[a.choices] if a.choices else a.kind) | None,  # type: ignore[valid-type]
               Field(  # type: ignore[call-overload]
        default=None, description=a.effect, **_bounds(a.key)))
       for a in ENGINE_ARGS.values()})


def candidate_servers(candidates: Sequence[Any] | None) -> dict[str, dict[str, EngineValue]]:
    """The stated engine settings per configuration of ``candidates`` (those with a
    ``server:`` record that states any). ``enable_prefix_caching: false`` changes no
parameter: the scenario refuses it beside a class that states a ``prefix_cache_hit``, and
without one no prompt is served from the cache anyway."""
    out: dict[str, dict[str, EngineValue]] = {}
    for c in candidates or ():
        server = getattr(c, "server", None)
        if server is not None and server.stated():
            out[c.config] = server.stated()
    return out


def server_notes(candidates: Sequence[Any] | None) -> list[str]:
    """One plan note per configuration whose candidate states engine settings: the plan's
    figures for it are those of servers started with them."""
    notes = []
    for config, args in candidate_servers(candidates).items():
        stated = ", ".join(f"{k}={str(v).lower()}" for k, v in args.items())
        # a KV-cache dtype also changes what reading a cached token costs
        effect = ("what a replica holds at once and what reading its KV cache costs"
                  if str(args.get("kv_cache_dtype", "auto")) != "auto"
                  else "what a replica holds at once, not what a token costs")
        notes.append(f"{config} replicas run with {stated} (its candidate's server:): its "
                     "capacities are measured and the plan simulated with these engine "
                     f"settings, which change {effect}")
    return notes

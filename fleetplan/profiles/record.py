"""The typed record of one measured serving run (:class:`BenchmarkRun`).

Its fields are exactly the store's columns (:mod:`fleetplan.profiles.schema`), so a record and a
store row convert losslessly. Numbers are bounded (counts >= 0, latencies finite and >= 0);
unknown fields are refused.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator

from fleetplan.catalog.hardware import config_name
from fleetplan.profiles.schema import COLUMNS, INF_ALLOWED

_TYPES: dict[str, type] = {"str": str, "int": int, "float": float, "bool": bool}
_AT_LEAST_ONE = {"gpu_count", "tp_size", "num_prompts", "source_line"}


class _RunBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=True)

    @field_validator("*", mode="after")
    @classmethod
    def _finite(cls, v: Any, info: Any) -> Any:
        if isinstance(v, float) and not isinstance(v, bool):
            if math.isnan(v) or (math.isinf(v) and info.field_name not in INF_ALLOWED):
                raise ValueError(f"{v!r} is not a finite number")
        return v

    @property
    def config_name(self) -> str:
        return config_name(self.gpu, self.gpu_count)  # type: ignore[attr-defined]


def _field(name: str, kind: str, required: bool) -> tuple[Any, Any]:
    typ: Any = _TYPES[kind]
    kwargs: dict[str, Any] = {}
    if kind in ("int", "float"):
        kwargs["ge"] = 1 if name in _AT_LEAST_ONE else 0
        if name in ("burstiness", "request_rate"):
            kwargs = {"gt": 0}
    if kind == "bool" and name == "partial":
        return (bool, Field(default=False))
    if not required:
        return (typ | None, Field(default=None, **kwargs))
    if kind == "str":
        kwargs["min_length"] = 1
    return (typ, Field(**kwargs))


BenchmarkRun: type[_RunBase] = create_model(  # type: ignore[call-overload]
    "BenchmarkRun",
    __base__=_RunBase,
    __doc__="One measured serving run: model, hardware, protocol, results (store row).",
    **{c.name: _field(c.name, c.kind, c.required) for c in COLUMNS},
)

"""Model specifications (public model-card facts): the record and its readers.

Main entries: :class:`ModelSpec`, :func:`read_models` (one ``models.csv``),
:meth:`ModelSpec.from_hf_config` (a local Hugging Face ``config.json``:
:mod:`fleetplan.catalog.hf_config`), :func:`normalize_model`
(``deepseek-ai/DeepSeek-R1-Distill-Qwen-14B`` -> ``DeepSeek-R1-Distill-Qwen-14B``). A model is
looked up by name in a :class:`~fleetplan.catalog.catalog.Catalog` (:meth:`Catalog.model`).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from fleetplan.catalog._arch import model_inconsistency
from fleetplan.catalog._rows import validate_row
from fleetplan.catalog._tables import read_checked_csv, row_line
from fleetplan.catalog.hf_config import hf_config_fields, refusal
from fleetplan.errors import DataError, InputError

__all__ = ["ModelSpec", "model_inconsistency", "normalize_model", "plausible_bounds",
           "read_models"]


def plausible_bounds(field: str) -> tuple[float, float]:
    """``(lowest, highest)`` that :class:`ModelSpec` accepts for ``field``."""
    lo, hi = -math.inf, math.inf
    for m in ModelSpec.model_fields[field].metadata:
        lo = getattr(m, "ge", lo)
        hi = getattr(m, "le", hi)
    return lo, hi


class ModelSpec(BaseModel):
    """Architecture facts of one LLM, as its ``config.json`` states them.

    MoE models hold ``params_b`` resident (every expert) and ``active_params_b`` per token (the
    routed experts); dense models leave ``active_params_b`` unset (= ``params_b``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Bounds are what a served LLM can plausibly have (far beyond today's largest, and far below
    # what overflows the arithmetic downstream); the config.json reader checks its fields
    # against the same ones (plausible_bounds). docs/catalogs.md lists them.
    model: str = Field(min_length=1)
    hf_id: str
    architecture: str
    params_b: float = Field(gt=0, le=1e5, description="parameters, billions (resident)")
    layers: int = Field(ge=1, le=4096)
    hidden_size: int = Field(ge=8, le=1 << 20)
    intermediate_size: int = Field(ge=1, le=1 << 22)
    attention_heads: int = Field(ge=1, le=1 << 14)
    kv_heads: int = Field(ge=1, le=1 << 14)
    head_dim: int = Field(ge=1, le=1 << 14)
    vocab_size: int = Field(ge=2, le=1 << 26)
    context_length: int = Field(ge=2, le=1 << 30, description="a prompt token and a reply token "
                                "at least")
    served_dtype: str
    weight_bytes_per_param: float = Field(ge=0.05, le=8.0, description="1 bit with scales to "
                                          "fp64")
    source: str
    tied_embeddings: bool = False
    sliding_window: int | None = Field(default=None, ge=1, le=1 << 30)
    num_experts: int = Field(default=0, ge=0, le=1 << 16,
                             description="routed experts per MoE layer")
    experts_per_token: int = Field(default=0, ge=0, le=1 << 16)
    shared_expert_intermediate_size: int = Field(default=0, ge=0, le=1 << 22)
    moe_intermediate_size: int | None = Field(default=None, ge=1, le=1 << 22)
    active_params_b: float | None = Field(default=None, gt=0, le=1e5,
                                          description="parameters a token passes, billions")

    @model_validator(mode="after")
    def _consistent(self) -> ModelSpec:
        # one rule for models.csv rows and config.json files (hf_config reads it from here)
        for field, why in model_inconsistency(self.attention_heads, self.kv_heads,
                                              self.hidden_size, self.num_experts,
                                              self.experts_per_token):
            raise ValueError(f"{field}: {why}")
        if self.active_params_b is not None and self.active_params_b > self.params_b * 1.0001:
            raise ValueError(f"active_params_b: {self.active_params_b:g} is more than the "
                             f"{self.params_b:g} billion parameters resident")
        return self

    @classmethod
    def from_hf_config(cls, path: str | os.PathLike[str], *, name: str | None = None
                       ) -> ModelSpec:
        """The spec of a local Hugging Face ``config.json`` (file or folder; never a download):
        see :func:`fleetplan.catalog.hf_config.hf_config_fields`. A value these bounds refuse
        is one line naming the file and the config.json field it comes from."""
        p, fields = hf_config_fields(path, bounds=plausible_bounds, name=name)
        try:
            return cls(**fields)
        except ValidationError as exc:
            raise InputError(refusal(p, fields, exc.errors())) from None

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def active_b(self) -> float:
        """Billions of parameters one token's forward pass multiplies (= ``params_b`` dense)."""
        return self.active_params_b if self.active_params_b is not None else self.params_b

    @property
    def weight_bytes(self) -> float:
        """Bytes of weights as served (fp16: 2 per parameter), every expert resident."""
        return self.params_b * 1e9 * self.weight_bytes_per_param

    @property
    def weight_bytes_fp16(self) -> float:
        return self.params_b * 1e9 * 2.0

    @property
    def flops_per_token(self) -> float:
        """Dense-matmul FLOPs of one token's forward pass: two per active parameter."""
        return 2.0 * self.active_b * 1e9

    def kv_bytes_per_token(self, kv_dtype_bytes: float = 2.0) -> float:
        """KV-cache bytes per token over all layers (K and V)."""
        return 2.0 * self.layers * self.kv_heads * self.head_dim * kv_dtype_bytes


_NUMERIC = ["params_b", "layers", "hidden_size", "intermediate_size", "attention_heads",
            "kv_heads", "head_dim", "vocab_size", "context_length", "weight_bytes_per_param"]
_OPTIONAL = ["sliding_window", "num_experts", "experts_per_token",
             "shared_expert_intermediate_size", "moe_intermediate_size", "active_params_b"]
_FLOATS = {"params_b", "weight_bytes_per_param", "active_params_b"}
REQUIRED = [k for k, f in ModelSpec.model_fields.items() if f.is_required()]


def read_models(path: str | os.PathLike[str]) -> dict[str, ModelSpec]:
    """The models of one ``models.csv`` (bundled schema; the MoE columns are optional)."""
    df = read_checked_csv(path, required=REQUIRED, numeric=_NUMERIC, positive=_NUMERIC,
                          optional_numeric=_OPTIONAL, unique=["model"])
    out: dict[str, ModelSpec] = {}
    for i, r in enumerate(df.to_dict("records")):
        row: dict[str, Any] = {k: v for k, v in r.items() if k in ModelSpec.model_fields}
        for k in _NUMERIC + _OPTIONAL:
            v = row.get(k)
            if isinstance(v, float) and math.isnan(v):
                row.pop(k)
            elif v is not None and k not in _FLOATS:
                if float(v) != int(v):  # 2.5 layers is a typo, not 2
                    raise DataError(f"{path}: row {row_line(df, i)}, column {k}: {v!r} is not "
                                    "a whole number")
                row[k] = int(v)
        if "tied_embeddings" in row:
            row["tied_embeddings"] = str(row["tied_embeddings"]).strip().lower() in (
                "true", "1", "yes")
        out[str(row["model"])] = validate_row(ModelSpec, row, Path(path), row_line(df, i))
    return out


def normalize_model(model_id: str) -> str:
    """Short model name: the part after the last ``/`` of a hub id."""
    return model_id.rstrip("/").split("/")[-1]

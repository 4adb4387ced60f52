"""Model specifications (public model-card facts) and model-id normalization.

Main entries: :func:`load_models` (the active catalog's models, :mod:`fleetplan.catalog.catalog`),
:func:`get_model`, :func:`normalize_model` (``deepseek-ai/DeepSeek-R1-Distill-Qwen-14B`` ->
``DeepSeek-R1-Distill-Qwen-14B``), :meth:`ModelSpec.from_hf_config` (a local Hugging Face
``config.json``: :mod:`fleetplan.catalog.hf_config`).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from fleetplan.catalog._tables import read_checked_csv
from fleetplan.errors import DataError, UnknownNameError


class ModelSpec(BaseModel):
    """Architecture facts of one LLM, as its ``config.json`` states them.

    MoE models hold ``params_b`` resident (every expert) and ``active_params_b`` per token (the
    routed experts); dense models leave ``active_params_b`` unset (= ``params_b``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(min_length=1)
    hf_id: str
    architecture: str
    params_b: float = Field(gt=0, description="parameters, billions (resident)")
    layers: int = Field(gt=0)
    hidden_size: int = Field(gt=0)
    intermediate_size: int = Field(gt=0)
    attention_heads: int = Field(gt=0)
    kv_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    vocab_size: int = Field(gt=0)
    context_length: int = Field(gt=0)
    served_dtype: str
    weight_bytes_per_param: float = Field(gt=0)
    source: str
    tied_embeddings: bool = False
    sliding_window: int | None = Field(default=None, gt=0)
    num_experts: int = Field(default=0, ge=0, description="routed experts per MoE layer")
    experts_per_token: int = Field(default=0, ge=0)
    shared_expert_intermediate_size: int = Field(default=0, ge=0)
    moe_intermediate_size: int | None = Field(default=None, gt=0)
    active_params_b: float | None = Field(default=None, gt=0,
                                          description="parameters a token passes, billions")

    @classmethod
    def from_hf_config(cls, path: str | os.PathLike[str], *, name: str | None = None
                       ) -> ModelSpec:
        """The spec of a local Hugging Face ``config.json`` (file or folder; never a download):
        see :func:`fleetplan.catalog.hf_config.spec_from_hf_config`."""
        from fleetplan.catalog.hf_config import spec_from_hf_config

        return spec_from_hf_config(path, name=name)

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
    from fleetplan.catalog._rows import validate_row

    df = read_checked_csv(path, required=REQUIRED, numeric=_NUMERIC, positive=_NUMERIC,
                          optional_numeric=_OPTIONAL)
    out: dict[str, ModelSpec] = {}
    for i, r in enumerate(df.to_dict("records")):
        row: dict[str, Any] = {k: v for k, v in r.items() if k in ModelSpec.model_fields}
        for k in _NUMERIC + _OPTIONAL:
            v = row.get(k)
            if isinstance(v, float) and math.isnan(v):
                row.pop(k)
            elif v is not None and k not in _FLOATS:
                if float(v) != int(v):  # 2.5 layers is a typo, not 2
                    raise DataError(f"{path}: row {i + 2}, column {k}: {v!r} is not a whole "
                                    "number")
                row[k] = int(v)
        if "tied_embeddings" in row:
            row["tied_embeddings"] = str(row["tied_embeddings"]).strip().lower() in (
                "true", "1", "yes")
        out[str(row["model"])] = validate_row(ModelSpec, row, Path(path), i)
    return out


def load_models() -> dict[str, ModelSpec]:
    """All models of the active catalog by short name (bundled, user folders, model configs)."""
    from fleetplan.catalog.catalog import active_catalog

    return active_catalog().models()


def normalize_model(model_id: str) -> str:
    """Short model name: the part after the last ``/`` of a hub id."""
    return model_id.rstrip("/").split("/")[-1]


def get_model(name: str) -> ModelSpec:
    """Spec of a model by short name or hub id (a spec's own ``hf_id`` matches too)."""
    models = load_models()
    short = normalize_model(name)
    if short in models:
        return models[short]
    for spec in models.values():
        if spec.hf_id == name or normalize_model(spec.hf_id) == short:
            return spec
    raise UnknownNameError("model", name, models)

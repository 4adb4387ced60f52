"""Model specifications (public model-card facts) and model-id normalization.

Main entries: :func:`load_models`, :func:`get_model`, :func:`normalize_model`
(``deepseek-ai/DeepSeek-R1-Distill-Qwen-14B`` -> ``DeepSeek-R1-Distill-Qwen-14B``).
"""

from __future__ import annotations

from functools import cache

from pydantic import BaseModel, ConfigDict, Field

from fleetplan.catalog._tables import bundled, read_checked_csv
from fleetplan.errors import UnknownNameError


class ModelSpec(BaseModel):
    """Architecture facts of one LLM, as its ``config.json`` states them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(min_length=1)
    hf_id: str
    architecture: str
    params_b: float = Field(gt=0, description="parameters, billions")
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

    @property
    def weight_bytes(self) -> float:
        """Bytes of weights as served (fp16: 2 per parameter)."""
        return self.params_b * 1e9 * self.weight_bytes_per_param

    @property
    def weight_bytes_fp16(self) -> float:
        return self.params_b * 1e9 * 2.0

    def kv_bytes_per_token(self, kv_dtype_bytes: float = 2.0) -> float:
        """KV-cache bytes per token over all layers (K and V)."""
        return 2.0 * self.layers * self.kv_heads * self.head_dim * kv_dtype_bytes


_NUMERIC = ["params_b", "layers", "hidden_size", "intermediate_size", "attention_heads",
            "kv_heads", "head_dim", "vocab_size", "context_length", "weight_bytes_per_param"]


@cache
def load_models() -> dict[str, ModelSpec]:
    """All catalogued models by short name."""
    df = read_checked_csv(bundled("models.csv"), required=list(ModelSpec.model_fields),
                          numeric=_NUMERIC, positive=_NUMERIC)
    out: dict[str, ModelSpec] = {}
    for r in df.to_dict("records"):
        for k in _NUMERIC:
            if k != "params_b" and k != "weight_bytes_per_param":
                r[k] = int(r[k])
        out[r["model"]] = ModelSpec.model_validate(r)
    return out


def normalize_model(model_id: str) -> str:
    """Short model name: the part after the last ``/`` of a hub id."""
    return model_id.rstrip("/").split("/")[-1]


def get_model(name: str) -> ModelSpec:
    """Spec of a model by short name or hub id."""
    models = load_models()
    short = normalize_model(name)
    if short not in models:
        raise UnknownNameError("model", name, models)
    return models[short]

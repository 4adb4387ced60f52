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
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from fleetplan.catalog._arch import model_inconsistency
from fleetplan.catalog._rows import validate_row
from fleetplan.catalog._tables import read_checked_csv, row_line
from fleetplan.catalog.hf_config import cache_repo_id, hf_config_fields, refusal
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
    # Multi-head latent attention (DeepSeek-V2/V3): one latent of kv_lora_rank +
    # qk_rope_head_dim elements per token and layer is the whole KV cache
    kv_lora_rank: int | None = Field(default=None, ge=1, le=1 << 16)
    qk_rope_head_dim: int | None = Field(default=None, ge=1, le=1 << 14)
    # Hybrid layers (layer_types): how many layers attend over sliding_window tokens only, and
    # the KV heads / head size of the full-attention layers where they differ (Gemma-4)
    sliding_layers: int = Field(default=0, ge=0, le=4096)
    full_kv_heads: int | None = Field(default=None, ge=1, le=1 << 14)
    full_head_dim: int | None = Field(default=None, ge=1, le=1 << 14)
    # What vLLM's --kv-cache-dtype auto resolves to for this checkpoint: None, the model's 16
    # bits; "fp8" where a ModelOpt checkpoint states an FP8 kv_cache_scheme
    auto_kv_cache_dtype: Literal["fp8"] | None = None
    # Linear-attention layers (layer_types "linear_attention": Qwen3-Next / Qwen3.5 / Qwen3.6
    # Gated DeltaNet): no per-token KV, a fixed-size state per sequence and layer of
    # linear_state_elements (value heads x key dim x value dim, at linear_state_bytes each) and
    # linear_conv_elements (the short convolution's (kernel - 1) x channels, at 16 bits), both
    # split over a tensor-parallel group (vLLM's MambaStateShapeCalculator)
    linear_layers: int = Field(default=0, ge=0, le=4096)
    linear_state_elements: int = Field(default=0, ge=0, le=1 << 40)
    linear_conv_elements: int = Field(default=0, ge=0, le=1 << 40)
    linear_state_bytes: float = Field(default=2.0, ge=1.0, le=4.0)
    linear_heads: int | None = Field(default=None, ge=1, le=1 << 14,
                                     description="key and value heads of the linear layers "
                                                 "(the fewer), split over a TP group")

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
        if (self.kv_lora_rank is None) != (self.qk_rope_head_dim is None):
            raise ValueError("kv_lora_rank: multi-head latent attention states both "
                             "kv_lora_rank and qk_rope_head_dim")
        if self.sliding_layers > self.layers:
            raise ValueError(f"sliding_layers: {self.sliding_layers} is more than the "
                             f"{self.layers} layers")
        if self.sliding_layers + self.linear_layers > self.layers:
            raise ValueError(f"linear_layers: {self.linear_layers} and {self.sliding_layers} "
                             f"sliding layers are more than the {self.layers} layers")
        if self.linear_layers and not self.linear_state_elements:
            raise ValueError(f"linear_layers: {self.linear_layers} without their state "
                             "(linear_state_elements)")
        if self.sliding_layers and self.sliding_window is None:
            raise ValueError(f"sliding_layers: {self.sliding_layers} without a sliding_window")
        fk = self.full_kv_heads
        if fk is not None and (fk > self.attention_heads or self.attention_heads % fk):
            raise ValueError(f"full_kv_heads: {fk} must divide the {self.attention_heads} "
                             "attention heads")
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

    @property
    def is_mla(self) -> bool:
        """Multi-head latent attention: the KV cache is one latent per token and layer."""
        return self.kv_lora_rank is not None

    def kv_elements_per_token(self, tp: int = 1) -> tuple[float, float]:
        """KV-cache elements one token adds on each GPU of a tensor-parallel group of ``tp``:
        ``(full, windowed)``, those of the full-attention layers (kept for the whole sequence)
        and those of the sliding-window layers (kept for the last ``sliding_window`` tokens
        only).

        - Grouped-query attention: K and V, ``2 x kv_heads x head_dim`` per layer, the KV heads
          split over the group (replicated when fewer than the group).
        - Multi-head latent attention: ``kv_lora_rank + qk_rope_head_dim`` per layer, one
          latent shared by all heads and **replicated on every rank**, never split: vLLM's
          ``MLAAttention.get_kv_cache_spec`` builds an ``MLAAttentionSpec`` with
          ``num_kv_heads=1``, ``max_tp_shards=1`` and ``head_size = kv_lora_rank +
          qk_rope_head_dim`` (vLLM 0.32.0 ``model_executor/layers/attention/mla_attention.py``
          lines 479 and 1350-1358), whose page holds no separate V (``head_size_v = 0``,
          ``v1/kv_cache_interface.py`` line 698).
        """
        if self.kv_lora_rank is not None and self.qk_rope_head_dim is not None:
            return float(self.layers * (self.kv_lora_rank + self.qk_rope_head_dim)), 0.0

        def per_layer(kv_heads: int, head_dim: int) -> float:
            return 2.0 * max(1.0, kv_heads / tp) * head_dim

        full = self.layers - self.sliding_layers - self.linear_layers
        full_kv = self.full_kv_heads or self.kv_heads
        full_dim = self.full_head_dim or self.head_dim
        windowed = (self.sliding_layers * per_layer(self.kv_heads, self.head_dim)
                    if self.sliding_layers else 0.0)
        return full * per_layer(full_kv, full_dim), windowed

    def state_bytes_per_sequence(self, tp: int = 1) -> float:
        """Bytes of the fixed-size state one running sequence holds on each GPU of a
        tensor-parallel group of ``tp``, whatever its length: every linear-attention layer's
        recurrent state (``linear_state_elements`` at ``linear_state_bytes``) and short
        convolution state (``linear_conv_elements`` at 16 bits), split over the group as vLLM
        splits the heads and channels (``MambaStateShapeCalculator.gated_delta_net_state_shape``
        divides both by the TP size: vLLM 0.32.0
        ``model_executor/layers/mamba/mamba_utils.py`` lines 280-300). 0 without such layers."""
        if not self.linear_layers:
            return 0.0
        per_layer = (self.linear_state_elements * self.linear_state_bytes
                     + self.linear_conv_elements * 2.0)
        return self.linear_layers * per_layer / tp

    @property
    def auto_kv_bytes(self) -> float:
        """Bytes per cached element of a server started with ``--kv-cache-dtype auto``."""
        return 1.0 if self.auto_kv_cache_dtype == "fp8" else 2.0

    def kv_bytes_per_token(self, kv_dtype_bytes: float = 2.0) -> float:
        """KV-cache bytes per token over all layers (K and V; MLA: the latent), the
        sliding-window layers counted at every token (what a sequence within the window
        holds, an upper bound beyond it: :meth:`kv_bytes_per_sequence`)."""
        full, windowed = self.kv_elements_per_token()
        return (full + windowed) * kv_dtype_bytes

    def kv_bytes_per_sequence(self, tokens: int, kv_dtype_bytes: float = 2.0) -> float:
        """KV-cache bytes one sequence of ``tokens`` holds: every token in the full-attention
        layers, at most ``sliding_window`` in the sliding-window ones."""
        full, windowed = self.kv_elements_per_token()
        kept = min(tokens, self.sliding_window) if self.sliding_window else tokens
        return (full * tokens + windowed * kept) * kv_dtype_bytes


_NUMERIC = ["params_b", "layers", "hidden_size", "intermediate_size", "attention_heads",
            "kv_heads", "head_dim", "vocab_size", "context_length", "weight_bytes_per_param"]
_OPTIONAL = ["sliding_window", "num_experts", "experts_per_token",
             "shared_expert_intermediate_size", "moe_intermediate_size", "active_params_b",
             "kv_lora_rank", "qk_rope_head_dim", "sliding_layers", "full_kv_heads",
             "full_head_dim"]
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
        v = row.get("auto_kv_cache_dtype")
        if v is None or (isinstance(v, float) and math.isnan(v)):
            row.pop("auto_kv_cache_dtype", None)
        if "tied_embeddings" in row:
            row["tied_embeddings"] = str(row["tied_embeddings"]).strip().lower() in (
                "true", "1", "yes")
        out[str(row["model"])] = validate_row(ModelSpec, row, Path(path), row_line(df, i))
    return out


def normalize_model(model_id: str) -> str:
    """Short model name: the part after the last ``/`` of a hub id or a local folder. A path
    into the Hugging Face cache (``.../hub/models--org--name/snapshots/<revision>``, what a
    server started on the cached checkpoint records as its model) names the model by its
    ``models--org--name`` folder, not by the revision hash."""
    cached = cache_repo_id(model_id)
    return (cached or model_id.rstrip("/")).split("/")[-1]

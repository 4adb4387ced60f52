"""The record of one serving replica's parameters: step-time coefficients, KV capacity, limits.

Main entry: :class:`ReplicaParams` (one parameter set per model x hardware configuration;
:func:`fleetplan.replica.params.replica_params` decides which figures a pair gets: calibrated,
or a spec-based prior).

The step time of one engine iteration is

    step_s = c_step + c_prefill_tok * prefill_tokens + c_seq * decode_seqs + c_kv_tok * kv_read
             + c_experts * (1 - (1 - expert_share)^tokens - expert_share)

with ``kv_read`` the cached tokens the step's attention reads (the context of every scheduled
sequence) and ``tokens`` the step's prefill tokens and decoders (the last term: the routed
experts of a mixture-of-experts model those tokens touch beyond one token's; 0 when dense).
Seconds throughout.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from fleetplan.replica.step_math import expert_time

STEP_COEFFS = ("c_step", "c_prefill_tok", "c_seq", "c_kv_tok", "overhead_s")
C_DELIVER_MAX_S = 0.01  # the largest host time per streamed output a parameter set may state


def is_host_time(value: float) -> bool:
    """Whether ``value`` (s) is a host time per streamed output a parameter set may state:
    finite, 0..:data:`C_DELIVER_MAX_S` (the bound of ``ReplicaParams.c_deliver``)."""
    return math.isfinite(value) and 0 <= value <= C_DELIVER_MAX_S


class ReplicaParams(BaseModel):
    """Everything the replica model needs to know about one (model, configuration)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    model: str = Field(min_length=1)
    config: str = Field(min_length=1, description="<count>x<GPU>, e.g. 2xRTX-4090")
    c_step: float = Field(gt=0, le=10.0, description="fixed cost of one engine step, s")
    c_prefill_tok: float = Field(ge=0, le=0.1, description="cost per prefill token, s")
    c_seq: float = Field(ge=0, le=0.1, description="cost per decoding sequence in a step, s")
    c_kv_tok: float = Field(ge=0, le=1e-3, description="cost per cached token read, s")
    kv_capacity_tokens: int = Field(ge=1, le=10**9, description="KV-cache slots (tokens)")
    max_num_seqs: int = Field(ge=1, le=65536, description="cap on running sequences")
    max_num_batched_tokens: int = Field(ge=1, le=10**6, description="token budget per step")
    block_size: int = Field(ge=1, le=1024, description="KV-cache block, tokens")
    overhead_s: float = Field(ge=0, le=10.0, description="per-request overhead outside steps")
    c_deliver: float = Field(
        default=0.0, ge=0, le=C_DELIVER_MAX_S,
        description="host time per streamed output: a first token waits for the outputs listed "
                    "before it in its step (fleetplan.replica.delivery), s; 0 in calibration "
                    "files written before it existed")
    seq_state_blocks: int = Field(
        default=0, ge=0, le=10**8,
        description="KV blocks every admitted sequence holds besides its tokens' blocks: the "
                    "fixed-size state of linear-attention layers (vLLM's hybrid KV cache "
                    "manager pages it from the same pool); 0 without such layers and in "
                    "calibration files written before it existed")
    chunked_prefill: bool = Field(
        default=True,
        description="vLLM's scheduling policy: True, V1's (and V0's with chunked prefill): "
                    "each step decodes every running sequence, then fills its token budget "
                    "with prompt chunks; False, V0's default scheduler (vLLM before 0.8 on "
                    "models of up to 32K context): whole prompts first, a step with prompts "
                    "decodes nothing, decodes run only when no waiting prompt fits "
                    "(fleetplan.replica.scheduler); True in calibration files written before "
                    "it existed")
    prefix_caching: bool = Field(
        default=True,
        description="whether the server keeps a prefix cache: False where vLLM forces it off "
                    "whatever the server's flags (a multi-head latent attention model on vLLM "
                    "0.7.1-0.7.3, fleetplan.replica.mla_serving): every prompt is then "
                    "prefilled whole, a warm run or a stated hit share included; True in "
                    "calibration files written before it existed")
    c_experts: float = Field(
        default=0.0, ge=0, le=10.0,
        description="a mixture-of-experts step's time to read every routed expert once beyond "
                    "the share one token routes to (c_step holds that share); a step of T "
                    "tokens reads (1 - (1 - expert_share)^T - expert_share) of it "
                    "(fleetplan.replica.step_math.expert_time), s; 0 for dense models and in "
                    "calibration files written before it existed")
    expert_share: float = Field(
        default=0.0, ge=0, lt=1.0,
        description="the share of a layer's routed experts one token is routed to (experts per "
                    "token / routed experts); 0 for dense models")
    first_token_delay_s: float = Field(
        default=0.0, ge=0, le=60.0,
        description="median delay of a request's whole stream between the engine and the "
                    "client beyond the host's lag, fitted after the engine where the steps do "
                    "not explain the first tokens (fleetplan.replica.delivery, "
                    "fleetplan.replica.stream_delay), s; 0 on other servers and in calibration "
                    "files written before it existed")
    first_token_delay_sigma: float = Field(
        default=0.0, ge=0, le=3.0,
        description="spread of that delay over requests: the sigma of its lognormal")
    max_model_len: int = Field(ge=2, le=10**8, description="longest prompt + output, tokens")
    calibrated: bool
    source: str = Field(min_length=1, description="where the figures come from")

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # a model without a fixed-size state (a server with V1's scheduling policy) dumps as
        # before the field existed: calibration files, plans and cache keys of such models
        # stay byte-identical; a nonzero count, or V0's policy, is written (and so enters every
        # cache key made from the dump)
        data: dict[str, Any] = handler(self)
        if data.get("seq_state_blocks") == 0:
            del data["seq_state_blocks"]
        if data.get("chunked_prefill") is True:  # likewise: V1's policy dumps as before
            del data["chunked_prefill"]
        if data.get("prefix_caching") is True:  # likewise: a prefix cache dumps as before
            del data["prefix_caching"]
        if data.get("c_experts") == 0.0 and data.get("expert_share") == 0.0:  # dense: as before
            del data["c_experts"], data["expert_share"]
        if data.get("first_token_delay_s") == 0.0 and data.get("first_token_delay_sigma") == 0.0:
            del data["first_token_delay_s"], data["first_token_delay_sigma"]
        return data

    @property
    def is_moe(self) -> bool:
        """Whether these are a mixture-of-experts model's parameters (its tokens routed to a
        share of its experts)."""
        return self.expert_share > 0

    @property
    def kv_blocks(self) -> int:
        """Whole KV blocks of the cache."""
        return self.kv_capacity_tokens // self.block_size

    @property
    def max_state_seqs(self) -> int:
        """The most sequences whose fixed-size states the cache holds together with one token
        block each (``max_num_seqs`` where there is no state): vLLM caps the running requests
        by what its block pool holds, and the engine's block accounting follows from it."""
        if not self.seq_state_blocks:
            return self.max_num_seqs
        return min(self.max_num_seqs, self.kv_blocks // (self.seq_state_blocks + 1))

    def with_(self, **changes: Any) -> ReplicaParams:
        """A validated copy with some fields changed (e.g. a bigger KV cache)."""
        data = self.model_dump()
        data.update(changes)
        return ReplicaParams.model_validate(data)

    def step_s(self, prefill_tokens: int, decode_seqs: int, kv_read: int) -> float:
        """Duration of one step with these contents."""
        return (self.c_step + self.c_prefill_tok * prefill_tokens + self.c_seq * decode_seqs
                + self.c_kv_tok * kv_read
                + expert_time(self.c_experts, self.expert_share, prefill_tokens + decode_seqs))

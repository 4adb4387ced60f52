"""How each vLLM release serves a model of multi-head latent attention (DeepSeek-V2/V3/R1).

Main entries: :class:`MlaServing` (what one release does with such a model) and
:func:`mla_serving` (the rule for a model spec, a vLLM version and its checkpoint's format),
:func:`served_spec` (the spec whose KV cache the server keeps) and :func:`whole_prompts`.

vLLM did not always keep the latent. Read in the released PyPI sdists (sha256 of
``vllm-<version>.tar.gz``: 0.7.0 ``91521ca3...``, 0.7.1 ``f3f40980...``, 0.7.2 ``bdeeda56...``,
0.7.3 ``841cc30b...``, 0.8.0 ``449e6651...``; ``docs/engine-defaults.md`` has them whole):

- **Up to 0.7.0**: no MLA. ``DeepseekV2Attention`` up-projects the latent to every head's K and
  V and caches them per head (``vllm/model_executor/models/deepseek_v2.py`` 0.7.0 lines
  265-270 and 309-318: ``Attention(num_local_heads, qk_head_dim, num_kv_heads=
  num_local_heads)``, V padded to ``qk_head_dim``; ``vllm/config.py`` 733-743, head size
  ``qk_nope + qk_rope``): ``2 x heads x (qk_nope + qk_rope)`` elements per token and layer, the
  heads split over the tensor-parallel group.
- **0.7.1 and 0.7.2**: the latent (``ModelConfig.use_mla``, ``vllm/config.py`` 0.7.1 lines
  972-1000, 0.7.2 987-1020), but only for an unquantized, ``fp8`` or all-FP8
  ``compressed-tensors`` checkpoint; any other format (AWQ, GPTQ, ...) logs "MLA is not
  supported with ... quantization. Disabling MLA" and caches per head as 0.7.0 does.
- **0.7.1 to 0.7.3**: where the latent is used, "MLA is enabled; forcing chunked prefill and
  prefix caching to be disabled" (``VllmConfig.__post_init__``, ``vllm/config.py`` 0.7.1 lines
  3255-3263, 0.7.3 lines 3327-3335): whole prompts (V0's scheduler without chunks, its token
  budget left as it was) and no prefix cache, whatever the server was started with. 0.7.3
  keeps the latent for every format (``use_mla`` 998-999: the model type and
  ``kv_lora_rank`` only).
- **From 0.8.0**: the latent, and the rule above only on platforms other than CUDA and ROCm
  (``vllm/config.py`` 0.8.0 lines 3513-3525): a GPU server keeps the version's own defaults.
- **0.7.4 development builds** (``0.7.4.devN``: nightlies after 0.7.3, never released): served
  as 0.8.0 serves the model, with 0.7's V0 defaults. Chunked prefill for MLA (vLLM pull request
  12639) landed days after 0.7.3 (20 Feb 2025): the review of pull request 13374 expects it "to
  land today" on 18 Feb, and closes 13374 as "resolved by chunked prefill support" on 25 Feb.
  dstack's DeepSeek-R1 server on ``0.7.4.dev181`` with the FlashMLA backend (which came later)
  served 3,200-token prompts under V0's 2,048-token budget
  (``data/external/dstack-deepseek-r1.csv``), which whole prompts could not. The first few
  nightlies, before 12639, still forced the rule above: an assumption, not read in a source.

No version, or one not of the form MAJOR.MINOR[.PATCH], is served as the study's 0.8.5 serves
it: the latent and the defaults. A release before 0.7.1 the defaults table does not cover
(0.4.x) has no latent attention either.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetplan.catalog.hf_quant import DTYPE_BYTES
from fleetplan.catalog.models import ModelSpec
from fleetplan.errors import InputError
from fleetplan.replica.engine_defaults import version_key

# checkpoint formats (ModelSpec.served_dtype) whose latent vLLM 0.7.1 / 0.7.2 keeps: no
# quantization (the dtypes of a plain config.json), "fp8", and compressed-tensors with FP8
# weights (the rule also asks FP8 activations, which the served dtype does not record: taken
# as given)
_LATENT_FORMATS_071 = (*DTYPE_BYTES, "fp8", "compressed-tensors-w8fp")

_SRC = "vllm/config.py"


@dataclass(frozen=True)
class MlaServing:
    """What one vLLM release does with a multi-head latent attention model."""

    latent: bool  # the KV cache keeps the latent (else every head's K and V)
    whole_prompts: bool  # chunked prefill forced off
    no_prefix_cache: bool  # prefix caching forced off
    note: str  # what it does and where vLLM's source says so


def _version(version: str | None) -> tuple[int, int, int] | None:
    if version is None:
        return None
    try:
        return version_key(version)
    except InputError:  # not a version: served as the study's (engine_defaults says why)
        return None


def mla_serving(spec: ModelSpec, version: str | None) -> MlaServing | None:
    """How vLLM ``version`` serves ``spec`` on a GPU, or None for a model without latent
    attention (or a version served as the study's 0.8.5 is: the latent and the defaults)."""
    if not spec.is_mla:
        return None
    v = _version(version)
    if v is None or v >= (0, 7, 4):  # 0.7.4: development builds only, MLA chunked (above)
        return None
    if v < (0, 7, 1):
        return MlaServing(False, False, False, (
            f"vLLM {version} has no multi-head latent attention: every head's K and V are "
            "cached (vllm/model_executor/models/deepseek_v2.py 0.7.0:265-270,309-318)"))
    if v < (0, 7, 3) and spec.served_dtype not in _LATENT_FORMATS_071:
        return MlaServing(False, False, False, (
            f"vLLM {version} disables multi-head latent attention for a {spec.served_dtype} "
            f"checkpoint and caches every head's K and V ({_SRC} 0.7.1:972-1000, "
            "0.7.2:987-1020)"))
    return MlaServing(True, True, True, (
        f"vLLM {version} with multi-head latent attention forces chunked prefill and prefix "
        f"caching off: whole prompts, no prefix cache ({_SRC} 0.7.1:3255-3263, "
        "0.7.3:3327-3335)"))


def served_spec(spec: ModelSpec, version: str | None) -> ModelSpec:
    """``spec`` as the server caches it: without its latent where vLLM ``version`` caches every
    head's K and V (``kv_heads`` and ``head_dim`` are then the attention heads and
    ``qk_nope + qk_rope``, as the config reader sets them), else ``spec`` itself."""
    rule = mla_serving(spec, version)
    if rule is None or rule.latent:
        return spec
    return spec.model_copy(update={"kv_lora_rank": None, "qk_rope_head_dim": None})


def whole_prompts(spec: ModelSpec, version: str | None) -> bool:
    """Whether vLLM ``version`` schedules ``spec``'s prompts whole whatever the server's flags
    (chunked prefill forced off)."""
    rule = mla_serving(spec, version)
    return rule is not None and rule.whole_prompts

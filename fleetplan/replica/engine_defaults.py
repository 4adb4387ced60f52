"""vLLM's engine defaults by version, as its own source sets them (OpenAI API server).

Main entries: :class:`EngineDefaults` (one version's scheduler and cache defaults),
:func:`engine_defaults` (the defaults a server of ``version`` on ``gpu`` starts with, resolving
the device-dependent rules) and :data:`TABLE`. Every entry names the vLLM file it follows;
``docs/engine-defaults.md`` quotes the rules and says which line numbers were checked.

The study's runs are vLLM 0.8.5 (V1 engine). Its ``max_num_batched_tokens`` default depends
on the usage context *and* on the device name: the OpenAI server gets 8192 batched tokens and
1024 sequences on an H100 or H200, 2048 and 256 elsewhere (``EngineArgs._set_default_args_v1``);
from 0.9 the rule is by device memory (>= 70 GiB and not an A100: 8192 and 1024). The prior of
:mod:`fleetplan.replica.priors` keeps its named assumption (2048 / 256, what the calibrated
study figures were fitted with) unless a version is named (``prior_params(...,
engine_version=...)``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fleetplan.errors import InputError


@dataclass(frozen=True)
class EngineDefaults:
    """One vLLM version's defaults for ``vllm serve`` (OpenAI API server usage context)."""

    version: str
    engine: str  # "V0" or "V1"
    max_num_batched_tokens: int
    max_num_seqs: int
    gpu_memory_utilization: float
    block_size: int
    chunked_prefill: bool
    prefix_caching: bool
    cuda_graph_max_batch: int
    source: str
    # device rule: (batched tokens, seqs) on "large" devices, and the rule's wording
    large_device: tuple[int, int] | None = None
    large_device_rule: str = ""

    def scheduler_budget(self, max_model_len: int) -> tuple[int, bool]:
        """``(max_num_batched_tokens, chunked_prefill)`` for a served ``max_model_len``. V1
        always chunks with its budget. V0 (0.6.x) chunks only models of more than 32K context
        (512 tokens a step); others take a whole prompt a step, ``max(max_model_len, 2048)``."""
        if self.engine == "V1":
            return self.max_num_batched_tokens, True
        if max_model_len > 32768:
            return 512, True
        return max(max_model_len, self.max_num_batched_tokens), False

    def for_gpu(self, gpu: str, vram_gb: float) -> EngineDefaults:
        """These defaults with the device rule applied to ``gpu`` (catalog name, VRAM)."""
        if self.large_device is None or not _is_large(self.version, gpu, vram_gb):
            return self
        tok, seqs = self.large_device
        from dataclasses import replace

        return replace(self, max_num_batched_tokens=tok, max_num_seqs=seqs,
                       source=f"{self.source}; {self.large_device_rule}")


def _is_large(version: str, gpu: str, vram_gb: float) -> bool:
    name = gpu.lower()
    if _key(version) < (0, 9):
        return "h100" in name or "h200" in name
    return vram_gb * 1e9 >= 70 * 1024**3 and "a100" not in name


def _key(version: str) -> tuple[int, int]:
    m = re.match(r"^v?(\d+)\.(\d+)", version.strip())
    if not m:
        raise InputError(f"vLLM version {version!r} is not of the form MAJOR.MINOR[.PATCH]")
    return int(m.group(1)), int(m.group(2))


_ARGS = "vllm/engine/arg_utils.py"
TABLE: tuple[EngineDefaults, ...] = (
    EngineDefaults(
        "0.6", "V0", max_num_batched_tokens=2048, max_num_seqs=256,
        gpu_memory_utilization=0.9, block_size=16, chunked_prefill=False, prefix_caching=False,
        cuda_graph_max_batch=256,
        source=(f"vLLM v0.6.x {_ARGS} (EngineArgs defaults; chunked prefill only by default "
                "for max_model_len > 32K, then 512 batched tokens) and vllm/config.py "
                "SchedulerConfig (max(max_model_len, 2048) without chunked prefill); CUDA "
                "graphs for batch sizes 1, 2, 4, 8..256 (vllm/worker/model_runner.py "
                "_BATCH_SIZES_TO_CAPTURE); from memory of the 0.6 sources, not re-read")),
    EngineDefaults(
        "0.8", "V1", max_num_batched_tokens=2048, max_num_seqs=256,
        gpu_memory_utilization=0.9, block_size=16, chunked_prefill=True, prefix_caching=True,
        cuda_graph_max_batch=512,
        source=(f"vLLM v0.8.5 {_ARGS} EngineArgs._set_default_args_v1 (V1: chunked prefill "
                "always, prefix caching on, OPENAI_API_SERVER 2048 batched tokens, "
                "max_num_seqs 256); vllm/config.py VllmConfig._set_cudagraph_sizes (V1: 1, 2, 4, "
                "8..512 step 8, capped by max_num_batched_tokens)"),
        large_device=(8192, 1024),
        large_device_rule=("device name contains h100 or h200: 8192 batched tokens, "
                           "max_num_seqs 1024")),
    EngineDefaults(
        "0.9", "V1", max_num_batched_tokens=2048, max_num_seqs=256,
        gpu_memory_utilization=0.9, block_size=16, chunked_prefill=True, prefix_caching=True,
        cuda_graph_max_batch=512,
        source=(f"vLLM >= 0.9 {_ARGS} EngineArgs.get_batch_defaults (OPENAI_API_SERVER: 2048 "
                "batched tokens, 256 sequences)"),
        large_device=(8192, 1024),
        large_device_rule=("device memory >= 70 GiB and not an A100 (PR #17885): 8192 batched "
                           "tokens, 1024 sequences")),
)


def engine_defaults(version: str, gpu: str | None = None,
                    vram_gb: float | None = None) -> EngineDefaults:
    """The defaults of vLLM ``version`` (``0.6.3``, ``0.8.5``, ``0.11.0`` ...); with ``gpu``
    (catalog name) and ``vram_gb``, the device rule applied. Versions before 0.6 are refused;
    later ones use the newest entry not after them."""
    k = _key(version)
    rows = [r for r in TABLE if _key(r.version) <= k]
    if not rows:
        raise InputError(f"vLLM version {version}: no engine defaults before "
                         f"{TABLE[0].version} (known: {', '.join(r.version for r in TABLE)})")
    row = rows[-1]
    if row.version != version:
        from dataclasses import replace

        row = replace(row, version=version)
    if gpu is not None and vram_gb is not None:
        row = row.for_gpu(gpu, vram_gb)
    return row

"""vLLM's engine defaults by version, as its own source sets them (OpenAI API server).

Main entries: :class:`EngineDefaults` (one version's scheduler and cache defaults),
:func:`engine_defaults` (the defaults a server of ``version`` on ``gpu`` starts with, resolving
the device-memory rules) and :data:`TABLE`. Every entry names the vLLM files and lines it
follows (read in the released sdists of 0.6.3 and 0.8.5 and the installed 0.32.0);
``docs/engine-defaults.md`` quotes the rules.

The study's runs are vLLM 0.8.5 (V1 engine unless a feature falls back to V0). Its
``max_num_batched_tokens`` default depends on the usage context *and* on the device memory
(``vllm/engine/arg_utils.py`` 0.8.5, ``EngineArgs._set_default_args_v1``, lines 1596-1609):
the OpenAI server gets 8192 batched tokens and 1024 sequences on a device of >= 70 GiB (H100,
MI300X, but also an A100 80GB), 2048 and 256 below. Later versions exclude the A100 by name
(PR #17885) and, in 0.32.0, give devices of >= 160 GiB 16384 tokens. Device memory is the
catalog's ``vram_gb`` read as GiB (the unit :mod:`fleetplan.replica.priors` uses; an
"80 GB" H100 reports 79.6 GiB). The prior of :mod:`fleetplan.replica.priors` keeps its named
assumption (2048 / 256) unless a version is named (``prior_params(..., engine_version=...)``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

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
    large_min_gib: float = 70.0
    large_excludes: tuple[str, ...] = ()  # device-name substrings the large rule skips
    # a third tier (0.32.0: >= 160 GiB): (min GiB, (tokens, seqs), wording)
    huge_device: tuple[float, tuple[int, int], str] | None = None

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
        name = gpu.lower()
        if self.huge_device is not None and vram_gb >= self.huge_device[0]:
            (tok, seqs), rule = self.huge_device[1], self.huge_device[2]
        elif (self.large_device is not None and vram_gb >= self.large_min_gib
              and not any(x in name for x in self.large_excludes)):
            (tok, seqs), rule = self.large_device, self.large_device_rule
        else:
            return self
        cap = self.cuda_graph_max_batch
        if self.engine == "V1":  # V1 graphs are capped by the token budget, not the seqs
            cap = min(cap, tok)
        return replace(self, max_num_batched_tokens=tok, max_num_seqs=seqs,
                       cuda_graph_max_batch=cap, source=f"{self.source}; {rule}")


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
        source=(f"vLLM 0.6.3 {_ARGS}:107-115 (block_size 16, enable_prefix_caching False, "
                "gpu_memory_utilization 0.90, max_num_batched_tokens None, max_num_seqs 256), "
                f"{_ARGS}:935-960 (chunked prefill only for max_model_len > 32768), "
                "vllm/config.py:972-987 (512 batched tokens when chunked, else "
                "max(max_model_len, 2048)), vllm/worker/model_runner.py:66-75,1916 (CUDA "
                "graphs 1, 2, 4, 8, 16.. step 8 up to max_num_seqs)")),
    EngineDefaults(
        "0.8", "V1", max_num_batched_tokens=2048, max_num_seqs=256,
        gpu_memory_utilization=0.9, block_size=16, chunked_prefill=True, prefix_caching=True,
        cuda_graph_max_batch=512,
        source=(f"vLLM 0.8.5 {_ARGS}:1565-1623 EngineArgs._set_default_args_v1 (V1, the "
                "default: vllm/envs.py:530-531 VLLM_USE_V1 '1'; chunked prefill always, "
                "prefix caching on, OPENAI_API_SERVER 2048 batched tokens and 256 sequences "
                "below 70 GiB of device memory), vllm/config.py:1308 (gpu_memory_utilization "
                "0.9), vllm/platforms/cuda.py:142-143 (block size 16), vllm/config.py:4031-4046 "
                "(V1 CUDA graphs 1, 2, 4, 8..512 step 8, capped by max_num_batched_tokens)"),
        large_device=(8192, 1024),
        large_device_rule=(f"vLLM 0.8.5 {_ARGS}:1596-1602: device memory >= 70 GiB: 8192 "
                           "batched tokens, max_num_seqs 1024")),
    EngineDefaults(
        "0.9", "V1", max_num_batched_tokens=2048, max_num_seqs=256,
        gpu_memory_utilization=0.9, block_size=16, chunked_prefill=True, prefix_caching=True,
        cuda_graph_max_batch=512,
        source=(f"vLLM 0.9-0.31 {_ARGS} EngineArgs.get_batch_defaults (OPENAI_API_SERVER: "
                "2048 batched tokens, 256 sequences); read in an unreleased copy of the "
                "repository, no line numbers: not checked against a release"),
        large_device=(8192, 1024), large_excludes=("a100",),
        large_device_rule=("device memory >= 70 GiB and not an A100 (PR #17885): 8192 batched "
                           "tokens, 1024 sequences")),
    EngineDefaults(
        "0.32", "V1", max_num_batched_tokens=2048, max_num_seqs=256,
        gpu_memory_utilization=0.92, block_size=16, chunked_prefill=True, prefix_caching=True,
        cuda_graph_max_batch=512,
        source=(f"vLLM 0.32.0 {_ARGS}:2894-2985 EngineArgs.get_batch_defaults "
                "(OPENAI_API_SERVER 2048 batched tokens, 256 sequences below 70 GiB), "
                f"{_ARGS}:2987-3022 (chunked prefill and prefix caching on where the model "
                "supports them), vllm/config/cache.py:72,102,141,344-345 (block 16, "
                "gpu_memory_utilization 0.92, prefix caching True), vllm/config/vllm.py:"
                "2354-2485 (CUDA graphs 1, 2, 4, 8..248 step 8, 256.. step 16 up to "
                "min(2 x max_num_seqs, 512), capped by max_num_batched_tokens)"),
        large_device=(8192, 1024), large_excludes=("a100",),
        large_device_rule=(f"vLLM 0.32.0 {_ARGS}:2933-2942: device memory >= 70 GiB and not "
                           "an A100: 8192 batched tokens, 1024 sequences"),
        huge_device=(160.0, (16384, 1024),
                     f"vLLM 0.32.0 {_ARGS}:2923-2932: device memory >= 160 GiB: 16384 batched "
                     "tokens, 1024 sequences")),
)


def engine_defaults(version: str, gpu: str | None = None,
                    vram_gb: float | None = None) -> EngineDefaults:
    """The defaults of vLLM ``version`` (``0.6.3``, ``0.8.5``, ``0.32.0`` ...); with ``gpu``
    (catalog name) and ``vram_gb``, the device rule applied. Versions before 0.6 are refused;
    later ones use the newest entry not after them."""
    k = _key(version)
    rows = [r for r in TABLE if _key(r.version) <= k]
    if not rows:
        raise InputError(f"vLLM version {version}: no engine defaults before "
                         f"{TABLE[0].version} (known: {', '.join(r.version for r in TABLE)})")
    row = rows[-1]
    if row.version != version:
        row = replace(row, version=version)
    if gpu is not None and vram_gb is not None:
        row = row.for_gpu(gpu, vram_gb)
    return row

"""vLLM's engine defaults by version, as its own source sets them (OpenAI API server).

Main entries: :class:`EngineDefaults` (one version's scheduler and cache defaults),
:func:`engine_defaults` (the defaults a server of ``version`` on ``gpu`` starts with, resolving
the device rules) and :data:`TABLE`. Every entry names the vLLM files and lines it follows,
read in the released PyPI sdists (sha256 checked against PyPI) of 0.6.3, 0.8.5, every
release from 0.9.0 to 0.32.0 that has an sdist (0.15.x has none), the installed 0.32.0 and
the 0.5.4 wheel (``vllm-0.5.4-cp38-abi3-manylinux1_x86_64.whl``, its Python sources);
``docs/engine-defaults.md`` quotes the rules and the checksums.

The study's runs are vLLM 0.8.5 (V1 engine unless a feature falls back to V0). Its
``max_num_batched_tokens`` default depends on the usage context *and* on the device memory
(``vllm/engine/arg_utils.py`` 0.8.5, ``EngineArgs._set_default_args_v1``, lines 1596-1609):
the OpenAI server gets 8192 batched tokens and 1024 sequences on a device of >= 70 GiB (H100,
MI300X, but also an A100 80GB), 2048 and 256 below. From 0.9.0 the A100 is excluded by name
(PR #17885); from 0.28.0 devices of >= 160 GiB get 16384 tokens, and data-center Blackwell
(compute capability 10.x) CUDA graphs up to 1024; from 0.20.0 ``gpu_memory_utilization`` is
0.92. An H100 (80 GB) keeps 8192 / 1024 in every release from 0.8.5 to 0.32.0. Device memory
is the catalog's ``vram_gb`` read as GiB (the unit :mod:`fleetplan.replica.priors` uses; an
"80 GB" H100 reports 79.6 GiB). The priors of :mod:`fleetplan.replica.priors` take the
version named (``prior_params(..., engine_version=...)``) or recorded by the runs, else
``DEFAULT_ENGINE_VERSION`` (0.8.5, the study's).
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
    # a third tier (0.28.0 on: >= 160 GiB): (min GiB, (tokens, seqs), wording)
    huge_device: tuple[float, tuple[int, int], str] | None = None
    # a larger CUDA-graph cap on some devices (0.28.0 on: 1024 instead of 512 on compute
    # capability 10.x; the catalog has no compute capability, so device-name substrings tell
    # it): (name substrings, cap, wording); the cap is min(cap, 2 x max_num_seqs)
    graph_devices: tuple[tuple[str, ...], int, str] | None = None
    # V0's token budget when it chunks a long-context model's prompts (512 up to 0.6, 2048 in
    # 0.7: SchedulerConfig's default for chunked prefill)
    v0_chunk_tokens: int = 512
    # whether V0 chunks a long-context model's prompts on ROCm too (0.7.x: CUDA only)
    rocm_chunks: bool = True
    # a burst reaches the scheduler only once the server has taken every request of it in,
    # one at a time (fleetplan.replica.protocol.intake_release): seen in 0.5.4's own
    # per-request arrays; not established for other versions, so False there
    serial_intake: bool = False

    def scheduler_budget(self, max_model_len: int, gpu: str | None = None) -> tuple[int, bool]:
        """``(max_num_batched_tokens, chunked_prefill)`` for a served ``max_model_len`` on
        ``gpu`` (catalog name; None: a CUDA GPU). V1 always chunks with its budget. V0 chunks
        only models of more than 32K context (:attr:`v0_chunk_tokens` a step: 512, 2048 in
        0.7.x; 0.7.x not on ROCm, :func:`is_rocm`); others take a whole prompt a step,
        ``max(max_model_len, 2048)``."""
        if self.engine == "V1":
            return self.max_num_batched_tokens, True
        if max_model_len > 32768 and (self.rocm_chunks or gpu is None or not is_rocm(gpu)):
            return self.v0_chunk_tokens, True
        return max(max_model_len, self.max_num_batched_tokens), False

    def for_gpu(self, gpu: str, vram_gb: float) -> EngineDefaults:
        """These defaults with the device rules applied to ``gpu`` (catalog name, VRAM)."""
        name = gpu.lower()
        tok, seqs, rules = self.max_num_batched_tokens, self.max_num_seqs, []
        if self.huge_device is not None and vram_gb >= self.huge_device[0]:
            (tok, seqs), rule = self.huge_device[1], self.huge_device[2]
            rules.append(rule)
        elif (self.large_device is not None and vram_gb >= self.large_min_gib
              and not any(x in name for x in self.large_excludes)):
            (tok, seqs), rule = self.large_device, self.large_device_rule
            rules.append(rule)
        cap = self.cuda_graph_max_batch
        if self.graph_devices is not None and any(x in name for x in self.graph_devices[0]):
            cap = min(self.graph_devices[1], 2 * seqs)
            rules.append(self.graph_devices[2])
        if not rules:
            return self
        if self.engine == "V1":  # V1 graphs are capped by the token budget, not the seqs
            cap = min(cap, tok)
        return replace(self, max_num_batched_tokens=tok, max_num_seqs=seqs,
                       cuda_graph_max_batch=cap, source="; ".join([self.source, *rules]))


def version_key(version: str) -> tuple[int, int, int]:
    """``(major, minor, patch)`` of a vLLM version (``0.7.3``, ``v0.8``, ``0.22.1rc1.dev392``:
    what follows MAJOR.MINOR[.PATCH] is not read; a missing patch is 0); one-line
    :class:`InputError` for any other text."""
    m = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?", version.strip())
    if not m:
        raise InputError(f"vLLM version {version!r} is not of the form MAJOR.MINOR[.PATCH]")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


_ARGS = "vllm/engine/arg_utils.py"
# device names of compute capability 10.x (B100, B200/GB200, B300/GB300)
_CC10 = ("b100", "b200", "b300")
TABLE: tuple[EngineDefaults, ...] = (
    EngineDefaults(
        "0.5", "V0", max_num_batched_tokens=2048, max_num_seqs=256,
        gpu_memory_utilization=0.9, block_size=16, chunked_prefill=False, prefix_caching=False,
        cuda_graph_max_batch=256,
        source=(f"vLLM 0.5.4 {_ARGS}:55-63 (block_size 16, enable_prefix_caching False, "
                "gpu_memory_utilization 0.90, max_num_batched_tokens None, max_num_seqs 256), "
                f"{_ARGS}:746-773 (chunked prefill only for max_model_len > 32768), "
                "vllm/config.py:804-818 (512 batched tokens when chunked, else "
                "max(max_model_len, 2048)), vllm/core/scheduler.py:757-800 (_schedule_default: "
                "waiting prompts first, no decode in a step that schedules prompts), "
                "vllm/worker/model_runner.py:70-75 (CUDA graphs 1, 2, 4, 8..256 step 8)"),
        serial_intake=True),
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
        "0.7", "V0", max_num_batched_tokens=2048, max_num_seqs=256,
        gpu_memory_utilization=0.9, block_size=16, chunked_prefill=False, prefix_caching=False,
        cuda_graph_max_batch=256, v0_chunk_tokens=2048, rocm_chunks=False,
        source=(f"vLLM 0.7.3 {_ARGS}:115-126 (block_size and enable_prefix_caching None, "
                "gpu_memory_utilization 0.90, max_num_seqs None), 219-224 (V0, the default: "
                "vllm/envs.py:503-504 VLLM_USE_V1 '0'; prefix caching off, 256 sequences), "
                f"{_ARGS}:1163-1194 (chunked prefill only for max_model_len > 32768, and not "
                "on ROCm: 1181-1185), "
                "vllm/config.py:1521-1536 (2048 batched tokens when chunked, else "
                "max(max_model_len, 2048)), vllm/platforms/cuda.py:143 (block size 16), "
                "vllm/config.py:3340-3385 (V0 CUDA graphs 1, 2, 4, 8.. step 8 up to "
                "max_num_seqs); the "
                f"same in 0.7.0 ({_ARGS}:1084-1112, vllm/config.py:1449-1464); a multi-head "
                "latent attention model in 0.7.1-0.7.3: fleetplan.replica.mla_serving"),
    ),
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
        source=(f"vLLM 0.9.0 {_ARGS}:991-1006 (V1 unless _is_v1_supported_oracle falls back "
                "to V0; vllm/envs.py:589-590 VLLM_USE_V1 '1'), "
                f"{_ARGS}:1460-1549 EngineArgs._set_default_args_v1 (1463-1468 chunked "
                "prefill always, prefix caching on; 1502-1508 OPENAI_API_SERVER 2048 batched "
                "tokens and 256 sequences below 70 GiB or on an A100), vllm/config.py:1408 "
                "(gpu_memory_utilization 0.9), vllm/platforms/cuda.py:136-137 (block size 16), "
                "vllm/config.py:1972,4448-4469 (V1 CUDA graphs: cuda_graph_sizes [512], 1, 2, "
                "4, 8..512 step 8, capped by max_num_batched_tokens); same in 0.9.1, 0.9.2"),
        large_device=(8192, 1024), large_excludes=("a100",),
        large_device_rule=(f"vLLM 0.9.0 {_ARGS}:1492-1501: device memory >= 70 GiB and "
                           "'a100' not in the device name (PR #17885): 8192 batched tokens, "
                           "1024 sequences")),
    EngineDefaults(
        "0.10", "V1", max_num_batched_tokens=2048, max_num_seqs=256,
        gpu_memory_utilization=0.9, block_size=16, chunked_prefill=True, prefix_caching=True,
        cuda_graph_max_batch=512,
        source=(f"vLLM 0.10.0 {_ARGS}:1012-1035 (V1 unless the oracle falls back to V0; "
                "vllm/envs.py:650-651 VLLM_USE_V1 '1'), "
                f"{_ARGS}:1526-1657 EngineArgs._set_default_args_v1 (1530-1536 chunked "
                "prefill and prefix caching on for non-pooling models; 1594-1603 2048 batched "
                "tokens and 256 sequences below 70 GiB or on an A100), vllm/config.py:1626 "
                "(gpu_memory_utilization 0.9), vllm/platforms/cuda.py:147-148 (block size 16), "
                "vllm/config.py:2274-2281,2451-2456 (cuda_graph_sizes default "
                "[min(2 x max_num_seqs, 512)]), 4756-4778 (V1 CUDA graphs 1, 2, 4, 8.. step 8 "
                "up to it, capped by max_num_batched_tokens); same in 0.10.1, 0.10.2"),
        large_device=(8192, 1024), large_excludes=("a100",),
        large_device_rule=(f"vLLM 0.10.0 {_ARGS}:1580-1593: device memory >= 70 GiB and "
                           "not an A100: 8192 batched tokens, 1024 sequences")),
    EngineDefaults(
        "0.11", "V1", max_num_batched_tokens=2048, max_num_seqs=256,
        gpu_memory_utilization=0.9, block_size=16, chunked_prefill=True, prefix_caching=True,
        cuda_graph_max_batch=512,
        source=(f"vLLM 0.11.0 {_ARGS}:1162 (the V1 defaults always: the V0 engine and "
                f"_set_default_args_v0 are gone), {_ARGS}:1540-1682 "
                "EngineArgs._set_default_args (1544-1561 chunked prefill and prefix caching "
                "on for non-pooling models; 1615-1624 2048 batched tokens and 256 sequences "
                "below 70 GiB or on an A100), vllm/config/cache.py:43 "
                "(gpu_memory_utilization 0.9), vllm/platforms/cuda.py:126-127 (block size 16), "
                "vllm/config/scheduler.py:72-74,222-227 (cuda_graph_sizes default "
                "[min(2 x max_num_seqs, 512)]), vllm/config/__init__.py:551-613 (CUDA graphs "
                "1, 2, 4, 8.. step 8 up to it, capped by max_num_batched_tokens)"),
        large_device=(8192, 1024), large_excludes=("a100",),
        large_device_rule=(f"vLLM 0.11.0 {_ARGS}:1601-1614: device memory >= 70 GiB and "
                           "not an A100: 8192 batched tokens, 1024 sequences")),
    EngineDefaults(
        "0.11.1", "V1", max_num_batched_tokens=2048, max_num_seqs=256,
        gpu_memory_utilization=0.9, block_size=16, chunked_prefill=True, prefix_caching=True,
        cuda_graph_max_batch=512,
        source=(f"vLLM 0.11.1 {_ARGS}:1367,1946-2042 EngineArgs._set_default_args "
                "(VLLM_USE_V1 no longer in vllm/envs.py), "
                f"{_ARGS}:1838-1861 get_chunked_prefill_prefix_caching_defaults (generative "
                "models: chunked prefill on, prefix caching on unless the model is hybrid), "
                f"{_ARGS}:1864-1944 EngineArgs.get_batch_defaults (1902-1911 2048 batched "
                "tokens and 256 sequences below 70 GiB or on an A100), vllm/config/cache.py:50 "
                "(gpu_memory_utilization 0.9), vllm/platforms/cuda.py:161-162 (block size 16), "
                "vllm/config/vllm.py:801-947 _set_cudagraph_sizes (850-855 largest "
                "min(2 x max_num_seqs, 512), capped by max_num_batched_tokens; 876-887 1, 2, "
                "4, 8..248 step 8, 256.. step 16); same in 0.11.2"),
        large_device=(8192, 1024), large_excludes=("a100",),
        large_device_rule=(f"vLLM 0.11.1 {_ARGS}:1889-1901: device memory >= 70 GiB and "
                           "not an A100: 8192 batched tokens, 1024 sequences")),
    EngineDefaults(
        "0.12", "V1", max_num_batched_tokens=2048, max_num_seqs=256,
        gpu_memory_utilization=0.9, block_size=16, chunked_prefill=True, prefix_caching=True,
        cuda_graph_max_batch=512,
        source=(f"vLLM 0.12.0 {_ARGS}:1881-1964 "
                "_set_default_chunked_prefill_and_prefix_caching_args (1884-1885 chunked "
                "prefill and prefix caching on where the model supports them), "
                f"{_ARGS}:1799-1879 EngineArgs.get_batch_defaults (1837-1846 2048 batched "
                "tokens and 256 sequences below 70 GiB or on an A100), 1966-2022 (applied "
                "where the user set nothing), vllm/config/cache.py:49,76 "
                "(gpu_memory_utilization 0.9, enable_prefix_caching True), "
                "vllm/platforms/cuda.py:159-160 (block size 16), vllm/config/vllm.py:988-1134 "
                "(1037-1042 largest min(2 x max_num_seqs, 512), capped by "
                "max_num_batched_tokens; 1067-1074 1, 2, 4, 8..248 step 8, 256.. step 16); "
                "same values through 0.19.1"),
        large_device=(8192, 1024), large_excludes=("a100",),
        large_device_rule=(f"vLLM 0.12.0 {_ARGS}:1824-1836: device memory >= 70 GiB and "
                           "not an A100: 8192 batched tokens, 1024 sequences")),
    EngineDefaults(
        "0.20", "V1", max_num_batched_tokens=2048, max_num_seqs=256,
        gpu_memory_utilization=0.92, block_size=16, chunked_prefill=True,
        prefix_caching=True, cuda_graph_max_batch=512,
        source=("vLLM 0.20.0 vllm/config/cache.py:66 (gpu_memory_utilization 0.92), 45,231 "
                "(block size 16 unless the attention backend prefers another: "
                "vllm/platforms/interface.py:463-488), 91 (enable_prefix_caching True), "
                f"{_ARGS}:2262-2330 (chunked prefill and prefix caching on where the model "
                f"supports them), {_ARGS}:2179-2260 EngineArgs.get_batch_defaults (2218-2227 "
                "2048 batched tokens and 256 sequences below 70 GiB or on an A100), 2339-2411 "
                "(applied where the user set nothing), vllm/config/vllm.py:1423-1583 "
                "(1472-1483 largest min(2 x max_num_seqs, 512), capped by "
                "max_num_batched_tokens; 1514-1521 1, 2, 4, 8..248 step 8, 256.. step 16); "
                "same values through 0.27.1"),
        large_device=(8192, 1024), large_excludes=("a100",),
        large_device_rule=(f"vLLM 0.20.0 {_ARGS}:2205-2217: device memory >= 70 GiB and "
                           "not an A100: 8192 batched tokens, 1024 sequences")),
    EngineDefaults(
        "0.28", "V1", max_num_batched_tokens=2048, max_num_seqs=256,
        gpu_memory_utilization=0.92, block_size=16, chunked_prefill=True,
        prefix_caching=True, cuda_graph_max_batch=512,
        source=(f"vLLM 0.28.0 {_ARGS}:2553-2644 EngineArgs.get_batch_defaults (2602-2611 "
                "2048 batched tokens and 256 sequences below 70 GiB or on an A100), "
                f"{_ARGS}:2646-2714 (chunked prefill and prefix caching on where the model "
                "supports them), 2756-2845 (applied where the user set nothing), "
                "vllm/config/cache.py:48,264 (block size 16), 69 (gpu_memory_utilization "
                "0.92), 96 (enable_prefix_caching True), vllm/config/vllm.py:1878-2051 "
                "(1933-1945 largest min(2 x max_num_seqs, 512), capped by "
                "max_num_batched_tokens; 1976-1983 1, 2, 4, 8..248 step 8, 256.. step 16); "
                "same values through 0.31.0"),
        large_device=(8192, 1024), large_excludes=("a100",),
        large_device_rule=(f"vLLM 0.28.0 {_ARGS}:2592-2601: device memory >= 70 GiB and "
                           "not an A100: 8192 batched tokens, 1024 sequences"),
        huge_device=(160.0, (16384, 1024),
                     f"vLLM 0.28.0 {_ARGS}:2582-2591: device memory >= 160 GiB: 16384 batched "
                     "tokens, 1024 sequences"),
        graph_devices=(_CC10, 1024,
                       "vLLM 0.28.0 vllm/config/vllm.py:1933-1943: compute capability 10.x "
                       "(data-center Blackwell, told here by name): CUDA graphs up to "
                       "min(2 x max_num_seqs, 1024)")),
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
                     "tokens, 1024 sequences"),
        graph_devices=(_CC10, 1024,
                       "vLLM 0.32.0 vllm/config/vllm.py:2354-2364: compute capability 10.x "
                       "(data-center Blackwell, told here by name): CUDA graphs up to "
                       "min(2 x max_num_seqs, 1024)")),
)


def engine_defaults(version: str, gpu: str | None = None,
                    vram_gb: float | None = None) -> EngineDefaults:
    """The defaults of vLLM ``version`` (``0.6.3``, ``0.8.5``, ``0.32.0`` ...); with ``gpu``
    (catalog name) and ``vram_gb``, the device rules applied. Versions before 0.6 are refused;
    later ones use the newest entry not after them (compared as MAJOR.MINOR.PATCH, a missing
    patch read as 0: ``0.11.0`` takes the "0.11" entry, ``0.11.2`` the "0.11.1" one)."""
    k = version_key(version)
    rows = [r for r in TABLE if version_key(r.version) <= k]
    if not rows:
        raise InputError(f"vLLM version {version}: no engine defaults before "
                         f"{TABLE[0].version} (known: {', '.join(r.version for r in TABLE)})")
    row = rows[-1]
    if row.version != version:
        row = replace(row, version=version)
    if gpu is not None and vram_gb is not None:
        row = row.for_gpu(gpu, vram_gb)
    return row


def known_defaults(version: str | None) -> EngineDefaults | None:
    """:func:`engine_defaults` of ``version`` (device rules not applied), or None for no
    version or one the table does not cover: the caller's own default then stands."""
    if version is None:
        return None
    try:
        return engine_defaults(version)
    except InputError:
        return None


def is_rocm(gpu: str) -> bool:
    """Whether vLLM runs on ``gpu`` (catalog name) with its ROCm platform: the AMD Instinct
    rows of the catalog (``MI300X``, ``MI325X``, ``MI355X``, ...)."""
    return gpu.strip().lower().startswith("mi")


def chunks_prefill(version: str | None, max_model_len: int, gpu: str | None = None) -> bool:
    """Whether a server of vLLM ``version`` serving ``max_model_len`` tokens on ``gpu`` schedules
    with chunked prefill (V1's policy, ``ReplicaParams.chunked_prefill``): always on V1; on V0
    only past 32K of context (:meth:`EngineDefaults.scheduler_budget`). No version, or one the
    table does not cover: True (the study's 0.8.5 is V1)."""
    d = known_defaults(version)
    return True if d is None else d.scheduler_budget(max_model_len, gpu)[1]


def intake_is_serial(version: str | None) -> bool:
    """Whether a server of vLLM ``version`` takes a burst in before scheduling it
    (:attr:`EngineDefaults.serial_intake`; no version, or one the table does not cover:
    False)."""
    d = known_defaults(version)
    return d is not None and d.serial_intake

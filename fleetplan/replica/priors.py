"""First-principles replica parameters from model and GPU specs.

Main entries: :func:`ideal_coefficients` (the step-time coefficients of a perfectly efficient
engine: weights streamed once per step at full memory bandwidth, two FLOPs per parameter per
token at full tensor throughput, KV read at full bandwidth, tensor-parallel all-reduces at the
link's bandwidth and latency), :func:`kv_capacity_tokens` (vLLM's memory arithmetic, after
:func:`check_tensor_parallel`: whether vLLM can split the model's heads over the group) and
:func:`prior_params` (ideal figures x efficiency ratios; the ratios are learned by calibration
per GPU type, or the named defaults of :data:`DEFAULT_RATIOS` when no configuration of that GPU
type is calibrated). The transfer model (per-GPU-type efficiencies of the parts of a step) is
:mod:`fleetplan.replica.transfer`.

Named assumptions (documented in docs/replica-model.md): a server runs the engine limits of
its vLLM version (:mod:`fleetplan.replica.engine_defaults`; :data:`DEFAULT_ENGINE_VERSION`, the
study's 0.8.5, when none is named or recorded: 256 sequences and 2048 batched tokens below
70 GiB of device memory, 1024 and 8192 at or above it, ``vllm/engine/arg_utils.py`` 1596-1609,
block size 16, ``gpu_memory_utilization`` 0.9; the constants below are the fallback for a
version the table does not cover), weights split evenly over the tensor-parallel group, KV
heads split over it (replicated when fewer than the group; a multi-head latent attention
latent replicated on every rank), a 16-bit KV cache unless the server states another
``kv_cache_dtype`` (:mod:`fleetplan.replica.server_params`), sliding-window layers charged at
every token (:meth:`~fleetplan.catalog.models.ModelSpec.kv_elements_per_token`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.catalog.interconnects import Interconnect
from fleetplan.catalog.models import ModelSpec
from fleetplan.errors import DoesNotFit, InputError, ModelError
from fleetplan.replica.engine_defaults import chunks_prefill, engine_defaults
from fleetplan.replica.families import gpu_family
from fleetplan.replica.mla_serving import mla_serving, served_spec
from fleetplan.replica.params_record import ReplicaParams

GPU_MEMORY_UTILIZATION = 0.9
MAX_NUM_SEQS = 256
MAX_NUM_BATCHED_TOKENS = 2048
# The vLLM version a server is taken to run when none is named or recorded: the study's.
DEFAULT_ENGINE_VERSION = "0.8.5"
BLOCK_SIZE = 16
KV_DTYPE_BYTES = 2.0
GIB = 1024**3
# Memory vLLM cannot give to the KV cache besides weights and activations: CUDA context, cuBLAS
# workspaces, NCCL buffers (more with tensor parallelism). Assumption, GiB per GPU.
NON_TORCH_GIB = {1: 0.6, "tp": 1.2}
# Host-side cost of one engine step (scheduling, input preparation, sampling launch): assumption.
STEP_HOST_S = 1.5e-3
# Latency of one small all-reduce: NVLink vs PCIe (no peer-to-peer on GeForce cards): assumption.
ALLREDUCE_LATENCY_S = {"nvlink": 8e-6, "pcie": 30e-6}
# Per-request overhead outside the engine (HTTP, tokenization, streaming): assumption.
OVERHEAD_S = 5e-3
# Host time per streamed output (API server + client on the server's host; a first token waits
# for the outputs listed before it in its step: fleetplan.replica.delivery). One figure for
# every server, never fitted per configuration: chosen by the summed calibration loss of all 21
# bundled configurations over 0-150 us, refitting each at every value (docs/replica-model.md).
C_DELIVER_S = 60e-6
# Efficiency ratios (fitted / ideal) used when no configuration of a GPU type is calibrated.
DEFAULT_RATIOS: dict[str, float] = {
    "c_step": 1.25, "c_prefill_tok": 2.0, "c_seq": 1.0, "c_kv_tok": 1.25, "overhead_s": 1.0,
    "kv_capacity_tokens": 1.0,
}


def _is_nvlink(hw: HardwareConfig) -> bool:
    return hw.spec.interconnect.lower().startswith("nvlink")


# Group sizes vLLM's custom all-reduce takes (``CustomAllreduce._SUPPORTED_WORLD_SIZES``).
CUSTOM_ALLREDUCE_SIZES = (2, 4, 6, 8)


def allreduce_path(link: Interconnect, tp: int) -> str:
    """How vLLM all-reduces over ``tp`` GPUs of one node joined by ``link``: ``"custom"`` (its
    own kernel: every GPU reads its peers' buffers directly), ``"ring"`` (NCCL's ring, peer to
    peer) or ``"host"`` (NCCL through host memory, no peer to peer).

    vLLM's ``CustomAllreduce`` (``vllm/distributed/device_communicators/custom_all_reduce.py``,
    ``__init__``, ``finalize_p2p`` and ``should_custom_ar``) runs where the group is 2, 4, 6 or
    8 GPUs of one node that reach each other peer to peer, and is two GPUs or fully connected
    (NVSwitch, an xGMI mesh: ``peer_to_peer`` ``all``); otherwise NCCL does it, through host
    memory where the GPUs have no peer-to-peer (``peer_to_peer`` ``none``: GeForce cards,
    ``NCCL_P2P_DISABLE=1``). Messages above the custom kernel's 8 MiB buffer (long prefill
    chunks) also go to NCCL; the step model is linear in the tokens and keeps the decode
    steps' path, where the latency matters."""
    if link.peer_to_peer == "none":
        return "host"
    if tp in CUSTOM_ALLREDUCE_SIZES and (tp == 2 or link.peer_to_peer == "all"):
        return "custom"
    return "ring"


def allreduce_cost(link: Interconnect, tp: int) -> tuple[float, float]:
    """``(latency s, s per byte of each GPU's message)`` of one all-reduce over ``tp`` GPUs of
    one node joined by ``link`` (latency ``l``, bandwidth ``B`` per direction), by
    :func:`allreduce_path`: the custom kernel pays one exchange's latency, ``l``; NCCL's ring
    ``2 (tp - 1)`` hops of ``l`` (reduce-scatter, then all-gather). Each GPU sends and receives
    ``2 (tp - 1) / tp`` of its message over its own link; without peer-to-peer every GPU's
    share goes through host memory, which the group's transfers share: ``2 (tp - 1)`` of the
    message at ``B`` (the public 4 x RTX 3090 sweeps without peer-to-peer grow the per-sequence
    step cost 3.1-3.2 x from TP 2 to TP 4, docs/replica-model.md; this gives 3, a ring 1.5)."""
    bw = link.bandwidth_b_s
    ring = 2.0 * (tp - 1) / tp / bw
    path = allreduce_path(link, tp)
    if path == "custom":
        return link.latency_s, ring
    hops = 2.0 * (tp - 1) * link.latency_s
    return hops, (2.0 * (tp - 1) / bw if path == "host" else ring)


# Tensors a pipeline stage hands to the next, per token: vLLM's decoder layers pass
# ``IntermediateTensors({"hidden_states", "residual"})`` (e.g. vllm/model_executor/models/
# llama.py, ``LlamaModel.forward``), each hidden_size values of the model's dtype (2 bytes).
PP_TENSORS = 2
ACTIVATION_BYTES = 2.0


# Latency of one hop of NCCL's shared-memory transport between two GPUs of one node through
# host memory: assumption, order of magnitude (the ``-noP2P`` rows of data/interconnects.csv).
HOST_HOP_LATENCY_US = 10.0


def own_link_without_p2p(hw: HardwareConfig) -> Interconnect | None:
    """The link between the GPUs of a one-node tensor-parallel server of GeForce cards where
    the configuration states none: the GPU row's own PCIe link, without peer-to-peer (NVIDIA
    disables it on GeForce cards, so vLLM's custom all-reduce is off and NCCL goes through host
    memory: :func:`allreduce_path` ``"host"``). None for every other server (its GPU row's link
    figures stand)."""
    tp = int(hw.tp_size or hw.gpu_count)
    if tp <= 1 or hw.link is not None or gpu_family(hw.spec) != "nvidia-geforce":
        return None
    src = (f"{hw.spec.gpu} datasheet link ({hw.spec.interconnect}, "
           f"{hw.spec.interconnect_gb_s:g} GB/s); no peer-to-peer on GeForce cards")
    return Interconnect(name=f"{hw.spec.interconnect}-noP2P", scope="intra-node",
                        bandwidth_gb_s=hw.spec.interconnect_gb_s,
                        latency_us=HOST_HOP_LATENCY_US, bandwidth_source=src,
                        latency_source="assumption: HOST_HOP_LATENCY_US, NCCL's shared-memory "
                                       "transport through host memory, order of magnitude",
                        peer_to_peer="none")


def engine_first(hw: HardwareConfig) -> bool:
    """Whether a server's fit is engine-first: a tensor-parallel server whose all-reduces go
    through host memory (no peer-to-peer: GeForce cards, or a stated ``-noP2P`` link;
    :func:`~fleetplan.replica.priors.allreduce_path` ``"host"``). Its first tokens reach the
    client later than any step schedule puts them (docs/replica-model.md, "The
    tensor-parallel RTX 4090 first-token delays"), so its step costs are fitted to what the
    engine does and the delays are left to their own term (issue 42): its runs flagged for
    their first tokens still give their throughput and, where not delivered in bunches, their
    TPOT and ITL medians (``fit_weights``); the per-request overhead stays at its prior,
    so it cannot stand in for the delays; the start matches the lowest-rate such run
    (:mod:`fleetplan.replica.calibrate`); the delays are fitted after the engine
    (:mod:`fleetplan.replica.stream_delay`)."""
    link = hw.stated_gpu_link or own_link_without_p2p(hw)
    tp = int(hw.tp_size or hw.gpu_count)
    return tp > 1 and link is not None and allreduce_path(link, tp) == "host"


def stage_crossings(hw: HardwareConfig) -> int:
    """How many of a replica's ``pp - 1`` stage hand-overs cross from one node to another:
    ranks are laid out tensor-parallel innermost, then stage (vLLM's rank order, e.g.
    ``MultiprocExecutor._get_output_rank``), so a node holds ``gpus per node / tp`` whole
    stages, or each stage spans whole nodes."""
    tp, pp = int(hw.tp_size or hw.gpu_count), hw.pp_size
    if hw.nodes == 1 or pp == 1:
        return 0
    per_node = hw.gpus_per_node
    if tp >= per_node:
        return pp - 1
    return (pp - 1) // (per_node // tp)


def ideal_parts(spec: ModelSpec, hw: HardwareConfig) -> dict[str, float]:
    """The parts of an ideal step (s): ``weights`` (streaming the weights once, bandwidth-bound),
    ``comm_step`` (the all-reduces' and stage hand-overs' latency, interconnect-bound), ``host``
    (assumed host time), ``tok`` (one token's FLOPs, compute-bound), ``comm_tok`` (one token's
    all-reduce and hand-over bytes, interconnect-bound).

    A pipeline-parallel replica's micro-batch step runs every stage in turn, so its stage times
    add up to the whole model's layer work at the tensor-parallel group's speed (the same
    ``weights`` and ``tok`` as one group holding every layer), plus ``pp - 1`` hand-overs of
    :data:`PP_TENSORS` x hidden_size x 2 bytes per token and a latency each, over the GPU's own
    link inside a node or the configuration's network between nodes (:func:`stage_crossings`);
    a tensor-parallel group spanning nodes all-reduces over that network. docs/replica-model.md
    "Pipeline and data parallel" derives it. Where the configuration states the link between its
    GPUs (``gpu_link``), each all-reduce costs what vLLM's path over it costs
    (:func:`allreduce_cost`); unstated, a fixed latency per all-reduce
    (:data:`ALLREDUCE_LATENCY_S`) and a ring over the GPU row's ``interconnect_gb_s``."""
    gpu = hw.spec
    tp = int(hw.tp_size or hw.gpu_count)
    bw = gpu.mem_bandwidth_gb_s * 1e9
    flops = gpu.fp16_tflops_dense * 1e12
    lat_local = ALLREDUCE_LATENCY_S["nvlink" if _is_nvlink(hw) else "pcie"]
    bw_local = gpu.interconnect_gb_s * 1e9
    link, gpu_link = hw.link, hw.stated_gpu_link or own_link_without_p2p(hw)
    comm_step = comm_tok = 0.0
    if tp > 1:
        n_ar = 2 * spec.layers
        lat, link_bw = lat_local, bw_local
        if link is not None and tp > hw.gpus_per_node:
            # the ring's two phases each cross the network once more: its latency twice
            lat, link_bw = lat_local + 2.0 * link.latency_s, link.bandwidth_b_s
        comm_step = n_ar * lat
        ring = 2.0 * (tp - 1) / tp
        comm_tok = n_ar * spec.hidden_size * 2.0 * ring / link_bw
        if gpu_link is not None:  # the link between the GPUs stated: vLLM's all-reduce path
            per_ar, per_byte = allreduce_cost(gpu_link, tp)
            comm_step = n_ar * per_ar
            comm_tok = n_ar * spec.hidden_size * ACTIVATION_BYTES * per_byte
    if gpu_link is not None:  # a stage hand-over inside the node goes over the stated link
        lat_local, bw_local = gpu_link.latency_s, gpu_link.bandwidth_b_s
    if hw.pp_size > 1:
        far = stage_crossings(hw)
        near = hw.pp_size - 1 - far
        act = PP_TENSORS * spec.hidden_size * ACTIVATION_BYTES
        comm_step += near * lat_local
        comm_tok += near * act / bw_local
        if far:
            assert link is not None
            comm_step += far * link.latency_s
            comm_tok += far * act / link.bandwidth_b_s
    first, routed, _share = expert_reads(spec)
    return {"weights": first / tp / bw, "comm_step": comm_step, "host": STEP_HOST_S,
            "tok": spec.flops_per_token / tp / flops,  # MoE: the active parameters only
            "comm_tok": comm_tok, "experts": routed / tp / bw}


def expert_reads(spec: ModelSpec) -> tuple[float, float, float]:
    """``(bytes a step of one token reads, bytes of every routed expert, the share of a layer's
    routed experts one token is routed to)``.

    A dense model reads every weight once per step, whatever the batch: ``(weight_bytes, 0,
    0)``. A mixture-of-experts model reads its shared weights and only the experts its tokens
    are routed to: with ``E`` routed experts of which ``k`` per token, uniform routing touches a
    share ``1 - (1 - k/E)^T`` of each layer's experts in a step of ``T`` tokens, all of them
    soon (Mixtral's 2 of 8 by 16 tokens, DeepSeek-V3's 8 of 256 by about 150). One token pays
    the shared weights and ``k/E`` of the routed ones (in ``c_step``); the rest of a step's
    reads is ``fleetplan.replica.step_math.expert_time``. The routed experts' bytes follow from
    the resident and active parameter counts: ``P - A = R (E - k) / E``."""
    total = spec.weight_bytes
    e, k = spec.num_experts, spec.experts_per_token
    if not spec.is_moe or not 0 < k < e or spec.active_params_b is None:
        return total, 0.0, 0.0
    per_param = total / (spec.params_b * 1e9)
    routed = (spec.params_b - spec.active_params_b) * 1e9 * e / (e - k) * per_param
    routed = min(routed, total)
    share = k / e
    return total - routed + routed * share, routed, share


def ideal_coefficients(spec: ModelSpec, hw: HardwareConfig,
                       parts: Mapping[str, float] | None = None) -> dict[str, float]:
    """Step-time coefficients (s) of a perfectly efficient engine on ``hw`` (a
    pipeline-parallel replica: of one micro-batch's step through every stage; reading the KV
    cache costs the same as on one group, each stage reading its own layers'); ``parts``: the
    :func:`ideal_parts` of the same pair, when the caller has them already."""
    p = parts if parts is not None else ideal_parts(spec, hw)
    tp = int(hw.tp_size or hw.gpu_count)
    bw = hw.spec.mem_bandwidth_gb_s * 1e9
    # a linear-attention layer's decode step reads and writes its sequence's whole state
    # (the gated delta rule updates it in place): bandwidth per decoding sequence; 0 without
    state_rw = 2.0 * spec.state_bytes_per_sequence(tp) / bw
    return {
        "c_step": p["weights"] + p["comm_step"] + p["host"],
        "c_prefill_tok": p["tok"] + p["comm_tok"],
        "c_seq": p["tok"] + p["comm_tok"] + state_rw,
        "c_kv_tok": kv_bytes_per_token_per_gpu(spec, tp) / (hw.spec.mem_bandwidth_gb_s * 1e9),
        "overhead_s": OVERHEAD_S,
    }


def kv_bytes_per_token_per_gpu(spec: ModelSpec, tp: int,
                               kv_dtype_bytes: float | None = None) -> float:
    """KV bytes one token occupies on each GPU of a tensor-parallel group, at
    ``kv_dtype_bytes`` per element (vLLM's ``--kv-cache-dtype``; None: what ``auto`` gives
    the checkpoint, :attr:`~fleetplan.catalog.models.ModelSpec.auto_kv_bytes`, 16 bits but
    for a ModelOpt checkpoint with an FP8 KV scheme).

    The elements are :meth:`~fleetplan.catalog.models.ModelSpec.kv_elements_per_token`'s:
    grouped-query attention splits its KV heads over the group; multi-head latent attention
    keeps its whole latent (``kv_lora_rank + qk_rope_head_dim``) on every rank. Sliding-window
    layers are counted at every token: fleetplan's KV cache is one pool of tokens with no
    per-sequence cap, so the windowed layers are charged as if every sequence were within
    the window (exact there, an over-count for longer sequences, never an under-count:
    vLLM's hybrid manager frees a sliding layer's blocks once they leave the window,
    ``SlidingWindowManager.get_num_skipped_tokens``, vLLM 0.32.0
    ``v1/core/single_type_kv_cache_manager.py`` lines 933 and 1135, capped per request by
    ``SlidingWindowSpec.max_admission_blocks_per_request``, ``v1/kv_cache_interface.py``
    lines 859-885, in one block pool shared with the full layers,
    ``v1/core/kv_cache_utils.py`` lines 1195-1227)."""
    full, windowed = spec.kv_elements_per_token(tp)
    return (full + windowed) * (spec.auto_kv_bytes if kv_dtype_bytes is None else kv_dtype_bytes)


def seq_state_blocks(spec: ModelSpec, hw: HardwareConfig, block: int,
                     kv_dtype_bytes: float | None = None) -> int:
    """KV blocks of ``block`` tokens the fixed-size state of one sequence takes
    (:meth:`~fleetplan.catalog.models.ModelSpec.state_bytes_per_sequence`, per GPU, over the
    bytes of one block per GPU, rounded up; 0 without linear-attention layers).

    vLLM v1's hybrid KV cache manager pages the state from the block pool of the KV cache: a
    ``MambaSpec`` (vLLM 0.32.0 ``v1/kv_cache_interface.py`` lines 1035-1072, its page the
    state's shapes x dtypes) whose block is the whole model length without prefix caching
    (``model_executor/models/config.py`` lines 700-707), so ``MambaManager`` takes one block
    per running request for each group of state layers
    (``v1/core/single_type_kv_cache_manager.py`` lines 1415 and 1676-1710; with prefix caching,
    ``mamba_cache_mode`` ``align``, one resident and a second for a step at each block boundary,
    lines 1613-1641); the groups have as many layers as the full-attention group
    (``v1/core/kv_cache_utils.py`` lines 1455-1480) and one page size, every block of the pool
    holding one page per layer of a group (lines 1588-1630): the attention block grows until its
    page holds a state page (``Platform._align_hybrid_block_size``, ``platforms/interface.py``
    lines 1083-1120: 1,568 tokens for Qwen3.6-27B's FP8 cache). So a sequence's state costs the
    pool its bytes, as here. fleetplan keeps its own block size and charges the same bytes in
    its blocks; vLLM's coarser rounding of each sequence's tokens to the large block is left
    out (a few percent of the cache for short requests)."""
    if not spec.linear_layers:
        return 0
    tp = int(hw.tp_size or hw.gpu_count)
    per_block = block * kv_bytes_per_token_per_gpu(spec, tp, kv_dtype_bytes)
    return math.ceil(spec.state_bytes_per_sequence(tp) / per_block)


def check_tensor_parallel(spec: ModelSpec, hw: HardwareConfig) -> None:
    """:class:`ModelError` for a tensor-parallel degree vLLM cannot split the model over: its
    attention heads must divide evenly (``ModelConfig.verify_with_parallel_config``), and its
    KV heads must divide evenly over the group or, when fewer than the group, divide the group
    (each replicated ``tp / kv_heads`` times: ``QKVParallelLinear``'s ``divide``). The server
    refuses to start otherwise, so such a configuration is never a candidate. Multi-head
    latent attention has no KV heads to split (its latent is replicated on every rank): only
    the attention heads must divide. A model whose full-attention layers have their own KV
    heads (Gemma-4's global layers) must split both."""
    tp = int(hw.tp_size or hw.gpu_count)
    if spec.attention_heads % tp:
        raise ModelError(
            f"{spec.model} cannot run on {hw.name}: vLLM needs its {spec.attention_heads} "
            f"attention heads divisible by the tensor-parallel size {tp}")
    if spec.is_mla:
        return
    if spec.linear_heads is not None and spec.linear_heads % tp:
        raise ModelError(
            f"{spec.model} cannot run on {hw.name}: vLLM splits its {spec.linear_heads} "
            f"linear-attention key heads over the tensor-parallel size {tp} only when it "
            "divides them")
    for kv in sorted({spec.kv_heads, spec.full_kv_heads or spec.kv_heads}):
        if (kv % tp) if kv >= tp else (tp % kv):
            raise ModelError(
                f"{spec.model} cannot run on {hw.name}: vLLM splits its {kv} KV heads over "
                f"the tensor-parallel size {tp} only when one divides the other")


def kv_capacity_tokens(spec: ModelSpec, hw: HardwareConfig, *,
                       gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION,
                       max_num_batched_tokens: int = MAX_NUM_BATCHED_TOKENS,
                       max_num_seqs: int = MAX_NUM_SEQS,
                       kv_dtype_bytes: float | None = None) -> int:
    """KV-cache tokens vLLM allocates: (VRAM x utilization - weights - activations - non-torch
    memory) / KV bytes per token, per GPU, in whole blocks (``kv_dtype_bytes``: bytes per
    cached element, 1 for an FP8 cache; None: the checkpoint's ``auto``, see
    :func:`kv_bytes_per_token_per_gpu`). Raises :class:`ModelError` when the
    model does not fit, or when vLLM cannot split it over the tensor-parallel group
    (:func:`check_tensor_parallel`). A pipeline-parallel replica: each GPU holds the weights
    and the KV cache of its stage's ``layers / pp`` layers, so the weights split over
    ``tp x pp`` GPUs and a token's KV bytes per GPU are ``1 / pp`` of one group's; the result
    is the tokens of the replica's whole cache, shared by its micro-batches."""
    check_tensor_parallel(spec, hw)
    tp = int(hw.tp_size or hw.gpu_count)
    pp = hw.pp_size
    gpu = hw.spec
    budget = gpu.vram_gb * GIB * gpu_memory_utilization
    weights = spec.weight_bytes / (tp * pp)
    act = (max_num_batched_tokens * (4 * spec.hidden_size + 2 * spec.intermediate_size / tp) * 2.0
           + max_num_seqs * spec.vocab_size * 4.0)
    non_torch = NON_TORCH_GIB[1 if tp * pp == 1 else "tp"] * GIB
    free = budget - weights - act - non_torch
    per_tok = kv_bytes_per_token_per_gpu(spec, tp, kv_dtype_bytes) / pp
    tokens = int(free // per_tok) // BLOCK_SIZE * BLOCK_SIZE if free > 0 else 0
    if tokens < BLOCK_SIZE * 4:
        raise DoesNotFit(
            f"{spec.model} does not fit on {hw.name}: {weights / 1e9:.1f} GB of weights per GPU "
            f"leave {max(free, 0) / 1e9:.2f} GB for the KV cache of "
            f"{gpu.vram_gb:g} GB x {gpu_memory_utilization:g} (need room for a few sequences)"
        )
    return tokens


def server_limits(spec: ModelSpec, hw: HardwareConfig,
                  engine_version: str | None = None) -> tuple[int, int, int, float, str]:
    """``(max_num_seqs, max_num_batched_tokens, block_size, gpu_memory_utilization, note)`` of a
    vLLM server of ``engine_version`` (default :data:`DEFAULT_ENGINE_VERSION`, the study's) on
    ``hw``, by :mod:`fleetplan.replica.engine_defaults` (device-memory rules applied); a version
    the table does not cover keeps the 0.8.5 figures below 70 GiB and says so in ``note``."""
    version = engine_version or DEFAULT_ENGINE_VERSION
    try:
        d = engine_defaults(version, hw.gpu, hw.spec.vram_gb)
    except InputError:  # a version the table does not cover: say so, keep the assumption
        return (MAX_NUM_SEQS, MAX_NUM_BATCHED_TOKENS, BLOCK_SIZE, GPU_MEMORY_UTILIZATION,
                f"; vLLM {version}: no engine defaults known, vLLM 0.8.5's below 70 GiB used "
                f"(2048 tokens, 256 sequences)")
    batched, _chunked = d.scheduler_budget(spec.context_length, hw.gpu)
    note = (f"; engine defaults of vLLM {version} ({d.source})" if engine_version is not None
            else "")
    return d.max_num_seqs, batched, d.block_size, d.gpu_memory_utilization, note


_KV_CAP = 10**9 // 16 * 16  # ReplicaParams.kv_capacity_tokens' upper bound, whole blocks


def layout_note(hw: HardwareConfig) -> str:
    """What a parameter source says of a server laid out otherwise than one tensor-parallel
    group on one node (empty for one)."""
    if not hw.layout:
        return ""
    out = (f"; {hw.name}: {hw.dp} replica(s) of {hw.pp_size} pipeline stage(s) of "
           f"{hw.tp_size} GPU(s), each replica {hw.pp_size} micro-batch engine(s) with "
           f"1/{hw.pp_size} of its KV cache and max_num_seqs, the load split over all "
           f"{hw.engines} engines (docs/replica-model.md)")
    if hw.link is not None:
        assumed = "" if hw.interconnect else ", assumed: no interconnect stated"
        out += (f"; nodes joined by {hw.link.name} ({hw.link.bandwidth_gb_s:g} GB/s, "
                f"{hw.link.latency_us:g} us{assumed})")
    return out


def lockstep_config(spec: ModelSpec, hw: HardwareConfig) -> HardwareConfig | None:
    """The one tensor-parallel group an MoE model's data-parallel server steps as, else None.

    vLLM runs such a server's data-parallel ranks in step: their expert layers are one group
    over every rank's GPUs (each layer gathers the tokens of all ranks; an idle rank runs dummy
    steps), so every step takes all ``dp x tp`` GPUs, the experts are split over all of them and
    one rank's prefill holds up every rank's decode. fleetplan replays it as one engine over
    those GPUs: ``4xRTX-3090+tp2dp2`` as ``4xRTX-3090`` (tensor parallel 4), the pipeline stages,
    nodes and links kept. The attention and dense weights each rank holds whole are then counted
    split over the group: a named simplification (docs/replica-model.md)."""
    if hw.dp == 1 or not spec.is_moe:
        return None
    # the same GPUs, nodes and links (gpu_count = tp x pp x dp still holds with dp 1)
    return hw.model_copy(update={"tp_size": int(hw.tp_size or 1) * hw.dp, "dp": 1})


def as_lockstep(params: ReplicaParams, hw: HardwareConfig,
                group: HardwareConfig) -> ReplicaParams:
    """``params`` of the group :func:`lockstep_config` gave, as the data-parallel server ``hw``:
    its name, and every rank's scheduler together (``dp`` x ``max_num_seqs`` and x the tokens a
    step batches)."""
    return params.with_(
        config=hw.name, max_num_seqs=params.max_num_seqs * hw.dp,
        max_num_batched_tokens=params.max_num_batched_tokens * hw.dp,
        source=(f"{params.source}; {hw.name}: data parallel {hw.dp} over an MoE model steps its "
                f"ranks together (vLLM gathers every rank's tokens into each expert layer), so "
                f"it is replayed as one engine over its {hw.gpu_count} GPUs ({group.name}) "
                f"with {hw.dp} x its max_num_seqs and batched tokens (docs/replica-model.md)"))


def micro_batch_share(kv_tokens: int, max_num_seqs: int, pp: int,
                      block: int = BLOCK_SIZE) -> tuple[int, int]:
    """One of ``pp`` micro-batch engines' share of a pipeline-parallel replica's KV cache
    (whole blocks, at least four) and of its ``max_num_seqs`` (at least one); ``pp`` 1: both
    unchanged."""
    if pp <= 1:
        return kv_tokens, max_num_seqs
    return (max(block * 4, kv_tokens // pp // block * block), max(1, max_num_seqs // pp))


def prior_params(spec: ModelSpec, hw: HardwareConfig, *,
                 efficiency: Mapping[str, float] | Mapping[str, object] | None = None,
                 source: str | None = None,
                 engine_version: str | None = None) -> ReplicaParams:
    """Parameters from first principles: :func:`ideal_coefficients` x efficiency ratios.

    ``efficiency`` maps coefficient names to ratios (fitted / ideal) learned from calibrated
    configurations of the same GPU type (as stored in the calibration file's ``efficiency``
    table, whose entries may also carry ``n_configs``); missing names use
    :data:`DEFAULT_RATIOS`. The result has ``calibrated=False``. ``engine_version``: the vLLM
    version whose defaults the server ran with (:mod:`fleetplan.replica.engine_defaults`;
    default: :data:`DEFAULT_ENGINE_VERSION`, the study's).
    """
    group = lockstep_config(spec, hw)
    if group is not None:
        return as_lockstep(prior_params(spec, group, efficiency=efficiency, source=source,
                                        engine_version=engine_version), hw, group)
    mla = mla_serving(spec, engine_version)
    spec = served_spec(spec, engine_version)  # what this release caches of a latent model
    parts = ideal_parts(spec, hw)
    ideal = ideal_coefficients(spec, hw, parts)
    seqs, batched, block, util, engine_note = server_limits(spec, hw, engine_version)
    ratios = dict(DEFAULT_RATIOS)
    learned = 0
    if efficiency:
        for k, v in efficiency.items():
            if k in ratios and isinstance(v, int | float) and math.isfinite(v) and v > 0:
                ratios[k] = float(v)
        n = efficiency.get("n_configs", 0)
        learned = int(n) if isinstance(n, int | float) else 0
    kv = kv_capacity_tokens(spec, hw, gpu_memory_utilization=util,
                            max_num_batched_tokens=batched, max_num_seqs=seqs)
    kv = max(block * 4, int(kv * ratios["kv_capacity_tokens"]) // block * block)
    # pipeline parallel: the replica as pp micro-batch engines, each with its share of the
    # cache and of max_num_seqs (vLLM's scheduler caps the running requests of all batches in
    # flight together: docs/replica-model.md "Pipeline and data parallel")
    kv, seqs = micro_batch_share(kv, seqs, hw.pp_size, block)
    kv = min(kv, _KV_CAP)  # a tiny model's cache: a billion tokens never binds
    state = seq_state_blocks(spec, hw, block)
    if state and kv // block < state + 1:
        raise DoesNotFit(
            f"{spec.model} does not fit on {hw.name}: the KV cache of {kv} tokens holds no "
            f"sequence's fixed-size state ({state} blocks of {block} tokens) and a token")
    how = (f"efficiency learned from {learned} calibrated {hw.gpu} configuration(s)" if learned
           else "default efficiency assumptions (no calibrated configuration of this GPU)")
    return ReplicaParams(
        model=spec.model, config=hw.name,
        c_step=ideal["c_step"] * ratios["c_step"],
        c_prefill_tok=ideal["c_prefill_tok"] * ratios["c_prefill_tok"],
        c_seq=ideal["c_seq"] * ratios["c_seq"],
        c_kv_tok=ideal["c_kv_tok"] * ratios["c_kv_tok"],
        # a routed expert is read like any weight: at c_step's efficiency
        c_experts=min(parts["experts"] * ratios["c_step"], 10.0),
        expert_share=expert_reads(spec)[2],
        overhead_s=ideal["overhead_s"] * ratios["overhead_s"], c_deliver=C_DELIVER_S,
        kv_capacity_tokens=kv, max_num_seqs=seqs,
        max_num_batched_tokens=batched, block_size=block, seq_state_blocks=state,
        chunked_prefill=(chunks_prefill(engine_version, spec.context_length, hw.gpu)
                         and not (mla is not None and mla.whole_prompts)),
        prefix_caching=not (mla is not None and mla.no_prefix_cache),
        max_model_len=int(min(spec.context_length, kv - state * block)), calibrated=False,
        source=(source or f"spec-based prior (model card + GPU datasheet); {how}") + engine_note
        + ("" if mla is None else f"; {mla.note}") + layout_note(hw),
    )

"""A replica's parameters for the server the user described: the engine settings of a
:class:`~fleetplan.profiles.server.ServerDescription` mapped onto
:class:`~fleetplan.replica.params_record.ReplicaParams`' own fields.

- ``max_num_seqs``, ``max_num_batched_tokens``, ``block_size``: the scheduler's cap on running
  sequences, its token budget per step (the chunked-prefill budget) and the KV block, as
  stated (a pipeline-parallel replica's micro-batch engine: ``max_num_seqs / pp``).
- ``gpu_memory_utilization`` (and the two limits above, which vLLM reserves activation memory
  for): the KV cache scaled by the ratio of vLLM's memory arithmetic
  (:func:`fleetplan.replica.priors.kv_capacity_tokens`) with the stated settings to the same
  arithmetic with the engine version's defaults, so a calibrated cache keeps its fitted
  efficiency and moves as the server's memory plan does.
- ``max_model_len``: the longest prompt + output served, at most the model's context. On a
  vLLM V0 server (before 0.8) it also sets the token budget and the scheduling policy where
  ``max_num_batched_tokens`` is not stated (:func:`v0_budget`).
- ``enable_prefix_caching``: read by the replay (a run on a server without it is cold), not a
  parameter.
- ``kv_cache_dtype`` (vLLM's ``--kv-cache-dtype``; bytes per element in
  :data:`~fleetplan.profiles.server.KV_CACHE_DTYPE_BYTES`: ``fp8*`` 1, the 16-bit types 2,
  ``auto`` the checkpoint's own, ``ModelSpec.auto_kv_bytes``): the KV cache scaled by the same
  memory arithmetic at the stated bytes per element
  (an FP8 cache holds twice the tokens in the same memory), and ``c_kv_tok``, the cost of
  reading one cached token in a step, scaled by the byte ratio (half the bytes to read).

:func:`apply_stated` applies settings given as a mapping: what a scenario candidate's
``server:`` record gives the optimizer's capacity search and the plan's simulation alike.
``fleetplan calibrate`` (:mod:`fleetplan.replica.calibrate`) and ``validate`` apply a run's
recorded settings with :func:`apply_server`. (Also importable from
:mod:`fleetplan.validate.server_params`, where it was first placed.)

Of the step-time coefficients only ``c_kv_tok`` changes, and only with ``kv_cache_dtype``: the
other settings change what a step holds, not what a token costs. (Named assumption: the
attention read is bandwidth-bound, so its time follows the bytes read; the dequantization of an
FP8 cache is taken to be free.)
"""

from __future__ import annotations

from collections.abc import Mapping

from fleetplan.catalog.catalog import Catalog, bundled_catalog
from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.catalog.models import ModelSpec
from fleetplan.errors import InputError
from fleetplan.profiles.server import KV_CACHE_DTYPE_BYTES, EngineValue, ServerDescription
from fleetplan.replica.engine_defaults import known_defaults
from fleetplan.replica.mla_serving import served_spec, whole_prompts
from fleetplan.replica.params_record import ReplicaParams
from fleetplan.replica.priors import kv_capacity_tokens, seq_state_blocks, server_limits

_MEMORY_ARGS = ("gpu_memory_utilization", "max_num_seqs", "max_num_batched_tokens",
                "kv_cache_dtype")


def apply_server(params: ReplicaParams, server: ServerDescription | None, *,
                 engine_version: str | None = None,
                 catalog: Catalog | None = None) -> ReplicaParams:
    """``params`` for a server started with ``server``'s engine settings (unchanged when it
    states none); ``engine_version``: whose defaults the stated settings replace (default: the
    server's, else the study's). One-line :class:`InputError` for settings vLLM would refuse
    together (fewer batched tokens than sequences, a context beyond the model's)."""
    if server is None or not server.engine_args:
        return params
    args = server.engine_args
    n = server.name("engine_args")
    limits: dict[str, int] = {k: int(args[k]) for k in (
        "max_num_seqs", "max_num_batched_tokens", "block_size") if k in args}
    version = engine_version or server.engine_version
    cat = catalog if catalog is not None else bundled_catalog()
    spec = served_spec(cat.model(params.model), version)
    hw = HardwareConfig.parse(params.config, cat)
    policy = v0_budget(version, args, spec, hw.gpu)
    if policy is not None:  # V0: the budget and the policy follow the served context
        limits["max_num_batched_tokens"] = policy[0]
    changes: dict[str, object] = dict(limits)
    if policy is not None:
        changes["chunked_prefill"] = policy[1]
    seqs = limits.get("max_num_seqs", params.max_num_seqs)
    tokens = limits.get("max_num_batched_tokens", params.max_num_batched_tokens)
    if tokens < seqs:
        raise InputError(f"{n} max_num_batched_tokens={tokens} is below max_num_seqs={seqs} "
                         f"on {params.config}: vLLM refuses to start (state both)")
    if "max_num_seqs" in limits and hw.pp_size > 1:
        # a pipeline-parallel replica's micro-batch engine: its share of the running requests
        # (vLLM's cap is on all batches in flight together, fleetplan.replica.priors)
        changes["max_num_seqs"] = max(1, limits["max_num_seqs"] // hw.pp_size)
    block = limits.get("block_size", params.block_size)
    kv = params.kv_capacity_tokens
    stated_kv = str(args.get("kv_cache_dtype", "auto"))
    # "auto" is the checkpoint's own (16 bits, or a ModelOpt checkpoint's FP8 scheme)
    kv_bytes = spec.auto_kv_bytes if stated_kv == "auto" else KV_CACHE_DTYPE_BYTES[stated_kv]
    if any(k in args for k in _MEMORY_ARGS) or policy is not None:
        d_seqs, d_tokens, _block, d_util, _note = server_limits(spec, hw, version)
        base = kv_capacity_tokens(spec, hw, gpu_memory_utilization=d_util,
                                  max_num_batched_tokens=d_tokens, max_num_seqs=d_seqs)
        mine = kv_capacity_tokens(
            spec, hw, gpu_memory_utilization=float(args.get("gpu_memory_utilization", d_util)),
            max_num_batched_tokens=limits.get("max_num_batched_tokens", d_tokens),
            max_num_seqs=int(args.get("max_num_seqs", d_seqs)), kv_dtype_bytes=kv_bytes)
        kv = int(kv * mine / base)
    if kv_bytes != spec.auto_kv_bytes:  # other bytes per cached token to read in each step
        changes["c_kv_tok"] = params.c_kv_tok * kv_bytes / spec.auto_kv_bytes
    kv = max(block * 4, kv // block * block)
    changes["kv_capacity_tokens"] = kv
    if spec.linear_layers:  # the state per sequence in this server's blocks of its KV dtype
        changes["seq_state_blocks"] = seq_state_blocks(spec, hw, block, kv_bytes)
    context = int(args.get("max_model_len", params.max_model_len))
    if "max_model_len" in args and context > spec.context_length:
        raise InputError(f"{n} max_model_len={context} exceeds {spec.model}'s context of "
                         f"{spec.context_length} tokens: vLLM refuses it")
    longest = params.max_model_len
    if longest == min(spec.context_length, params.kv_capacity_tokens):
        # the longest sequence was the cache's size: it follows the cache (an FP8 cache
        # holds twice the tokens), up to the model's context
        longest = spec.context_length
    changes["max_model_len"] = min(context, kv) if "max_model_len" in args else min(
        longest, kv)
    changes["source"] = f"{params.source}; server settings stated: {server.describe()}"
    return params.with_(**changes)


def v0_budget(version: str | None, args: Mapping[str, EngineValue],
              spec: ModelSpec | None = None, gpu: str | None = None) -> tuple[int, bool] | None:
    """``(max_num_batched_tokens, chunked_prefill)`` of a vLLM V0 server (``version`` before
    0.8) whose ``max_model_len`` is stated and ``max_num_batched_tokens`` is not: V0 derives
    both from the served context (:meth:`~fleetplan.replica.engine_defaults.EngineDefaults.
    scheduler_budget`: whole prompts and ``max(max_model_len, 2048)`` tokens up to 32K, chunks
    of 512 beyond, 2048 in 0.7.x but not on ROCm ``gpu``), not from the model's; a model
    ``spec`` whose prompts that release always
    schedules whole (:func:`~fleetplan.replica.mla_serving.whole_prompts`) keeps the budget
    without the chunks. None otherwise (V1's budget does not follow it)."""
    if "max_model_len" not in args or "max_num_batched_tokens" in args:
        return None
    d = known_defaults(version)
    if d is None or d.engine != "V0":
        return None
    budget, chunked = d.scheduler_budget(int(args["max_model_len"]), gpu)
    return budget, chunked and not (spec is not None and whole_prompts(spec, version))


def apply_stated(params: ReplicaParams, engine_args: Mapping[str, EngineValue] | None, *,
                 catalog: Catalog | None = None, where: str = "server",
                 engine_version: str | None = None) -> ReplicaParams:
    """``params`` started with ``engine_args`` (none: ``params`` itself), by
    :func:`apply_server`. ``where``: how errors name the settings (``candidates[0].server``);
    ``engine_version``: the server's vLLM version, whose defaults the settings replace."""
    if not engine_args:
        return params
    return apply_server(params, ServerDescription(engine_args=dict(engine_args),
                                                  names={"engine_args": where}),
                        engine_version=engine_version, catalog=catalog)

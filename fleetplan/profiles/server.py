"""The description of a real server a run was measured on, or a prediction is asked for.

vLLM's own result files never name the GPU, and none records the engine settings a server was
started with (``--max-num-seqs``, ``--max-num-batched-tokens`` ...), yet both decide what it
measures. :class:`ServerDescription` is what the user states about the server (the CLI's
``--gpu``, ``--gpu-count``, ``--tp``, ``--pp``, ``--nodes``, ``--engine-version``,
``--engine-arg KEY=VALUE`` and ``--warm-prefix-cache``), shared by ``ingest``, ``validate`` and
``predict`` (``--dp`` and ``--interconnect`` too: replicas behind one endpoint, the network
between nodes):

- :meth:`ServerDescription.pick` merges a stated fact with what a file says: the file's value
  where the user stated none, the user's where the file says nothing, and one line naming both
  where they disagree (never a silent override).
- :meth:`ServerDescription.check_modelled` refuses a layout that does not add up (an
  interconnect on one node); :meth:`ServerDescription.check_storable` refuses, for the profile
  store (``ingest``), a server other than one tensor-parallel group on one node, which
  ``validate`` and ``predict`` replay (pipeline stages, data-parallel replicas, several nodes:
  :mod:`fleetplan.replica.split_replay`); :meth:`ServerDescription.config_name` names the
  configuration (``8xH100-SXM+tp4pp2``, :mod:`fleetplan.catalog.hardware`).
- :data:`ENGINE_ARGS` lists the engine settings the replica model has a parameter for, with
  their bounds; :func:`parse_engine_args` reads ``KEY=VALUE`` pairs (any other key refused,
  naming the accepted ones). :mod:`fleetplan.replica.server_params` maps them onto a
  replica's parameters.

A run's prefix cache: a foreign run is replayed cold (no prompt cached when it starts) unless
the user says otherwise (``warm_prefix_cache``); the study's series protocol (prompts cached
after a series' first run) is a property of the study's runs, never assumed of others'.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from fleetplan.errors import InputError

if TYPE_CHECKING:
    from fleetplan.catalog.catalog import Catalog

MAX_GPUS = 64  # as the store's gpu_count (fleetplan.profiles.vllm.MAX_GPUS)
EngineValue = int | float | bool | str

# vLLM's --kv-cache-dtype values the replica model sizes: bytes per cached element ("auto":
# the model's dtype, which vLLM serves in 16 bits). vLLM's CacheDType (vllm/config/cache.py)
# lists more (fp8_ds_mla, nvfp4, turboquant_* ...): packed layouts refused, not guessed.
KV_CACHE_DTYPE_BYTES: dict[str, float] = {
    "auto": 2.0, "float16": 2.0, "bfloat16": 2.0, "fp8": 1.0, "fp8_e4m3": 1.0,
    "fp8_e5m2": 1.0, "fp8_inc": 1.0}


@dataclass(frozen=True)
class EngineArg:
    """One engine setting the replica model has a parameter for: its value type, bounds and
    what it changes (the help text lists these)."""

    key: str
    kind: type
    low: float | None = None
    high: float | None = None
    low_open: bool = False  # low itself is refused (gpu_memory_utilization > 0)
    effect: str = ""
    choices: tuple[str, ...] = ()  # a str setting: its accepted values

    def parse(self, raw: str) -> EngineValue:
        """``raw`` as this setting's value; :class:`ValueError` with the reason otherwise."""
        text = raw.strip()
        if self.kind is str:
            self.check(text.lower())
            return text.lower()
        if self.kind is bool:
            low = text.lower()
            if low in ("true", "1", "yes", "on"):
                return True
            if low in ("false", "0", "no", "off"):
                return False
            raise ValueError("expected true or false")
        try:
            value: EngineValue = int(text) if self.kind is int else float(text)
        except ValueError:
            raise ValueError("expected a whole number" if self.kind is int
                             else "expected a number") from None
        self.check(value)
        return value

    def check(self, value: object) -> None:
        """:class:`ValueError` when ``value`` is not of this setting's type and bounds."""
        if self.kind is str:
            if not isinstance(value, str) or value not in self.choices:
                raise ValueError(f"must be one of {', '.join(self.choices)}")
            return
        if self.kind is bool:
            if not isinstance(value, bool):
                raise ValueError("expected true or false")
            return
        if isinstance(value, bool) or not isinstance(value, int | float) or (
                self.kind is int and not isinstance(value, int)) or value != value:
            raise ValueError("expected a whole number" if self.kind is int else "expected a number")
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            raise ValueError(f"must be {'>' if self.low_open else '>='} {self.low:g}")
        if self.high is not None and value > self.high:
            raise ValueError(f"must be <= {self.high:g}")


# the bounds are those of fleetplan.replica.params_record.ReplicaParams
ENGINE_ARGS: dict[str, EngineArg] = {a.key: a for a in (
    EngineArg("max_num_seqs", int, 1, 65536,
              effect="caps the sequences running at once (the batch)"),
    EngineArg("max_num_batched_tokens", int, 1, 10**6,
              effect="the tokens one step schedules (the chunked-prefill budget)"),
    EngineArg("gpu_memory_utilization", float, 0.0, 1.0, low_open=True,
              effect="the share of GPU memory vLLM takes: the KV cache's size"),
    EngineArg("enable_prefix_caching", bool,
              effect="false: no prompt is ever served from the prefix cache"),
    EngineArg("block_size", int, 1, 1024, effect="the KV-cache block, tokens"),
    EngineArg("max_model_len", int, 2, 10**8, effect="the longest prompt + output served"),
    EngineArg("kv_cache_dtype", str, choices=tuple(KV_CACHE_DTYPE_BYTES),
              effect="the KV cache's element type (fp8: one byte, twice the tokens, half "
                     "the attention reads)"),
)}


def accepted_keys() -> str:
    return ", ".join(ENGINE_ARGS)


def engine_arg_help() -> str:
    """The help text of ``--engine-arg``."""
    return ("An engine setting the server was started with, KEY=VALUE, repeatable (vLLM's "
            "flag in snake case, e.g. max_num_seqs=512): "
            + "; ".join(f"{a.key} {a.effect}" for a in ENGINE_ARGS.values()) + ".")


def parse_engine_args(values: Iterable[str] | None,
                      option: str = "--engine-arg") -> dict[str, EngineValue]:
    """``["max_num_seqs=512", ...]`` -> ``{"max_num_seqs": 512}``; a dash in the key reads as
    an underscore (``max-num-seqs``). One-line :class:`InputError` naming the option and value
    for a pair without ``=``, an unknown key (with the accepted ones), a bad value, or a key
    given twice with different values."""
    out: dict[str, EngineValue] = {}
    for item in values or ():
        key, sep, raw = item.partition("=")
        key = key.strip().replace("-", "_").lstrip("_")
        if not sep or not key:
            raise InputError(f"{option} {item!r}: expected KEY=VALUE, e.g. max_num_seqs=512")
        arg = ENGINE_ARGS.get(key)
        if arg is None:
            raise InputError(f"{option} {item!r}: unknown key {key!r}; accepted: "
                             f"{accepted_keys()}")
        try:
            value = arg.parse(raw)
        except ValueError as exc:
            raise InputError(f"{option} {item!r}: {key} {raw.strip()!r} {exc}") from None
        if key in out and out[key] != value:
            raise InputError(f"{option} {item!r}: {key} was already given as {out[key]!r}")
        out[key] = value
    return out


# how the errors call each field by default (the CLI's flags)
FLAG_NAMES: dict[str, str] = {
    "gpu": "--gpu", "gpu_count": "--gpu-count", "tp": "--tp", "pp": "--pp", "dp": "--dp",
    "nodes": "--nodes", "interconnect": "--interconnect", "engine_version": "--engine-version",
    "engine_args": "--engine-arg", "warm_prefix_cache": "--warm-prefix-cache"}


@dataclass(frozen=True, kw_only=True)
class ServerDescription:
    """What the user states about a server: its GPU (``gpu``, any catalog spelling), its GPUs
    (``gpu_count``: all of them, ``tp x pp x dp``), tensor- and pipeline-parallel sizes (``tp``,
    ``pp``), data-parallel replicas behind its endpoint (``dp``), ``nodes`` and the network
    between them (``interconnect``, a row of ``interconnects.csv``),
    the vLLM version (``engine_version``), engine settings (``engine_args``, keys of
    :data:`ENGINE_ARGS`) and whether the prompts were already in its prefix cache when the run
    started (``warm_prefix_cache``; None: not stated, a foreign run is then cold). None: not
    stated. Bad values are refused when built, one line naming the field (``names``: its
    flag)."""

    gpu: str | None = None
    gpu_count: int | None = None
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    nodes: int | None = None
    interconnect: str | None = None
    engine_version: str | None = None
    engine_args: Mapping[str, EngineValue] = field(default_factory=dict)
    warm_prefix_cache: bool | None = None
    names: Mapping[str, str] = field(default_factory=lambda: dict(FLAG_NAMES), compare=False,
                                     repr=False)

    def name(self, field_name: str) -> str:
        return self.names.get(field_name, field_name)

    def __post_init__(self) -> None:
        n = self.name
        for key in ("gpu_count", "tp", "pp", "dp", "nodes"):
            v = getattr(self, key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int)
                                  or not 1 <= v <= MAX_GPUS):
                raise InputError(f"{n(key)} {v!r} must be a whole number from 1 to {MAX_GPUS}")
        if self.gpu is not None and not self.gpu.strip():
            raise InputError(f"{n('gpu')} {self.gpu!r}: name a GPU, e.g. H100-PCIe")
        if self.interconnect is not None and not self.interconnect.strip():
            raise InputError(f"{n('interconnect')} {self.interconnect!r}: name a network, e.g. "
                             "IB-NDR-400 or Ethernet-100G")
        if self.engine_version is not None:
            from fleetplan.profiles.vllm import short

            if not self.engine_version.strip() or len(self.engine_version) > 64:
                raise InputError(f"{n('engine_version')} {short(self.engine_version, 70)!r}: "
                                 "expected a version, e.g. 0.8.5")
        for key, value in self.engine_args.items():
            arg = ENGINE_ARGS.get(key)
            if arg is None:
                raise InputError(f"{n('engine_args')} {key}: unknown key; accepted: "
                                 f"{accepted_keys()}")
            try:
                arg.check(value)
            except ValueError as exc:
                raise InputError(f"{n('engine_args')} {key}={value!r}: {exc}") from None
        seqs = self.engine_args.get("max_num_seqs")
        tokens = self.engine_args.get("max_num_batched_tokens")
        if (isinstance(seqs, int) and isinstance(tokens, int) and not isinstance(seqs, bool)
                and tokens < seqs):
            raise InputError(f"{n('engine_args')} max_num_batched_tokens={tokens} is below "
                             f"max_num_seqs={seqs}: vLLM refuses to start (every running "
                             "sequence decodes one token a step)")
        if self.tp is not None and self.gpu_count is not None:
            per_replica = self.tp * (self.pp or 1) * (self.dp or 1)
            if self.gpu_count % per_replica:
                raise InputError(f"{n('tp')} {self.tp}"
                                 + (f" x {n('pp')} {self.pp}" if self.pp else "")
                                 + (f" x {n('dp')} {self.dp}" if self.dp else "")
                                 + f" does not divide {n('gpu_count')} {self.gpu_count}")
        if self.warm_prefix_cache and self.engine_args.get("enable_prefix_caching") is False:
            raise InputError(f"{n('warm_prefix_cache')} contradicts {n('engine_args')} "
                             "enable_prefix_caching=false: a server without prefix caching "
                             "never serves a prompt from it")

    @property
    def stated(self) -> bool:
        """Whether the user stated anything about the server."""
        return any(getattr(self, k) is not None for k in (
            "gpu", "gpu_count", "tp", "pp", "dp", "nodes", "interconnect", "engine_version",
            "warm_prefix_cache")) or bool(self.engine_args)

    def stated_flags(self) -> list[str]:
        """The flags of what was stated, in the order of :data:`FLAG_NAMES`."""
        return [self.name(k) for k in FLAG_NAMES
                if (self.engine_args if k == "engine_args" else getattr(self, k)) not in (None, {})]

    def check_modelled(self, pp: int | None = None, nodes: int | None = None,
                       where: str = "") -> None:
        """One-line :class:`InputError` for a layout that does not add up: an interconnect
        stated for a server on one node (``nodes`` as stated, else a file's)."""
        count = self.nodes if self.nodes is not None else nodes
        if self.interconnect is not None and (count or 1) == 1:
            raise InputError(f"{where}{self.name('interconnect')} {self.interconnect} names the "
                             f"network between nodes; state {self.name('nodes')} (above 1)")

    def check_storable(self, pp: int | None = None, nodes: int | None = None,
                       dp: int | None = None, where: str = "") -> None:
        """One-line :class:`InputError` for a server the profile store does not hold (it
        keeps one tensor-parallel group on one node per run; ``validate`` and ``predict``
        replay the others): pipeline parallel, data-parallel replicas or several nodes, stated
        by the user or (``pp``, ``nodes``, ``dp``) a file."""
        self.check_modelled(pp, nodes, where)
        for key, value, what in (("pp", pp if self.pp is None else self.pp, "pipeline parallel"),
                                 ("dp", dp if self.dp is None else self.dp,
                                  "data-parallel replicas"),
                                 ("nodes", nodes if self.nodes is None else self.nodes,
                                  "a multi-node server")):
            if value is not None and value > 1:
                who = self.name(key) if getattr(self, key) is not None else key
                raise InputError(f"{where}{who} {value}: {what} is not kept in the profile "
                                 "store (one tensor-parallel group on one node per run); "
                                 "validate and predict model it")

    def pick(self, key: str, file_value: Any, file_field: str, where: str = "") -> Any:
        """The value of ``key``: the user's where stated, else the file's (``file_value``,
        read from ``file_field``). Both stated and different: one-line :class:`InputError`
        naming both (``where``: the file and line, prefixed)."""
        mine = getattr(self, key)
        if mine is None:
            return file_value
        if file_value is not None and file_value != mine:
            raise InputError(f"{where}{self.name(key)} {mine} contradicts the file's "
                             f"{file_field} {file_value}")
        return mine

    def warm(self) -> bool:
        """Whether a run on this server starts with its prompts cached: only when the user
        said so (a foreign run is cold)."""
        return bool(self.warm_prefix_cache)

    def describe(self) -> str:
        """The stated engine settings, as a note (``max_num_seqs=512, ...``)."""
        return ", ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}"
                         for k, v in self.engine_args.items())

    def config_name(self, config: str | None, catalog: Catalog | None = None,
                    config_flag: str = "--config") -> str:
        """The hardware configuration of a prediction (``<count>x<GPU>``, with a layout suffix
        for pipeline stages, data-parallel replicas or several nodes: ``8xH100-SXM+tp4pp2``,
        :class:`~fleetplan.catalog.hardware.HardwareConfig`): ``config`` merged with the
        stated GPU, count and layout (a contradiction refused, naming both; ``gpu_count`` must
        equal ``tp x pp x dp``, refused in one line naming the flags)."""
        from fleetplan.catalog.catalog import bundled_catalog
        from fleetplan.catalog.hardware import HardwareConfig

        cat = catalog if catalog is not None else bundled_catalog()
        self.check_modelled()
        n = self.name
        layout_keys = ("tp", "pp", "dp", "nodes", "interconnect")
        if self.gpu is None and self.gpu_count is None and all(
                getattr(self, k) is None for k in layout_keys):
            if config is None:
                raise InputError(f"{config_flag} or {n('gpu')} is required (e.g. {config_flag} "
                                 f"1xH100-PCIe, or {n('gpu')} H100-PCIe {n('gpu_count')} 1)")
            return config
        base = HardwareConfig.parse(config, cat) if config is not None else None
        gpu = cat.normalize_gpu(self.gpu) if self.gpu is not None else None
        if base is not None and gpu is not None and gpu != base.gpu:
            raise InputError(f"{n('gpu')} {self.gpu} contradicts {config_flag} {config}")
        gpu = gpu or (base.gpu if base is not None else None)
        if gpu is None:
            raise InputError(f"{self.stated_flags()[0]} needs {n('gpu')} or {config_flag} "
                             "(which GPU)")
        if (base is not None and self.gpu_count is not None
                and self.gpu_count != base.gpu_count):
            raise InputError(f"{n('gpu_count')} {self.gpu_count} contradicts {config_flag} "
                             f"{config}")
        fields = {"tp": "tp_size", "pp": "pp_size", "dp": "dp", "nodes": "nodes",
                  "interconnect": "interconnect"}
        layout: dict[str, Any] = {}
        for key, attr in fields.items():
            mine, theirs = getattr(self, key), getattr(base, attr) if base is not None else None
            if mine is not None and base is not None and mine != theirs:
                raise InputError(f"{n(key)} {mine} contradicts {config_flag} {config}")
            layout[attr] = mine if mine is not None else theirs
        pp, dp = int(layout["pp_size"] or 1), int(layout["dp"] or 1)
        tp = layout["tp_size"]
        count = self.gpu_count or (base.gpu_count if base is not None else None) or (
            int(tp) * pp * dp if tp is not None else pp * dp)
        if tp is not None and int(tp) * pp * dp != count:
            raise InputError(
                f"{n('gpu_count')} {count} is not {n('tp')} {tp} x {n('pp')} {pp} x "
                f"{n('dp')} {dp} = {int(tp) * pp * dp}: state how the other GPUs serve "
                f"({n('pp')} for pipeline stages, {n('dp')} for replicas behind the endpoint)")
        try:
            hw = HardwareConfig.model_validate(
                {"gpu": gpu, "gpu_count": count,
                 **{k: v for k, v in layout.items() if v is not None}},
                context={"catalog": cat})
        except ValidationError as exc:
            msg = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
            flags = " ".join(f"{n(k)} {getattr(self, k)}" for k in ("gpu_count", *layout_keys)
                             if getattr(self, k) is not None)
            raise InputError(f"{flags}: {msg}") from None
        return hw.name

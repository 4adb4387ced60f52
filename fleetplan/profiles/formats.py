"""The registry of ingest formats, and what every format's reader shares.

An ingest format (:class:`IngestFormat`) is a name, a ``detect`` test on a parsed JSON object and
a ``parse`` that turns the object into store records; the decorator :func:`ingest_format` on the
parse function registers one (:func:`register_format` a record made by hand; duplicates refused,
:mod:`fleetplan.registry.base`). The built-in formats are this registry's
providers, imported on its first read: ``vllm`` (:mod:`fleetplan.profiles.ingest`, which also
reads the files) and ``guidellm`` (:mod:`fleetplan.profiles.guidellm`), tried in that order.

Shared by the readers: :class:`IngestOptions` (facts a file may lack, given by the user),
:class:`SourceRef` (file, line, digest of a record), :class:`RecordError` and
:func:`record_error` (one refused record, one line naming file, line and field),
:func:`resolve_gpu`, :func:`check_model` and :func:`record_digest`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleetplan.catalog.catalog import Catalog, bundled_catalog
from fleetplan.errors import InputError, UnknownNameError
from fleetplan.profiles.server import ServerDescription
from fleetplan.profiles.vllm import short
from fleetplan.registry.base import Registry, describe

__all__ = [
    "FORMATS", "IngestFormat", "IngestOptions", "RecordError", "SourceRef", "check_model",
    "formats", "get_format", "ingest_format", "record_digest", "record_error", "register_format",
    "resolve_gpu", "server_fields",
]


@dataclass(frozen=True)
class IngestOptions:
    """Facts a result file may lack, given by the user (CLI flags)."""

    gpu: str | None = None
    gpu_count: int | None = None
    engine_version: str | None = None
    dataset: str | None = None
    # names of the models a record may be of, another is refused; None (the default): the
    # models of ``catalog``, so a store never holds a run no command can model
    known_models: Collection[str] | None = None
    # resolves a GPU spelling to its catalog name; default: ``catalog``'s
    gpu_names: Callable[[str], str] | None = None
    # the catalog the records' models and GPUs are read in (bundled + user catalogs + model
    # configs, see fleetplan.context.DataContext); None: the bundled one
    catalog: Catalog | None = None
    # the user's description of the server the runs were measured on (--tp, --pp, --nodes,
    # --engine-arg, --warm-prefix-cache, and gpu, gpu_count, engine_version above when it
    # does not state them): fleetplan.profiles.server
    server: ServerDescription | None = None
    # read a server laid out as pipeline stages, data-parallel replicas or several nodes into
    # a configuration with a layout suffix (8xH100-SXM+tp4pp2): validate replays it; False
    # (ingest): refused, the store keeps one tensor-parallel group on one node per run
    layouts: bool = False

    def described(self) -> ServerDescription:
        """The server as the user described it: :attr:`server` with ``gpu``, ``gpu_count``
        and ``engine_version`` where it does not state them."""
        from dataclasses import replace

        sd = self.server if self.server is not None else ServerDescription()
        return replace(sd, gpu=sd.gpu or self.gpu, gpu_count=sd.gpu_count or self.gpu_count,
                       engine_version=sd.engine_version or self.engine_version)

    @property
    def names(self) -> Catalog:
        """The catalog the records are read in."""
        return self.catalog if self.catalog is not None else bundled_catalog()


@dataclass(frozen=True)
class SourceRef:
    path: Path
    line: int
    digest: str


ParseFn = Callable[[dict[str, Any], SourceRef, IngestOptions],
                   dict[str, Any] | list[dict[str, Any]]]
"""A format's reader: one parsed JSON object -> one store record, or several."""


@dataclass(frozen=True)
class IngestFormat:
    name: str
    detect: Callable[[dict[str, Any]], bool]
    parse: ParseFn

    def __repr__(self) -> str:  # what a refused duplicate's message names
        return f"IngestFormat({self.name!r}, read by {describe(self.parse)})"


FORMATS: Registry[IngestFormat] = Registry(
    "ingest format", providers=("fleetplan.profiles.ingest", "fleetplan.profiles.guidellm"),
    origin=lambda fmt: fmt.parse.__module__)
"""Format name -> :class:`IngestFormat`, in the order a record's format is detected."""


def register_format(fmt: IngestFormat) -> IngestFormat:
    """Add an ingest format; a duplicate name is refused."""
    return FORMATS.add(fmt.name, fmt)


def ingest_format(name: str, *, detect: Callable[[dict[str, Any]], bool]
                  ) -> Callable[[ParseFn], ParseFn]:
    """Decorator: the function it wraps reads format ``name``, the objects ``detect`` accepts
    (``@ingest_format("vllm", detect=_is_vllm)``); a duplicate name is refused."""
    def deco(parse: ParseFn) -> ParseFn:
        register_format(IngestFormat(name, detect, parse))
        return parse

    return deco


def formats() -> list[str]:
    return FORMATS.names()


def get_format(name: str) -> IngestFormat:
    return FORMATS.lookup(name)


class RecordError(InputError):
    """One record of one file was refused; the message names file, line and field."""


def record_error(src: SourceRef, field_name: str | None, msg: str) -> RecordError:
    """The refusal of the record at ``src``: ``file: line N: field F: msg``."""
    where = f"{src.path}: line {src.line}"
    return RecordError(f"{where}: field {field_name}: {msg}" if field_name else f"{where}: {msg}")


def resolve_gpu(src: SourceRef, field_name: str, raw: str, opt: IngestOptions) -> str:
    """The catalog's name of a GPU (``opt.gpu_names`` resolves it where given: a user
    catalog); an unknown GPU refuses the record alone, naming the field."""
    try:
        return (opt.gpu_names or opt.names.normalize_gpu)(raw)
    except UnknownNameError as exc:
        raise record_error(src, field_name,
                           f"{exc} (describe it in a --catalog gpus.csv)") from None


def check_model(src: SourceRef, model: str, opt: IngestOptions,
                tokenizer: str | None = None) -> str:
    """The catalog's name of a record's model (``model``: the short name its file gives, the
    last part of its hub id; a ``config.json`` folder named ``org--name`` is found by
    ``name``), or refuse the record: its runs could be stored but never predicted, calibrated
    or validated. The catalog is ``opt.known_models`` where given, else ``opt.catalog``:
    describe a model with a user catalog's ``models.csv`` or its ``config.json``
    (``--model-config``, ``DataContext.build(model_configs=...)``) to accept its runs.

    ``tokenizer``: the short name of the tokenizer the client counted tokens with (vLLM's
    ``tokenizer_id``: the checkpoint's hub id or folder). A server started with
    ``--served-model-name bench`` records ``bench`` as its model; the tokenizer then names the
    checkpoint, and the record takes it where the model's own name is unknown. Callers pass it
    for such a bare name only: a hub id or a folder names its checkpoint itself."""
    names = [model] + ([tokenizer] if tokenizer and tokenizer != model else [])
    for name in names:
        if opt.known_models is not None:
            if name in opt.known_models:
                return name
            continue
        try:
            return opt.names.model(name).model
        except UnknownNameError:
            pass
        except InputError as exc:  # the bundled library's config.json of it is not modelled
            raise record_error(src, "model_id", f"model {short(name)}: {exc}") from None
    also = f" (tokenizer {short(tokenizer)})" if len(names) > 1 else ""
    raise record_error(src, "model_id", f"unknown model {short(model)}{also}: not in the model "
                       "catalog nor the bundled library of config.json (data/model_configs) "
                       "(add it with --model-config, a folder named after the model, or a "
                       "--catalog models.csv)")


def record_digest(obj: Any) -> str:
    """A short SHA-256 of the canonical JSON of ``obj`` (names a record by its content)."""
    canon = json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(canon.encode()).hexdigest()[:16]


def server_fields(src: SourceRef, opt: IngestOptions,
                  record: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The store fields of the server's engine settings (``engine_args``: the user's, and the
    keys of :data:`~fleetplan.profiles.server.ENGINE_ARGS` that ``record`` states at its top
    level, as ``vllm bench serve --metadata max_num_seqs=512`` writes them; a contradiction
    refuses the record, naming both) and the prefix-cache state the run started in (a run
    read with a description is cold unless the user says warm)."""
    from fleetplan.profiles.server import ENGINE_ARGS

    sd = opt.described()
    where = f"{src.path}: line {src.line}: "
    sd.check_modelled(where=where) if opt.layouts else sd.check_storable(where=where)
    args = dict(sd.engine_args)
    for key, arg in ENGINE_ARGS.items():
        raw = (record or {}).get(key)
        if raw is None:
            continue
        try:
            value = arg.parse(str(raw).lower() if isinstance(raw, bool) else str(raw))
        except ValueError as exc:
            raise record_error(src, key, f"{short(str(raw), 40)} {exc}") from None
        if key in args and args[key] != value:
            raise InputError(f"{where}{sd.name('engine_args')} {key}={args[key]} contradicts "
                             f"the file's {key} {str(raw)[:40]}")
        args[key] = value
    try:
        ServerDescription(engine_args=args)  # settings vLLM refuses together
    except InputError as exc:
        raise InputError(f"{where}{exc}") from None
    out: dict[str, Any] = {}
    if args:
        out["engine_args"] = " ".join(
            f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in args.items())
    if opt.server is not None or args:
        out["prefix_cache"] = "warm" if sd.warm() else "cold"
    return out

"""Hardware configurations: ``<count>x<GPU>`` (e.g. ``2xRTX-4090``), one server's GPUs.

Main entry: :meth:`HardwareConfig.parse` (the GPU spelled canonically by the catalog it is given,
whose spec of the GPU the configuration keeps: :attr:`HardwareConfig.spec`).

The name is a key of calibration files, caches and plans, so a server that is one
tensor-parallel group over all its GPUs (every server before pipeline and data parallel were
modelled) keeps the plain ``<count>x<GPU>``, byte for byte. A server laid out otherwise adds
one suffix after ``+``: ``tp<T>`` always, then ``pp<P>`` (pipeline stages), ``dp<D>``
(replicas behind one endpoint) and ``n<N>`` (nodes) where they are not 1, then
``+<interconnect>`` where the link between nodes is stated (a row of ``interconnects.csv``;
unstated: :data:`DEFAULT_INTER_NODE`). On one node, a ``+<link>`` names instead the link between
the GPUs (``gpu_link``, an ``intra-node`` row: its bandwidth, latency and whether the GPUs reach
each other peer to peer; unstated: the GPU row's own ``interconnect_gb_s``, as before).
``8xH100-SXM+tp4pp2`` is two stages of four GPUs; ``4xRTX-3090+tp1dp4`` four one-GPU replicas;
``16xH100-SXM+tp8pp2n2+IB-NDR-400`` two nodes over InfiniBand NDR;
``4xRTX-3090+tp4+PCIe-3.0-x16-noP2P`` one group of four over PCIe 3.0 without peer to peer.
The count is every GPU of the server: ``gpu_count = tp x pp x dp``. ``+`` is outside the
GPU-name grammar and the pool-name separators (:mod:`fleetplan.catalog._names`), so such a name
reads back unambiguously.
"""

from __future__ import annotations

import re
from typing import Protocol

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from fleetplan.catalog.gpus import GPUSpec
from fleetplan.catalog.interconnects import Interconnect
from fleetplan.errors import InputError

_CONFIG_RE = re.compile(r"^\s*(\d+)\s*[xX×]\s*(.+?)\s*$")
_LAYOUT_RE = re.compile(r"^(?P<base>.+?)\+tp(?P<tp>\d+)(?:pp(?P<pp>\d+))?(?:dp(?P<dp>\d+))?"
                        r"(?:n(?P<nodes>\d+))?(?:\+(?P<link>[A-Za-z0-9][A-Za-z0-9._-]*))?\s*$")
_MAX_GPUS = 64  # GPUs one server may span
# The link between nodes when a multi-node server names none: a named assumption (100 GbE,
# the plainest datacentre network; docs/replica-model.md "Pipeline and data parallel").
DEFAULT_INTER_NODE = "Ethernet-100G"


class GpuNames(Protocol):
    """What a configuration needs of a catalog (:class:`fleetplan.catalog.catalog.Catalog`): a
    GPU's canonical name and its spec."""

    def normalize_gpu(self, name: str, *, where: str = "") -> str: ...

    def gpu(self, name: str) -> GPUSpec: ...


# what a link named in the wrong place is told, by the scope the place wants
_WRONG_SCOPE = {
    "inter-node": "is a link inside one node ({scope}); name the network between the nodes, "
                  "e.g. IB-NDR-400 or Ethernet-100G",
    "intra-node": "names the link between nodes; this server is one node: name the link "
                  "between its GPUs, e.g. NVLink-4 or PCIe-4.0-x16-noP2P",
}


def _stated_link(catalog: object, name: str, scope: str) -> Interconnect:
    """The interconnect ``name`` spells in ``catalog``'s interconnects (the bundled ones where
    the catalog has no such table), which must be of ``scope``: ``inter-node`` (the network
    between nodes) or ``intra-node`` (the link between one node's GPUs)."""
    lookup = getattr(catalog, "interconnect", None)
    if lookup is None:
        from fleetplan.catalog.catalog import bundled_catalog

        lookup = bundled_catalog().interconnect
    link: Interconnect = lookup(name)
    if link.scope != scope:
        raise ValueError(f"interconnect(={name}) "
                         + _WRONG_SCOPE[scope].format(scope=link.scope))
    return link


def server_kind(gpu: str, gpu_count: int) -> str:
    """``"<GPU type>, one GPU"`` or ``"<GPU type>, tensor-parallel"``: the groups whose model
    errors differ (the tensor-parallel RTX 4090 first-token delays, docs/replica-model.md), and
    the finest key of a spec path (``fleetplan.replica.params.spec_path``)."""
    return f"{gpu}, {'tensor-parallel' if gpu_count > 1 else 'one GPU'}"


def _names(catalog: GpuNames | None) -> GpuNames:
    if catalog is not None:
        return catalog
    from fleetplan.catalog.catalog import bundled_catalog

    return bundled_catalog()


class HardwareConfig(BaseModel):
    """The GPUs one server runs on: ``gpu_count`` GPUs as ``dp`` replicas of ``pp_size``
    pipeline stages of ``tp_size`` tensor-parallel GPUs, over ``nodes`` nodes joined by
    ``interconnect`` (None: :data:`DEFAULT_INTER_NODE` where there are several nodes), the GPUs
    of one node joined by ``gpu_link`` (None: the GPU row's own link figures).
    ``tp_size`` defaults to ``gpu_count / (pp_size x dp)`` (one group over all GPUs: the
    study's setup); ``gpu_count = tp_size x pp_size x dp`` is required."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu: str = Field(min_length=1)
    gpu_count: int = Field(ge=1, le=_MAX_GPUS)
    tp_size: int | None = Field(default=None, ge=1, le=_MAX_GPUS)
    pp_size: int = Field(default=1, ge=1, le=_MAX_GPUS)
    dp: int = Field(default=1, ge=1, le=_MAX_GPUS)
    nodes: int = Field(default=1, ge=1, le=_MAX_GPUS)
    interconnect: str | None = Field(default=None, min_length=1)
    gpu_link: str | None = Field(default=None, min_length=1)
    _spec: GPUSpec = PrivateAttr()
    _link: Interconnect | None = PrivateAttr(default=None)
    _gpu_link: Interconnect | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> HardwareConfig:
        # the catalog that spells the GPU comes with the validation (parse passes it); the
        # configuration keeps that catalog's spec, so what reads it needs no catalog again
        names = _names((info.context or {}).get("catalog"))
        object.__setattr__(self, "gpu", names.normalize_gpu(self.gpu))
        self._spec = names.gpu(self.gpu)
        groups = self.pp_size * self.dp
        if self.tp_size is None:
            if self.gpu_count % groups:
                raise ValueError(f"pp_size(={self.pp_size}) x dp(={self.dp}) must divide "
                                 f"gpu_count(={self.gpu_count})")
            object.__setattr__(self, "tp_size", self.gpu_count // groups)
        assert self.tp_size is not None
        if self.tp_size * groups != self.gpu_count:
            raise ValueError(f"gpu_count(={self.gpu_count}) must equal tp_size(={self.tp_size})"
                             f" x pp_size(={self.pp_size}) x dp(={self.dp})")
        if self.nodes > 1:
            per_node, replica = self.gpu_count // self.nodes, self.tp_size * self.pp_size
            if self.gpu_count % self.nodes or (per_node % self.tp_size
                                               and self.tp_size % per_node) or (
                    per_node % replica and replica % per_node):
                raise ValueError(f"nodes(={self.nodes}): {self.gpu_count} GPUs as {self.dp} "
                                 f"replica(s) of {self.pp_size} stage(s) of {self.tp_size} "
                                 "do not lie evenly on the nodes (GPUs per node must divide or "
                                 "be a multiple of the tensor-parallel group and the replica)")
        if self.interconnect is not None and self.nodes == 1:
            raise ValueError(f"interconnect(={self.interconnect}) names the link between "
                             "nodes; this server is one node")
        if self.nodes > 1:
            self._link = _stated_link(names, self.interconnect or DEFAULT_INTER_NODE, "inter-node")
            if self.interconnect is not None:
                object.__setattr__(self, "interconnect", self._link.name)
        if self.gpu_link is not None:
            if self.nodes > 1:
                raise ValueError(f"gpu_link(={self.gpu_link}) is stated for a server on one "
                                 "node only")
            self._gpu_link = _stated_link(names, self.gpu_link, "intra-node")
            object.__setattr__(self, "gpu_link", self._gpu_link.name)
        return self

    @property
    def layout(self) -> str:
        """The suffix after ``+`` (empty for one tensor-parallel group on one node)."""
        if self.pp_size == 1 and self.dp == 1 and self.nodes == 1 and self.gpu_link is None:
            return ""
        out = f"tp{self.tp_size}"
        out += f"pp{self.pp_size}" if self.pp_size > 1 else ""
        out += f"dp{self.dp}" if self.dp > 1 else ""
        out += f"n{self.nodes}" if self.nodes > 1 else ""
        link = self.interconnect or self.gpu_link
        return out + (f"+{link}" if link else "")

    @property
    def name(self) -> str:
        """Canonical name, e.g. ``2xRTX-4090`` (``8xH100-SXM+tp4pp2`` for another layout)."""
        layout = self.layout
        return f"{self.gpu_count}x{self.gpu}" + (f"+{layout}" if layout else "")

    @property
    def link(self) -> Interconnect | None:
        """The network between the nodes (None on one node): ``interconnect``'s row, else
        :data:`DEFAULT_INTER_NODE`'s."""
        return self._link

    @property
    def stated_gpu_link(self) -> Interconnect | None:
        """The link between the GPUs of this one-node server where the configuration states one
        (``gpu_link``'s row); None: the GPU row's own link figures stand."""
        return self._gpu_link

    @property
    def gpus_per_node(self) -> int:
        return self.gpu_count // self.nodes

    @property
    def engines(self) -> int:
        """The engines a load is spread over: ``dp`` replicas x ``pp_size`` micro-batches in
        flight (docs/replica-model.md "Pipeline and data parallel")."""
        return self.dp * self.pp_size

    @property
    def spec(self) -> GPUSpec:
        """The GPU's spec, from the catalog the configuration was parsed with."""
        return self._spec

    @staticmethod
    def split(text: str) -> tuple[int, str]:
        """``(gpu_count, gpu)`` of ``<count>x<GPU>`` as written (a layout suffix left out), no
        catalog read: for names already canonical (a plan's, a calibration's, a fitted
        record's)."""
        lay = _LAYOUT_RE.match(text)
        m = _CONFIG_RE.match(lay.group("base") if lay else text)
        if not m:
            raise InputError(
                f"configuration {text!r} is not of the form <count>x<GPU>, e.g. 2xRTX-4090"
            )
        return int(m.group(1)), m.group(2)

    @staticmethod
    def split_layout(text: str) -> dict[str, int | str]:
        """The layout a name states (``tp_size``, ``pp_size``, ``dp``, ``nodes``,
        ``interconnect``, or on one node ``gpu_link``; empty for a plain ``<count>x<GPU>``), no
        catalog read."""
        lay = _LAYOUT_RE.match(text)
        if lay is None:
            return {}
        out: dict[str, int | str] = {"tp_size": int(lay.group("tp"))}
        for key, group in (("pp_size", "pp"), ("dp", "dp"), ("nodes", "nodes")):
            if lay.group(group) is not None:
                out[key] = int(lay.group(group))
        if lay.group("link"):
            # several nodes: the network between them; one node: the link between its GPUs
            one_node = int(lay.group("nodes") or 1) == 1
            out["gpu_link" if one_node else "interconnect"] = lay.group("link")
        return out

    @classmethod
    def parse(cls, text: str, catalog: GpuNames | None = None) -> HardwareConfig:
        """Parse ``2xRTX-4090`` (any spelling of a GPU of ``catalog`` after the ``x``; default:
        the bundled catalog), or one with a layout suffix (``8xH100-SXM+tp4pp2``)."""
        count, gpu = cls.split(text)
        if not 1 <= count <= _MAX_GPUS:
            raise InputError(f"configuration {text!r}: the GPU count {count} must be within "
                             f"1..{_MAX_GPUS}")
        if "+" in text and not _LAYOUT_RE.match(text):
            raise InputError(f"configuration {text!r}: after '+' expected a layout such as "
                             "tp4pp2, tp1dp4, tp4+PCIe-4.0-x16-noP2P or tp8pp2n2+IB-NDR-400")
        fields = {"gpu": gpu, "gpu_count": count, **cls.split_layout(text)}
        try:
            return cls.model_validate(fields, context={"catalog": _names(catalog)})
        except ValidationError as exc:
            if not cls.split_layout(text):
                raise
            msg = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
            raise InputError(f"configuration {text!r}: {msg}") from None

    def __str__(self) -> str:
        return self.name


def config_name(gpu: str, gpu_count: int, catalog: GpuNames | None = None) -> str:
    """Canonical configuration name for a GPU spelling (of ``catalog``, default: the bundled
    one) and a count."""
    return f"{int(gpu_count)}x{_names(catalog).normalize_gpu(gpu)}"

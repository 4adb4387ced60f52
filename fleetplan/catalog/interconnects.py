"""Links between GPUs: the catalog of interconnects (``interconnects.csv``).

A multi-node server's nodes talk over a network (InfiniBand, RoCE, plain Ethernet), and what a
tensor-parallel all-reduce or a pipeline stage's hand-over costs there is the link's bandwidth
and latency. Each row: ``name`` (as a configuration names it, ``16xH100-SXM+tp8pp2n2+IB-NDR-400``),
``scope`` (``intra-node``: a link inside one server, NVLink or PCIe; ``inter-node``: a network),
``bandwidth_gb_s`` (GB/s per direction), ``latency_us`` (one small transfer), ``aliases``
(other spellings, ``;``-separated) and where each figure comes from (``bandwidth_source``: a
datasheet or standard; ``latency_source``: named as an assumption where no datasheet states
it), and, for a link inside one server, ``peer_to_peer`` (how its GPUs reach each other: ``all``,
every GPU directly, NVSwitch or an xGMI mesh; ``pcie``, peer to peer over the PCIe tree;
``none``, only through host memory, as on GeForce cards or with ``NCCL_P2P_DISABLE=1``; what
vLLM's all-reduce path depends on, :func:`fleetplan.replica.priors.allreduce_path`). A user's
catalog folder may add rows or replace one of the same name
(:class:`fleetplan.catalog.catalog.Catalog`).

Main entries: :class:`Interconnect`, :func:`read_interconnects`; lookups through
:meth:`Catalog.interconnect`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from fleetplan.catalog._names import check_name
from fleetplan.catalog._rows import validate_row
from fleetplan.catalog._tables import read_checked_csv, row_line
from fleetplan.errors import UnknownNameError

Scope = Literal["intra-node", "inter-node"]
PeerToPeer = Literal["all", "pcie", "none"]


class Interconnect(BaseModel):
    """One link: per-direction bandwidth (GB/s) and small-transfer latency (us), each with
    its source."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    scope: Scope
    bandwidth_gb_s: float = Field(ge=0.01, le=100_000, description="GB/s per direction")
    latency_us: float = Field(ge=0, le=100_000)
    aliases: tuple[str, ...] = ()
    bandwidth_source: str = Field(min_length=1)
    latency_source: str = Field(min_length=1)
    # how the GPUs of one server reach each other over this link (a row that leaves it out:
    # peer to peer over PCIe, what a data-centre PCIe server has)
    peer_to_peer: PeerToPeer = "pcie"

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        # a configuration name carries it after '+': the GPU-name grammar keeps it readable
        try:
            return check_name("GPU", v)
        except ValueError as exc:
            raise ValueError(str(exc).replace("a GPU name", "an interconnect name")) from None

    @property
    def bandwidth_b_s(self) -> float:
        return self.bandwidth_gb_s * 1e9

    @property
    def latency_s(self) -> float:
        return self.latency_us * 1e-6

    def describe(self) -> str:
        return (f"{self.name} ({self.bandwidth_gb_s:g} GB/s per direction, {self.latency_us:g} "
                f"us: {self.bandwidth_source}; {self.latency_source})")


def link_key(name: str) -> str:
    """The spelling-blind key of a link name: case, spaces, dots, dashes and underscores
    ignored (``PCIe-4.0 x16`` and ``pcie40-x16`` are one link)."""
    return re.sub(r"[\s._-]+", "", name).lower()


def read_interconnects(path: str | os.PathLike[str]) -> dict[str, Interconnect]:
    """The rows of one ``interconnects.csv`` by name (a user's may leave out ``aliases`` and
    the sources: none, and the file's name)."""
    df = read_checked_csv(path, required=["name", "scope", "bandwidth_gb_s", "latency_us"],
                          numeric=["bandwidth_gb_s", "latency_us"], positive=["bandwidth_gb_s"],
                          unique=["name"])
    out: dict[str, Interconnect] = {}
    for i, r in enumerate(df.to_dict("records")):
        def text(key: str, default: str, r: dict = r) -> str:
            v = r.get(key)
            return str(v).strip() if isinstance(v, str) and v.strip() else default

        aliases = tuple(a.strip() for a in text("aliases", "").split(";") if a.strip())
        row = {"name": str(r["name"]).strip(), "scope": str(r["scope"]).strip(),
               "bandwidth_gb_s": r["bandwidth_gb_s"], "latency_us": r["latency_us"],
               "aliases": aliases,
               "bandwidth_source": text("bandwidth_source", f"user catalog {path}"),
               "latency_source": text("latency_source", f"user catalog {path}"),
               "peer_to_peer": text("peer_to_peer", "pcie")}
        link = validate_row(Interconnect, row, Path(path), row_line(df, i))
        out[link.name] = link
    return out


def find_link(name: str, links: Mapping[str, Interconnect]) -> Interconnect:
    """The link ``name`` spells (its name or an alias, :func:`link_key`); else an
    :class:`UnknownNameError` listing the catalog's names."""
    key = link_key(name)
    for link in links.values():
        if link_key(link.name) == key:
            return link
    for link in links.values():
        if any(link_key(a) == key for a in link.aliases):
            return link
    raise UnknownNameError("interconnect", name, links)

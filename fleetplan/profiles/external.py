"""Measured serving runs published by others (``data/external/*.csv``), as typed records.

The fixtures are compact, attributed, derived summaries of public benchmarks (built by
``scripts/build_external_data.py``; sources and licences in ``data/external/README.md``): one
row per measured operating point, a server x a load, with the outcome. They are evidence for
fitting and judging the replica model beyond the study; nothing that plans reads them.

Main entries: :class:`ExternalRun` (one row; an empty cell is ``None``: the source did not state
it) and :func:`load_external_runs` (every fixture, or the files given), which refuses a bad row
alone with one line naming file, row (the CSV line), column and value, and keeps the others.
"""

from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from fleetplan._input import read_text_bounded
from fleetplan.catalog._rows import validate_row
from fleetplan.catalog._tables import MAX_TABLE_BYTES, data_dir, data_lines
from fleetplan.errors import DataError, InputError

LoadKind = Literal["concurrency", "poisson", "burst"]
PrefixCache = Literal["cold", "warm", "unknown"]

_PosInt = Field(default=None, ge=1)
_NonNeg = Field(default=None, ge=0)


class ExternalRun(BaseModel):
    """One measured operating point of a public benchmark (a server under one load).

    Latencies are milliseconds, rates per second, token counts per request. ``None`` means the
    source does not state the figure (never estimated here)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # attribution: every row says where it comes from
    source: str = Field(min_length=1, description="slug of the source (data/external/README.md)")
    source_file: str = Field(min_length=1, description="path inside the source repository")
    commit: str = Field(pattern=r"^[0-9a-f]{7,40}$", description="source commit read")
    run_id: str = Field(min_length=1)
    date: str | None = None
    # the server
    model: str | None = Field(default=None, description="Hugging Face id of the checkpoint")
    model_raw: str | None = None
    gpu: str = Field(min_length=1, description="catalog name where the catalog has the GPU")
    gpu_raw: str | None = None
    gpu_count: int = Field(ge=1)
    tp: int | None = _PosInt
    pp: int | None = _PosInt
    dp: int | None = _PosInt
    nodes: int | None = _PosInt
    interconnect: str | None = None
    power_limit_w: float | None = Field(default=None, gt=0)
    engine: str = Field(min_length=1)
    engine_version: str | None = None
    dtype: str | None = None
    quant: str | None = None
    kv_cache_dtype: str | None = None
    max_num_seqs: int | None = _PosInt
    max_num_batched_tokens: int | None = _PosInt
    max_model_len: int | None = _PosInt
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    engine_args: str | None = None
    # the load
    load_kind: LoadKind
    load_value: float | None = Field(default=None, gt=0,
                                     description="in-flight requests, or req/s for poisson")
    num_prompts: int | None = _PosInt
    dataset: str | None = None
    input_tokens_mean: float | None = _NonNeg
    input_tokens_min: int | None = _NonNeg
    input_tokens_max: int | None = _NonNeg
    output_tokens_mean: float | None = _NonNeg
    output_tokens_min: int | None = _NonNeg
    output_tokens_max: int | None = _NonNeg
    output_tokens_requested: int | None = _PosInt
    prefix_cache: PrefixCache = "unknown"
    prefix_hit_rate: float | None = Field(default=None, ge=0, le=1)
    # the outcome
    completed_rps: float | None = _NonNeg
    output_tok_s: float | None = _NonNeg
    total_tok_s: float | None = _NonNeg
    ttft_mean_ms: float | None = _NonNeg
    ttft_p50_ms: float | None = _NonNeg
    ttft_p99_ms: float | None = _NonNeg
    tpot_mean_ms: float | None = _NonNeg
    tpot_p50_ms: float | None = _NonNeg
    tpot_p99_ms: float | None = _NonNeg
    itl_mean_ms: float | None = _NonNeg
    itl_p50_ms: float | None = _NonNeg
    itl_p99_ms: float | None = _NonNeg
    e2e_mean_ms: float | None = _NonNeg
    e2e_p50_ms: float | None = _NonNeg
    e2e_p99_ms: float | None = _NonNeg
    duration_s: float | None = _NonNeg
    metric_note: str | None = None

    @field_validator("*", mode="before")
    @classmethod
    def _empty_is_unstated(cls, v: object, info: ValidationInfo) -> object:
        # a CSV cell left empty means "the source does not say"
        if isinstance(v, str) and not v.strip():
            return "unknown" if info.field_name == "prefix_cache" else None
        return v

    @model_validator(mode="after")
    def _consistent(self) -> ExternalRun:
        parallel = (self.tp or 1) * (self.pp or 1)
        if parallel > self.gpu_count:
            raise ValueError(f"gpu_count: {self.gpu_count} GPUs cannot hold tp x pp = "
                             f"{parallel}")
        if self.load_kind != "burst" and self.load_value is None:
            raise ValueError(f"load_value: a {self.load_kind} load needs its value")
        if self.load_kind == "concurrency" and self.load_value is not None \
                and self.load_value != int(self.load_value):
            raise ValueError(f"load_value: {self.load_value:g} requests in flight is not a "
                             "whole number")
        for lo, mid, hi in (("input_tokens_min", "input_tokens_mean", "input_tokens_max"),
                            ("output_tokens_min", "output_tokens_mean", "output_tokens_max")):
            a, m, b = getattr(self, lo), getattr(self, mid), getattr(self, hi)
            if a is not None and b is not None and a > b:
                raise ValueError(f"{lo}: {a} is above {hi} {b}")
            if m is not None and ((a is not None and m < a) or (b is not None and m > b)):
                raise ValueError(f"{mid}: {m:g} lies outside [{a}, {b}]")
        for metric in ("ttft", "tpot", "itl", "e2e"):
            p50, p99 = getattr(self, f"{metric}_p50_ms"), getattr(self, f"{metric}_p99_ms")
            if p50 is not None and p99 is not None and p50 > p99 * (1 + 1e-9):
                raise ValueError(f"{metric}_p50_ms: {p50:g} is above {metric}_p99_ms {p99:g}")
        return self

    @property
    def config(self) -> str:
        """fleetplan's name of the server's configuration, ``<count>x<GPU>``."""
        return f"{self.gpu_count}x{self.gpu}"

    @property
    def input_tokens(self) -> float | None:
        return self.input_tokens_mean

    @property
    def output_tokens(self) -> float | None:
        """Mean output tokens per request: as recorded, else the requested ``max_tokens``."""
        if self.output_tokens_mean is not None:
            return self.output_tokens_mean
        return None if self.output_tokens_requested is None else float(
            self.output_tokens_requested)


COLUMNS: tuple[str, ...] = tuple(ExternalRun.model_fields)
REQUIRED: tuple[str, ...] = tuple(k for k, f in ExternalRun.model_fields.items()
                                  if f.is_required())


@dataclass(frozen=True)
class ExternalLoad:
    """What :func:`load_external_runs` read: the good rows and one line per refused row/file."""

    runs: tuple[ExternalRun, ...]
    errors: tuple[str, ...] = field(default=())

    def by_source(self) -> dict[str, list[ExternalRun]]:
        out: dict[str, list[ExternalRun]] = {}
        for r in self.runs:
            out.setdefault(r.source, []).append(r)
        return out


def external_dir() -> Path:
    """The folder of the bundled external fixtures (``data/external``)."""
    return data_dir() / "external"


def read_external_csv(path: str | os.PathLike[str]) -> ExternalLoad:
    """The rows of one fixture. A file that cannot be read, or whose header misses a required
    column or names an unknown one, is one error and no rows; a bad row is one error alone."""
    p = Path(path)
    try:
        text = read_text_bounded(p, what="external benchmark table", max_bytes=MAX_TABLE_BYTES)
    except InputError as exc:
        return ExternalLoad((), (str(exc),))
    reader = csv.DictReader(io.StringIO(text))
    header = list(reader.fieldnames or [])
    missing = [c for c in REQUIRED if c not in header]
    unknown = [c for c in header if c not in COLUMNS]
    if missing or unknown:
        why = (f"missing required column(s) {', '.join(missing)}" if missing
               else f"unknown column(s) {', '.join(unknown)}")
        return ExternalLoad((), (f"{p}: {why}",))
    runs: list[ExternalRun] = []
    errors: list[str] = []
    try:
        # the file line each row starts on (DictReader skips blank lines as data_lines does)
        for line, row in zip(data_lines(text), reader, strict=False):
            if None in row:  # more cells than header columns
                errors.append(f"{p}: row {line}: {len(header) + len(row[None])} "
                              f"cells for {len(header)} columns")
                continue
            try:
                runs.append(validate_row(ExternalRun, dict(row), p, line))
            except DataError as exc:
                errors.append(str(exc))
    except csv.Error as exc:
        errors.append(f"{p}: not a readable CSV table ({exc})")
    return ExternalLoad(tuple(runs), tuple(errors))


def load_external_runs(*paths: str | os.PathLike[str]) -> ExternalLoad:
    """Every row of ``paths`` (default: every ``*.csv`` of :func:`external_dir`, by name)."""
    files = [Path(p) for p in paths] or sorted(external_dir().glob("*.csv"))
    runs: list[ExternalRun] = []
    errors: list[str] = []
    for f in files:
        got = read_external_csv(f)
        runs.extend(got.runs)
        errors.extend(got.errors)
    return ExternalLoad(tuple(runs), tuple(errors))

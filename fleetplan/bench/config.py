"""The settings of one ``bench`` run and its send schedule.

Main entries: :class:`BenchConfig` (strict, bounded settings: a bad value is refused when the
config is built, naming it) and :func:`send_schedule` (the seeded send offsets of a run, as
``vllm bench serve`` draws them; a schedule longer than :data:`MAX_SCHEDULE_S` is refused).
"""

from __future__ import annotations

import math
from typing import Literal
from urllib.parse import urlsplit

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from fleetplan.errors import InputError
from fleetplan.workload.arrivals import benchmark_arrivals

MAX_SCHEDULE_S = 7 * 86400.0  # a send schedule longer than a week is refused (a typo's rate)


class BenchConfig(BaseModel):
    """Settings of one benchmark run (one rate)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    endpoint: str = Field(min_length=1, description="server base URL, or the full API URL")
    model: str = Field(min_length=1)
    api: Literal["completions", "chat"] = "completions"
    rate: float = Field(default=math.inf, gt=0, description="requests/s; inf sends all at once")
    num_prompts: int = Field(default=200, ge=1, le=1_000_000)
    burstiness: float = Field(default=1.0, gt=0, le=100, allow_inf_nan=False)
    max_concurrency: int | None = Field(default=None, ge=1, le=1_000_000)
    seed: int = Field(default=0, ge=0, le=2**32 - 1)
    arrival_schedule: Literal["first-at-zero", "normalized"] = "first-at-zero"
    request_timeout_s: float = Field(default=600.0, gt=0, allow_inf_nan=False)
    deadline_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    ignore_eos: bool = False
    test_request: bool = True
    power: Literal["nvml", "none"] = "nvml"
    power_gpus: tuple[int, ...] | None = None
    gpu: str | None = None
    gpu_count: int | None = Field(default=None, ge=1, le=1_000_000)
    # what the user states about the server (ServerDescription checked them), written into
    # the result in the form ingest reads; None / empty: not stated, not written
    tp: int | None = Field(default=None, ge=1, le=64)
    pp: int | None = Field(default=None, ge=1, le=64)
    dp: int | None = Field(default=None, ge=1, le=1024)
    nodes: int | None = Field(default=None, ge=1, le=1024)
    engine_version: str | None = Field(default=None, min_length=1, max_length=64)
    engine_args: dict[str, int | float | bool | str] = Field(default_factory=dict)
    dataset_name: str | None = None
    label: str | None = None
    api_key: str | None = Field(default=None, repr=False)

    @field_validator("endpoint")
    @classmethod
    def _url(cls, v: str) -> str:
        shown = repr(v[:80] + ("..." if len(v) > 80 else ""))
        try:
            parts = urlsplit(v)
            ok = parts.scheme in ("http", "https") and bool(parts.hostname)
            _ = parts.port  # raises for a port out of range or not a number
            (parts.hostname or "").encode("idna")  # raises for an empty or too long label
        except (ValueError, UnicodeError):
            ok = False
        if not ok or not v.isprintable() or any(c.isspace() for c in v):
            raise ValueError(f"endpoint(={shown}) must be an http(s) URL, e.g. "
                             "http://127.0.0.1:8000")
        return v

    @model_validator(mode="after")
    def _schedule(self) -> BenchConfig:
        span = self.num_prompts / self.rate
        if span > MAX_SCHEDULE_S:
            raise ValueError(f"rate(={self.rate:g}) with num_prompts(={self.num_prompts}): the "
                             f"send schedule would last about {span:.3g} s, more than "
                             f"{MAX_SCHEDULE_S:g} s (7 days)")
        return self

    @property
    def url(self) -> str:
        """The API URL: the endpoint if it names one, else ``<base>/v1/(chat/)completions``."""
        base = self.endpoint.rstrip("/")
        if base.endswith("/completions"):
            return base
        suffix = "/completions" if self.api == "completions" else "/chat/completions"
        return base + suffix if base.endswith("/v1") else base + "/v1" + suffix

    @property
    def base_url(self) -> str:
        p = urlsplit(self.endpoint)
        return f"{p.scheme}://{p.netloc}"


def send_schedule(cfg: BenchConfig) -> np.ndarray:
    """Send offsets (s from the run's start) of the ``num_prompts`` requests.

    vLLM seeds numpy's legacy global generator with ``--seed`` and draws its gamma gaps from it;
    a private ``RandomState(seed)`` gives the same stream without touching global state, so
    ``fleetplan bench --seed S`` sends at the times ``vllm bench serve --seed S`` sends (with the
    same schedule; vLLM's dataset sampling must not draw from numpy first, which holds for its
    ShareGPT, custom and random-file datasets).
    """
    n = cfg.num_prompts
    if math.isinf(cfg.rate):
        return np.zeros(n)
    legacy = np.random.RandomState(cfg.seed)
    if cfg.arrival_schedule == "first-at-zero":
        t = benchmark_arrivals(n, cfg.rate, cfg.burstiness, legacy)  # type: ignore[arg-type]
    else:
        t = np.cumsum(legacy.gamma(cfg.burstiness, 1.0 / (cfg.rate * cfg.burstiness), size=n))
        t = t * (n / cfg.rate) / t[-1] if t[-1] > 0 else t
    if not np.all(np.isfinite(t)) or t[-1] > MAX_SCHEDULE_S:
        raise InputError(f"rate(={cfg.rate:g}), burstiness(={cfg.burstiness:g}), num_prompts"
                         f"(={n}): the send schedule would last {float(t[-1]):.3g} s, more "
                         f"than {MAX_SCHEDULE_S:g} s (7 days)")
    return t

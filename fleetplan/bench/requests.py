"""The requests a benchmark sends: prompts and output budgets, from a file or synthesised.

Main entries: :func:`load_dataset` (JSONL or CSV of prompts, or a ShareGPT-style JSON) and
:func:`synthetic_requests` (prompts of word counts drawn from a
:class:`~fleetplan.workload.lengths.LengthModel`). Both take a ``numpy.random.Generator``.

Token counts: fleetplan has no tokenizer. A synthetic prompt of ``n`` tokens is ``n`` words from
a list of short common English words, each one token for the BPE tokenizers of current models
(an assumption: the server's ``usage.prompt_tokens`` is what the result records). A ShareGPT
reply's length is its word count unless ``output_len`` replaces it (vLLM's sampler counts the
reply's tokens with the model's tokenizer instead; pass ``--output-len`` to control it).
"""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import TypeAdapter, ValidationError

from fleetplan.errors import InputError
from fleetplan.workload.lengths import LengthDist, LengthModel

# Short, frequent English words: one token each in GPT-2/Llama/Qwen style BPE vocabularies.
WORDS: tuple[str, ...] = (
    "the", "of", "and", "to", "in", "is", "was", "for", "on", "are", "with", "as", "at", "be",
    "by", "this", "had", "not", "but", "from", "or", "have", "an", "they", "which", "one", "you",
    "were", "her", "all", "she", "there", "would", "their", "we", "him", "been", "has", "when",
    "who", "will", "more", "no", "if", "out", "so", "said", "what", "up", "its", "about", "into",
    "than", "them", "can", "only", "other", "new", "some", "could", "time", "these", "two", "may",
    "then", "do", "first", "any", "my", "now", "such", "like", "our", "over", "man", "me", "even",
    "most", "made", "after", "also", "did", "many", "before", "must", "through", "back", "years",
    "where", "much", "your", "way", "well", "down", "should", "because", "each", "just", "those",
    "people", "how", "too", "little", "state", "good", "very", "make", "world", "still", "own",
    "see", "men", "work", "long", "get", "here", "between", "both", "life", "being", "under",
    "never", "day", "same", "another", "know", "while", "last", "might", "us", "great", "old",
    "year", "off", "come", "since", "against", "go", "came", "right", "used", "take", "three",
)

OUTPUT_KEYS = ("output_tokens", "output_len", "max_tokens")
_LENGTH_ADAPTER: TypeAdapter[LengthDist] = TypeAdapter(LengthDist)


@dataclass(frozen=True)
class BenchRequest:
    """One request to send: the prompt text, its expected token count, the output budget."""

    prompt: str
    prompt_tokens: int | None
    max_tokens: int


def synthetic_prompt(n_tokens: int, rng: np.random.Generator) -> str:
    """``n_tokens`` words drawn from :data:`WORDS` (about one token each)."""
    idx = rng.integers(0, len(WORDS), size=n_tokens)
    return " ".join(WORDS[i] for i in idx)


def synthetic_requests(n: int, lengths: LengthModel,
                       rng: np.random.Generator) -> list[BenchRequest]:
    """``n`` requests with prompt and output lengths drawn from ``lengths``."""
    if n < 1:
        raise InputError(f"num_prompts(={n}) must be >= 1")
    ins, outs = lengths.sample(n, rng)
    return [BenchRequest(synthetic_prompt(int(a), rng), int(a), int(b))
            for a, b in zip(ins, outs, strict=True)]


_DIST_HELP = ("a token count (128), fixed:128, uniform:64-256, lognormal:mean=208,cv=1.0"
              "[,min=4,max=1023], or a JSON object such as {\"dist\": \"fixed\", \"value\": 128}")


def parse_length_dist(text: str, option: str = "length") -> LengthDist:
    """A length distribution from its command-line spelling (see ``_DIST_HELP``)."""
    raw = text.strip()
    try:
        if raw.startswith("{"):
            spec: dict[str, Any] = json.loads(raw)
        elif raw.isdigit():
            spec = {"dist": "fixed", "value": int(raw)}
        else:
            kind, sep, rest = raw.partition(":")
            if not sep:
                raise ValueError("no ':'")
            if kind == "fixed":
                spec = {"dist": "fixed", "value": int(rest)}
            elif kind == "uniform":
                lo, _, hi = rest.replace(",", "-").partition("-")
                spec = {"dist": "uniform", "low": int(lo), "high": int(hi),
                        "min": int(lo), "max": int(hi)}
            elif kind == "lognormal":
                pairs = dict(p.split("=", 1) for p in rest.split(","))
                spec = {"dist": "lognormal", **{k.strip(): float(v) if k.strip() in
                                                ("mean", "cv") else int(v)
                                                for k, v in pairs.items()}}
            else:
                raise ValueError(f"unknown kind {kind!r}")
        return _LENGTH_ADAPTER.validate_python(spec)
    except (ValueError, json.JSONDecodeError, ValidationError) as exc:
        if isinstance(exc, ValidationError):
            err = exc.errors()[0]
            msg = f"{err['loc'][-1]}: {err['msg']}" if err["loc"] else err["msg"]
        else:
            msg = str(exc)
        raise InputError(f"{option} {text!r}: {msg}; expected {_DIST_HELP}") from None


def _output_of(rec: dict[str, Any], where: str) -> int | None:
    for key in OUTPUT_KEYS:
        if key in rec and rec[key] not in (None, ""):
            raw = rec[key]
            try:
                value = int(str(raw))
            except ValueError:
                raise InputError(f"{where}: field {key}: {raw!r} is not an integer") from None
            if value < 1:
                raise InputError(f"{where}: field {key}: {raw!r} must be >= 1")
            return value
    return None


def _prompt_of(rec: dict[str, Any], where: str) -> str:
    for key in ("prompt", "text", "input"):
        if isinstance(rec.get(key), str) and rec[key].strip():
            return str(rec[key])
    raise InputError(f"{where}: no non-empty 'prompt' field")


def _sharegpt(items: list[Any], path: Path) -> list[tuple[str, int | None]]:
    out: list[tuple[str, int | None]] = []
    for i, item in enumerate(items):
        conv = item.get("conversations") if isinstance(item, dict) else None
        if not isinstance(conv, list) or len(conv) < 2:
            continue  # vLLM's sampler also skips conversations of fewer than two turns
        first, second = conv[0], conv[1]
        if not (isinstance(first, dict) and isinstance(second, dict)):
            raise InputError(f"{path}: item {i}: conversation turns must be objects")
        prompt, reply = first.get("value"), second.get("value")
        if not isinstance(prompt, str) or not isinstance(reply, str):
            raise InputError(f"{path}: item {i}: conversation turns need a string 'value'")
        if prompt.strip() and reply.strip():
            out.append((prompt, len(reply.split())))
    return out


def _read_records(path: Path) -> list[tuple[str, int | None]]:
    """(prompt, output budget or None) from a JSONL, CSV or ShareGPT-style JSON file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read dataset ({exc})") from None
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        if reader.fieldnames is None or "prompt" not in reader.fieldnames:
            raise InputError(f"{path}: CSV dataset needs a 'prompt' column")
        return [(_prompt_of(row, f"{path}: line {i + 2}"), _output_of(row, f"{path}: line {i + 2}"))
                for i, row in enumerate(reader)]
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            items = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: not valid JSON ({exc.msg})") from None
        if items and isinstance(items[0], dict) and "conversations" in items[0]:
            return _sharegpt(items, path)
        return [(_prompt_of(r, f"{path}: item {i}"), _output_of(r, f"{path}: item {i}"))
                for i, r in enumerate(items) if isinstance(r, dict)]
    out = []
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: line {i}: not valid JSON ({exc.msg})") from None
        if not isinstance(rec, dict):
            raise InputError(f"{path}: line {i}: expected a JSON object")
        out.append((_prompt_of(rec, f"{path}: line {i}"), _output_of(rec, f"{path}: line {i}")))
    return out


def load_dataset(path: str | os.PathLike[str], n: int, rng: np.random.Generator,
                 output_len: LengthDist | None = None) -> list[BenchRequest]:
    """``n`` requests from a dataset file, in a seeded random order.

    Records are drawn without replacement while the file has enough, then the file is cycled in
    a fresh random order. ``output_len`` (a length distribution) replaces the file's output
    budgets; without it, every record must carry one (``output_tokens``, ``output_len`` or
    ``max_tokens``; for ShareGPT, the reply's word count).
    """
    if n < 1:
        raise InputError(f"num_prompts(={n}) must be >= 1")
    p = Path(path)
    records = _read_records(p)
    if not records:
        raise InputError(f"{p}: dataset holds no usable prompt")
    order: list[int] = []
    while len(order) < n:
        order.extend(rng.permutation(len(records)).tolist())
    order = order[:n]
    budgets = output_len.sample(n, rng) if output_len is not None else None
    out = []
    for k, i in enumerate(order):
        prompt, out_len = records[i]
        if budgets is not None:
            out_len = int(budgets[k])
        if out_len is None:
            raise InputError(f"{p}: record {i + 1} has no output length; give --output-len")
        out.append(BenchRequest(prompt, None, out_len))
    return out

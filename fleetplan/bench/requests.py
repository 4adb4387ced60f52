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

from fleetplan._load import read_text_bounded, show_value
from fleetplan.bench.response import MAX_TOKENS
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
MAX_PROMPTS = 1_000_000  # requests per rate (BenchConfig.num_prompts's bound)
MAX_DATASET_BYTES = 2 << 30  # 2 GiB: ShareGPT_V3's 670 MB fits; /dev/zero or a FIFO never read
MAX_SYNTHETIC_WORDS = 50_000_000  # synthetic prompt words of one call (~250 MB of text)
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


def _check_n(n: int) -> None:
    if not 1 <= n <= MAX_PROMPTS:
        raise InputError(f"num_prompts(={n}) must be from 1 to {MAX_PROMPTS}")


def synthetic_requests(n: int, lengths: LengthModel,
                       rng: np.random.Generator) -> list[BenchRequest]:
    """``n`` requests with prompt and output lengths drawn from ``lengths``.

    The drawn prompt lengths are summed before any text is built: more than
    :data:`MAX_SYNTHETIC_WORDS` words in all is refused with the figure."""
    _check_n(n)
    try:
        ins, outs = lengths.sample(n, rng)
    except (ValueError, OverflowError) as exc:
        raise InputError(f"the length model cannot be sampled: {exc}") from None
    words = int(np.sum(np.asarray(ins, dtype=float)))
    if words > MAX_SYNTHETIC_WORDS:
        raise InputError(f"{n} synthetic prompts would hold {words} words in all, more than "
                         f"{MAX_SYNTHETIC_WORDS}: fewer --num-prompts or a shorter --input-len")
    return [BenchRequest(synthetic_prompt(int(a), rng), int(a), int(b))
            for a, b in zip(ins, outs, strict=True)]


_DIST_HELP = ("a token count (128), fixed:128, uniform:64-256, lognormal:mean=208,cv=1.0"
              "[,min=4,max=1023], or a JSON object such as {\"dist\": \"fixed\", \"value\": 128}")


def _whole(text: str) -> int:
    """A token count as written on the command line: ASCII digits only (no ``1_000``, no
    other scripts' digits), at most :data:`~fleetplan.bench.response.MAX_TOKENS`."""
    t = text.strip()
    if not (t.isascii() and t.isdigit()):
        raise ValueError(f"{t[:40]!r} is not a whole number")
    if len(t) > 9 or int(t) > MAX_TOKENS:
        raise ValueError(f"{t[:40]} is more than {MAX_TOKENS} tokens")
    return int(t)


def _pairs(rest: str) -> dict[str, str]:
    out = {}
    for item in rest.split(","):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"{item[:40]!r} is not key=value")
        out[key.strip()] = value
    return out


def _too_large(dist: LengthDist) -> str | None:
    """A field of ``dist`` above :data:`MAX_TOKENS`, if any (a JSON spec is not parsed by
    :func:`_whole`)."""
    for key, v in dist.model_dump().items():
        for x in v if isinstance(v, list | tuple) else [v]:
            if isinstance(x, int | float) and not isinstance(x, bool) and x > MAX_TOKENS:
                return f"{key}: {x:.6g} is more than {MAX_TOKENS} tokens"
    return None


def parse_length_dist(text: str, option: str = "length") -> LengthDist:
    """A length distribution from its command-line spelling (see ``_DIST_HELP``)."""
    raw = text.strip()
    try:
        if raw.startswith("{"):
            spec: dict[str, Any] = json.loads(raw)
        elif raw.isascii() and raw.isdigit():
            spec = {"dist": "fixed", "value": _whole(raw)}
        else:
            kind, sep, rest = raw.partition(":")
            if not sep:
                raise ValueError("no ':'")
            if kind == "fixed":
                spec = {"dist": "fixed", "value": _whole(rest)}
            elif kind == "uniform":
                lo, _, hi = rest.replace(",", "-").partition("-")
                spec = {"dist": "uniform", "low": _whole(lo), "high": _whole(hi),
                        "min": _whole(lo), "max": _whole(hi)}
            elif kind == "lognormal":
                spec = {"dist": "lognormal", **{k: float(v) if k in ("mean", "cv")
                                                else _whole(v)
                                                for k, v in _pairs(rest).items()}}
            else:
                raise ValueError(f"unknown kind {kind[:40]!r}")
        dist = _LENGTH_ADAPTER.validate_python(spec)
        if (big := _too_large(dist)) is not None:
            raise ValueError(big)
        return dist
    except RecursionError:
        raise InputError(f"{option}: nested too deeply; expected {_DIST_HELP}") from None
    except (ValueError, json.JSONDecodeError, ValidationError) as exc:
        if isinstance(exc, ValidationError):
            err = exc.errors()[0]
            msg = f"{err['loc'][-1]}: {err['msg']}" if err["loc"] else err["msg"]
        else:
            msg = str(exc)
        raise InputError(f"{option} {show_value(text, 60)}: {msg}; expected {_DIST_HELP}") from None


def _output_of(rec: dict[str, Any], where: str) -> int | None:
    for key in OUTPUT_KEYS:
        if key in rec and rec[key] not in (None, ""):
            raw = rec[key]
            text = str(raw).strip() if isinstance(raw, int | str) and not isinstance(
                raw, bool) else ""
            if not (text.isascii() and text.lstrip("-").isdigit()):
                raise InputError(f"{where}: field {key}: {show_value(raw)} is not an "
                                 "integer") from None
            if len(text) > 10 or not 1 <= int(text) <= MAX_TOKENS:
                raise InputError(f"{where}: field {key}: {show_value(raw)} must be from 1 to "
                                 f"{MAX_TOKENS}")
            return int(text)
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
    """(prompt, output budget or None) from a JSONL, CSV or ShareGPT-style JSON file (a regular
    file of at most :data:`MAX_DATASET_BYTES`: a FIFO or device is refused by its type)."""
    text = read_text_bounded(path, what="dataset", max_bytes=MAX_DATASET_BYTES)
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        try:
            if reader.fieldnames is None or "prompt" not in reader.fieldnames:
                raise InputError(f"{path}: CSV dataset needs a 'prompt' column")
            return [(_prompt_of(row, f"{path}: line {reader.line_num}"),
                     _output_of(row, f"{path}: line {reader.line_num}")) for row in reader]
        except csv.Error as exc:
            raise InputError(f"{path}: line {reader.line_num}: not valid CSV ({exc})") from None
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            items = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
        except RecursionError:
            raise InputError(f"{path}: nested too deeply to read as a dataset") from None
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
        except RecursionError:
            raise InputError(f"{path}: line {i}: nested too deeply") from None
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
    _check_n(n)
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

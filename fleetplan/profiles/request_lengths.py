"""A run's per-request token counts, as the store keeps them (``input_lens`` / ``output_lens``).

vLLM's result files hold, when saved with the per-request arrays (``--save-detailed``, and
every ``fleetplan bench`` result), each request's prompt and generated tokens in the order the
requests were sent. Where a run has them, a replay needs no length model for it: it sends
exactly those requests (:func:`fleetplan.replica.runs.predict_run`). The store keeps them as
two cells of space-separated whole numbers, one per request sent.

Kept only for a run whose every request completed: a failed request's reply length is not
known (vLLM records 0), and replaying it as a 0-token reply would be wrong.
"""

from __future__ import annotations

from collections.abc import Sequence

# the store's cells: up to 10**6 requests of up to 9 digits each, with separators
MAX_CELL_CHARS = 10 * 10**6


def encode(counts: Sequence[int]) -> str:
    """``[12, 7]`` -> ``"12 7"``."""
    return " ".join(str(int(c)) for c in counts)


def check_cell(text: str, *, least: int) -> str:
    """``text`` when it is a non-empty list of whole numbers >= ``least`` separated by single
    spaces, else a ValueError saying what is wrong (the store's row check words it)."""
    parts = text.split(" ")
    if not text or not all(p.isascii() and p.isdigit() for p in parts):
        raise ValueError("expected whole numbers separated by single spaces, one per request")
    if min(int(p) for p in parts) < least:
        raise ValueError(f"every count must be at least {least}")
    return text


def decode(text: str) -> tuple[int, ...]:
    """``"12 7"`` -> ``(12, 7)``, for a cell :func:`check_cell` accepted."""
    return tuple(int(p) for p in text.split(" "))


def usable_lengths(input_lens: Sequence[int] | None, output_lens: Sequence[int] | None, *,
                   num_prompts: int, completed: int, partial: bool) -> tuple[str, str] | None:
    """The two cells for a result file's arrays, or None when the run cannot be replayed
    request by request from them (arrays missing or not one entry per request sent, a request
    that did not complete, a prompt of no tokens, an interrupted run)."""
    if input_lens is None or output_lens is None or completed != num_prompts or partial:
        return None
    if not len(input_lens) == len(output_lens) == num_prompts:
        return None
    if min(input_lens, default=0) < 1 or min(output_lens, default=0) < 1:
        return None
    return encode(input_lens), encode(output_lens)

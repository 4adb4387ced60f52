"""Output helpers shared by commands: tables (rich), CSV and JSON (deterministic bytes)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from fleetplan._io import json_safe

if TYPE_CHECKING:  # pandas and rich are imported by the functions that use them
    import pandas as pd


# Every per-token figure (cost, carbon) counts prompt and output tokens together: say so wherever
# one is shown. JSON field names (``cost_per_mtok_usd``) are a contract and stay as they are.
MTOK = "Mtok (in+out)"
MTOK_NOTE = "Mtok: a million tokens, prompt (input) + output tokens together"


class OutputFormat(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"


class TableOrJson(StrEnum):
    """``--format`` of a command without a CSV form: the choices offered are the ones it has."""

    table = "table"
    json = "json"


def dumps(obj: Any) -> str:
    """Deterministic JSON (sorted keys are not imposed: field order is the contract's order)."""
    return json.dumps(json_safe(obj), indent=2, allow_nan=False) + "\n"


def emit_json(obj: Any) -> None:
    sys.stdout.write(dumps(obj))


def emit_csv(df: pd.DataFrame) -> None:
    sys.stdout.write(df.to_csv(index=False, lineterminator="\n", float_format="%.6g"))


def _fmt_cell(v: Any, digits: int) -> str:
    v = json_safe(v)
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}" if abs(v) < 1e6 else f"{v:.4g}"
    return str(v)


def emit_table(df: pd.DataFrame, title: str | None = None, digits: int = 3,
               columns: Sequence[str] | None = None, caption: str | None = None) -> None:
    import pandas as pd
    from rich.console import Console
    from rich.table import Table

    cols = list(columns) if columns is not None else list(df.columns)
    table = Table(title=title, caption=caption, caption_justify="left")
    for c in cols:
        numeric = pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])
        table.add_column(c, justify="right" if numeric else "left", overflow="fold")
    for rec in df[cols].to_dict("records"):
        table.add_row(*(_fmt_cell(rec[c], digits) for c in cols))
    Console(width=max(160, Console().width)).print(table)

"""One table row to a typed record, with the house's one-line error (file, row, field, value)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from fleetplan._load import show_value
from fleetplan.errors import DataError

R = TypeVar("R", bound=BaseModel)


def validate_row(cls: type[R], row: dict[str, Any], path: Path, line: int) -> R:
    """``cls`` from ``row`` (the data row on CSV line ``line`` of ``path``)."""
    try:
        return cls.model_validate(row)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(x) for x in err["loc"]) or "row"
        value = row.get(str(err["loc"][0])) if err["loc"] else None
        msg = str(err["msg"]).removeprefix("Value error, ")
        named, _, why = msg.partition(": ")
        if not err["loc"] and named in row:  # a rule between columns names its column first
            field, value, msg = named, row[named], why
        raise DataError(f"{path}: row {line}, column {field}: {show_value(value, 60)}: "
                        f"{msg}") from None

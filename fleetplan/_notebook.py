"""Jupyter display of result objects: a one-line summary above the result's ``to_frame()``.

Result classes inherit :class:`NotebookRepr` and define ``to_frame()`` and ``_summary()``.
"""

from __future__ import annotations

import html
from typing import Any


class NotebookRepr:
    """Mixin: ``_repr_html_`` (Jupyter) from ``_summary()`` and ``to_frame()``."""

    def to_frame(self) -> Any:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def _summary(self) -> str:
        return type(self).__name__

    def _repr_html_(self) -> str:
        frame = self.to_frame()
        table = frame._repr_html_() if hasattr(frame, "_repr_html_") else html.escape(str(frame))
        return f"<p><b>{html.escape(self._summary())}</b></p>{table}"

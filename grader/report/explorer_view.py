"""`grader.explorer.Explorer` -> what the mask explorer's script reads: one compact JSON block.

Pure. The JSON goes into a ``<script type="application/json">`` element, which the page's CSP
does not run; ``<``, ``>`` and ``&`` are written as ``\\u003c``-style escapes so that no text in
it can close the element. Non-finite numbers, which JSON lacks, become null (NaN) or strings.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from grader.explorer import Explorer, is_finite_min


@dataclass(frozen=True)
class ExplorerView:
    uid: str
    """Unique within the page: prefixes the ids of the explorer's controls."""
    data: Markup
    """The explorer's data as JSON, safe inside a script element."""
    illustrative: bool
    """The scores are made up (a mask case): the page says so."""
    matched: bool = False
    """The middle table is the mask the student's output matched (a module's call), not their weights."""
    kit: bool = False
    """A kit's practice page: no student's weights, the fill is the student's to choose."""
    title: str = ""
    description: str = ""
    size: int = 0
    """Length of ``data`` in characters."""


def _plain(x: Any) -> Any:
    if isinstance(x, list):
        return [_plain(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None if math.isnan(x) else ("inf" if x > 0 else "-inf")
    return x


def _fill(fill: float | None) -> Any:
    if fill is None:
        return None
    if is_finite_min(fill):
        return "min"
    return _plain(fill)


def script_json(value: Any) -> Markup:
    """JSON text that can sit inside a ``<script type="application/json">`` element."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def explorer_data(e: Explorer, *, kit: bool = False) -> dict[str, Any]:
    """The short-keyed dict the script reads (grader/report/templates/explorer.js)."""
    return {"s": _plain(e.scores), "p": [[p.kind, p.keep] for p in e.parts],
            "r": _plain(e.reference) if e.reference is not None else None,
            "y": _plain(e.yours) if e.yours is not None else None, "m": e.your_mask,
            "f": _fill(e.fill), "e": e.empty_rows, "a": e.after_softmax, "i": e.illustrative,
            "t": e.tolerance, "o": e.offsets or [0, 0, 0, 0], "l": e.labels, "k": kit}


def build_explorer(e: Explorer | None, uid: str, *, kit: bool = False, title: str = "",
                   description: str = "") -> ExplorerView | None:
    if e is None or not e.scores:
        return None
    data = script_json(explorer_data(e, kit=kit))
    return ExplorerView(uid, data, e.illustrative, e.your_mask is not None and not e.illustrative, kit, title,
                        description, len(data))

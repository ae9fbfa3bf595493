"""The small tensors of one attention call that the report's mask explorer replays.

A failing attention (or mask) case keeps, besides its static heatmaps, what a student needs to
redo the tutorial's experiment on their own data: the scores of every batch row and head, the
case's mask split into the parts it was made of (causal, padding, or one mask as given), the
student's weights as returned, and the rule their code appears to follow (which value it puts in
masked scores, what it does with a query that may see no key). The page recomputes the softmax
live as the masks are switched on and off. Plain JSON values only: results files carry it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

MAX_SIDE = 12
"""At most this many queries and keys (a window around the first wrong value beyond)."""
MAX_SLICES = 4
"""At most this many batch rows and heads each."""

Tensor4 = list[list[list[list[float]]]]
"""[batch][head][query][key]."""


@dataclass(frozen=True)
class MaskPart:
    """One part of the case's keep mask (True = may attend); the case used the AND of all parts."""

    kind: str
    """"causal" (``keep`` is [query][key]), "padding" ([batch][key]) or "mask" ([batch][query][key])."""
    keep: list[Any]


@dataclass(frozen=True)
class Explorer:
    """One failing attention call, small enough to replay in the page."""

    scores: Tensor4
    """q·kᵀ/√d before any mask, rounded to 4 significant digits."""
    parts: list[MaskPart]
    """The case's mask, part by part (empty: the case gave no mask)."""
    reference: list[Tensor4] | None
    """The reference's weights for each combination of parts (index: the bitmask of the parts on),
    computed by the reference itself (a kit's page); None: the page computes them."""
    yours: Tensor4 | None
    """The student's weights as returned, for the case's mask (None: the case checks a mask only)."""
    your_mask: list[list[list[bool]]] | None = None
    """[batch][query][key]: the mask the student built, used instead of the parts' AND (mask cases)."""
    fill: float | None = None
    """What the student's masked scores hold, as their weights show it: -inf, 0, a number, or
    ``FINITE_MIN`` (very negative and finite: -1e9, finfo.min); None when no rule reproduces them."""
    empty_rows: str = "zero"
    """What the student's code gives a query that may see no key: "zero", "uniform" or "nan"."""
    after_softmax: bool = False
    """The student's code zeroes masked weights after the softmax instead of filling scores."""
    illustrative: bool = False
    """The scores are made up for the picture (the case checks a mask and has none)."""
    dtype: str = "torch.float32"
    tolerance: float = 1e-3
    """How far two weights may be apart and still count as the same."""
    offsets: list[int] | None = None
    """[batch, head, query, key] index of the first element shown (windows of larger inputs)."""
    labels: list[str] | None = None
    """Names of the positions (tokens) along the keys, e.g. ["我", "爱", "猫"]; None: numbers."""
    title: str = ""


FINITE_MIN = -3.4028234663852886e38
"""Stands for "a very negative finite fill" (float32's finfo.min; -1e9 gives the same weights)."""


def _nums(x: Any) -> Any:
    if isinstance(x, list):  # of numbers, mostly: those are taken as they are, without a call each
        return [v if type(v) in (float, int) else _nums(v) for v in x]
    if isinstance(x, str) and x in ("nan", "inf", "-inf"):
        return float(x)
    return x


def explorer_from_dict(d: dict | None) -> Explorer | None:
    """The inverse of ``results.to_dict`` for an explorer (NaN and infinities come back as floats)."""
    if d is None:
        return None
    d = dict(d)
    d["parts"] = [MaskPart(**p) for p in d.get("parts", [])]
    for key in ("scores", "reference", "yours", "fill"):
        d[key] = _nums(d.get(key))
    return Explorer(**d)


def is_finite_min(fill: float | None) -> bool:
    return fill is not None and math.isfinite(fill) and fill <= -1e8

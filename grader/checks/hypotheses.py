"""Naming a mistake by hypothesis: which of a case's precomputed "what this mistake gives" tensors
the student's result reproduces.

The hypotheses are data, computed by the assignment's own models in the case's setup (grading
runs the setup live; a student kit carries the public cases' results in expected.safetensors).
Nothing here knows what the mistakes are or how to make them: it compares tensors.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch


@dataclass
class Hypotheses:
    """What the right code and each classic mistake give on one case's inputs (float64)."""

    reference: torch.Tensor
    mistakes: dict[str, torch.Tensor] = field(default_factory=dict)
    """Mistake ("concept" or "concept/variant") -> its result, in the order they are tried."""


def matching_mistake(actual: torch.Tensor, reference: torch.Tensor, mistakes: Mapping[str, torch.Tensor], *,
                     tol: float, where: torch.Tensor | None = None, finite_only: bool = False,
                     apart: float = 2.0, apart_from_student: float = 10.0,
                     only: tuple[str, ...] | None = None) -> str | None:
    """The first mistake whose result ``actual`` reproduces, or None. Distances are max abs
    differences over the compared cells. A mistake M is named when both hold:

    - the student reproduces it: dist(actual, M) < ``tol``;
    - it is unambiguously not the reference: dist(reference, M) > ``apart`` x ``tol`` (2: then
      no output lies within ``tol`` of both) and > ``apart_from_student`` x dist(actual, M) (10:
      the student is ten times closer to M than M is to the right answer, so a bfloat16 output
      5e-3 from a mistake 0.27 away is that mistake, and one 0.03 from a mistake 0.05 away is not).

    ``where``: bool, broadcastable to ``actual``: the cells compared (None = all).
    ``finite_only``: skip the student's NaN and inf cells (a NaN elsewhere is another diagnosis).
    ``only``: try these mistakes, in this order (default: all, in ``mistakes``' order). Shapes
    that differ from ``actual``'s never match.
    """
    got = actual.detach().double().cpu()
    cells = None if where is None else where.cpu().expand(got.shape)
    if finite_only:
        finite = torch.isfinite(got)
        cells = finite if cells is None else (cells & finite)
    names = [n for n in (only if only is not None else tuple(mistakes))
             if mistakes.get(n) is not None and mistakes[n].shape == got.shape]
    if not names:
        return None
    results = torch.stack([mistakes[n].detach().double().cpu() for n in names])  # (M, *shape)
    near = _distances(got, results, cells)  # all mistakes at once: one op each, not one per mistake
    ref = reference.detach().double().cpu()
    for i, name in enumerate(names):
        if near[i] < tol and _distances(ref, results[i:i + 1], cells)[0] > max(apart * tol, apart_from_student * near[i]):
            return name
    return None


def _distances(a: torch.Tensor, results: torch.Tensor, cells: torch.Tensor | None) -> list[float]:
    """max |a - r| over ``cells`` (None = all) for each r of ``results`` (M, *a.shape); 0 where
    no cell is compared; NaN in a compared cell gives NaN."""
    if a.numel() == 0 or (cells is not None and not bool(cells.any())):
        return [0.0] * results.shape[0]
    d = (a[None] - results).abs()
    if cells is not None:
        d = d.masked_fill(~cells[None], -math.inf)
    return d.reshape(results.shape[0], -1).amax(1).tolist()


def concept_of(mistake: str) -> str:
    """"head-split/interleaved" -> "head-split"."""
    return mistake.split("/")[0]

"""A kit's ``explore.html``: the course's first masking experiment, before any code is written.

The tutorial's own example (我 / 爱 / 猫, two heads with different scores and the same causal
mask), a decode-like chunk with fewer queries than keys, and a left-padded batch with a causal
mask, where one query may see no key. Every example is made here from fixed numbers (nothing of
an assignment, its seed or its hidden cases), and the weights for each combination of its masks
are the trusted reference's (``reference.oracle_attention``), computed at release time. The page
is the report's explorer (grader/report/templates/explorer.js) without a student's weights: the
fill of masked scores is the student's to choose.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch

from grader.checks.explore import mask_parts
from grader.explorer import Explorer, MaskPart
from grader.i18n import DEFAULT, Msg, tr
from grader.report.explorer_view import ExplorerView, build_explorer
from grader.report.html import render_page

FILE = "explore.html"


@dataclass(frozen=True)
class Example:
    title: Msg
    description: Msg
    q: torch.Tensor
    """(B, H, Lq, d)"""
    k: torch.Tensor
    """(B, H, Lk, d)"""
    keep: torch.Tensor
    """(B, 1, Lq, Lk) bool, True = may attend."""
    labels: list[str] | None = None


def _circle(n: int, r: float, sign: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions on a circle, 60° apart: q·k = r² cos(60° |i - j|), largest near the diagonal
    (``sign`` = 1) or far from it (-1)."""
    angles = torch.arange(n, dtype=torch.float64) * (math.pi / 3)
    u = torch.stack([angles.cos(), angles.sin()], -1) * r  # (n, 2)
    return u, sign * u


def examples() -> list[Example]:
    import reference

    q1, k1 = _circle(3, 1.6, 1.0)
    q2, k2 = _circle(3, 1.6, -1.0)
    tutorial = Example(
        tr("我 / 爱 / 猫: two heads, one causal mask"),
        tr("Head 0 scores its neighbours higher, head 1 the distant tokens. Switch heads: the scores change, "
           "the cells the causal mask hides stay the same."),
        torch.stack([q1, q2])[None], torch.stack([k1, k2])[None],
        reference.causal_mask(3)[None, None], labels=["我", "爱", "猫"])
    g = torch.Generator().manual_seed(2024)
    u = torch.rand(1, 1, 1, 4, generator=g, dtype=torch.float64) + 0.5
    chunk = Example(
        tr("Two new queries, five keys (a chunk while decoding)"),
        tr("The queries are the last two positions, so query 0 sees keys 0 to 3 and query 1 all five: the causal "
           "mask is aligned bottom-right. Every score here is negative: fill the masked cells with 0 and watch "
           "them take the weight."),
        u.expand(1, 1, 2, 4) * (1 + 0.2 * torch.rand(1, 1, 2, 4, generator=g, dtype=torch.float64)),
        -u.expand(1, 1, 5, 4) * (1 + 0.2 * torch.rand(1, 1, 5, 4, generator=g, dtype=torch.float64)),
        reference.causal_mask(2, 5)[None, None])
    pad = reference.padding_mask([4, 2], 4, side="left")
    padded = Example(
        tr("A left-padded batch with a causal mask"),
        tr("Batch row 1 has two padding positions first. Its query 0 may see only key 0, which is padding: "
           "no key at all. Try −∞ without a guard (NaN) and finfo.min (1/4 each): the reference gives zeros."),
        torch.randn(2, 1, 4, 4, generator=g, dtype=torch.float64),
        torch.randn(2, 1, 4, 4, generator=g, dtype=torch.float64),
        reference.combine_masks(reference.causal_mask(4), pad))
    return [tutorial, chunk, padded]


def _parts_keep(parts: list[MaskPart], on: int, shape: tuple[int, ...]) -> torch.Tensor | None:
    B, _, Lq, Lk = shape
    keep = None
    for i, p in enumerate(parts):
        if not on >> i & 1:
            continue
        t = torch.tensor(p.keep, dtype=torch.bool)
        t = t[None, None] if p.kind == "causal" else t[:, None, None, :] if p.kind == "padding" else t[:, None]
        keep = t if keep is None else keep & t
    return keep


def explorer_of(ex: Example) -> Explorer:
    """The example's scores, its mask parts and the reference's weights for each combination of them."""
    import reference

    scores = ex.q @ ex.k.transpose(-2, -1) / math.sqrt(ex.q.shape[-1])  # (B, H, Lq, Lk)
    parts = mask_parts(ex.keep.expand(ex.q.shape[0], 1, *ex.keep.shape[-2:])[:, 0])
    v = torch.zeros(*ex.k.shape[:-1], 1, dtype=torch.float64)
    weights = []
    for on in range(1 << len(parts)):
        keep = _parts_keep(parts, on, tuple(scores.shape))
        _, w = reference.oracle_attention(ex.q, ex.k, v, keep)
        weights.append([[[[round(float(x), 4) for x in row] for row in m] for m in h] for h in w.tolist()])
    return Explorer(scores=[[[[float(f"{x:.4g}") for x in row] for row in m] for m in h] for h in scores.tolist()],
                    parts=parts, reference=weights, yours=None, labels=ex.labels, offsets=[0, 0, 0, 0])


def render(lang: str = DEFAULT) -> str:
    """The page in `lang`."""
    views: list[ExplorerView] = []
    for i, ex in enumerate(examples()):
        view = build_explorer(explorer_of(ex), f"ex{i}", kit=True, title=ex.title.render(lang),
                              description=ex.description.render(lang))
        assert view is not None
        views.append(view)
    return render_page("explore.html", "explorer.js", lang, examples=views)


def write(folder: Path, lang: str = DEFAULT) -> Path:
    path = folder / FILE
    path.write_text(render(lang), encoding="utf-8")
    return path

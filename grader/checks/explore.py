"""Tensors of a failing case -> `grader.explorer.Explorer`: what the report's mask explorer replays.

Pure and small: the scores of at most 4 batch rows x 4 heads x 12 queries x 12 keys, the case's
mask split into the parts it was built from, and the rule the student's weights follow (the value
in their masked scores, what a query that may see no key gets), found by replaying candidate
rules on the same scores. Rows are independent, so queries may be windowed; keys never are (a
softmax over part of a row would be wrong), so an input with more keys gets no explorer.
"""

from __future__ import annotations

import math

import torch

from grader.explorer import FINITE_MIN, MAX_SIDE, MAX_SLICES, Explorer, MaskPart

MAX_CELLS = 600
"""At most this many score cells in one explorer (batch rows, then heads, are cut to fit)."""


def _as4(t: torch.Tensor) -> torch.Tensor | None:
    """(..., Lq, Lk) -> (B, H, Lq, Lk), or None for more than two leading dims."""
    if t.dim() == 2:
        return t[None, None]
    if t.dim() == 3:
        return t[:, None]
    return t if t.dim() == 4 else None


def _window(bad: list[int] | None, shape: tuple[int, ...]) -> tuple[int, int, int, int, int, int, int]:
    """(b0, nb, h0, nh, q0, nq) starts and sizes around the first wrong value, plus Lk."""
    B, H, Lq, Lk = shape
    at = (list(bad) + [0] * 4)[:4] if bad and len(bad) == 4 else [0, 0, 0, 0]
    nb, nh, nq = min(B, MAX_SLICES), min(H, MAX_SLICES), min(Lq, MAX_SIDE)
    while nb * nh * nq * Lk > MAX_CELLS and nb > 1:
        nb -= 1
    while nb * nh * nq * Lk > MAX_CELLS and nh > 1:
        nh -= 1

    def start(i: int, n: int, size: int) -> int:
        return max(0, min(i - n // 2, size - n))

    return start(at[0], nb, B), nb, start(at[1], nh, H), nh, start(at[2], nq, Lq), nq, Lk


def mask_parts(keep3: torch.Tensor) -> list[MaskPart]:
    """A (B, Lq, Lk) keep mask as the parts it is the AND of: a bottom-right causal mask and/or a
    padding mask of keys when it is one, else the mask as given."""
    B, Lq, Lk = keep3.shape
    causal = torch.ones(Lq, Lk, dtype=torch.bool).tril(Lk - Lq)
    pad = keep3.any(1)  # (B, Lk): keys some query may see
    parts: list[MaskPart] = []
    if torch.equal(keep3, causal[None] & pad[:, None, :]):
        if not bool(causal.all()):
            parts.append(MaskPart("causal", causal.tolist()))
        if not bool(pad.all()):
            parts.append(MaskPart("padding", pad.tolist()))
        return parts
    if torch.equal(keep3, pad[:, None, :].expand_as(keep3)):
        return [MaskPart("padding", pad.tolist())]
    return [MaskPart("mask", keep3.tolist())]


def _parts_keep(parts: list[MaskPart], shape: tuple[int, ...]) -> torch.Tensor:
    B, H, Lq, Lk = shape
    keep = torch.ones(B, 1, Lq, Lk, dtype=torch.bool)
    for p in parts:
        t = torch.tensor(p.keep, dtype=torch.bool)
        keep = keep & (t[None, None] if p.kind == "causal" else t[:, None, None, :] if p.kind == "padding"
                       else t[:, None])
    return keep.expand(shape)


def replay(scores: torch.Tensor, keep: torch.Tensor, fill: float, empty_rows: str = "zero",
           after_softmax: bool = False) -> torch.Tensor:
    """The weights a rule gives (float64): masked scores set to ``fill`` before the softmax (or,
    ``after_softmax``, masked weights zeroed after it), and rows with no visible key treated as
    ``empty_rows`` says. The page's script computes exactly this."""
    if after_softmax:
        w = torch.softmax(scores, -1) * keep
    else:
        w = torch.softmax(scores.masked_fill(~keep, fill), -1)
    empty = ~keep.any(-1, keepdim=True)
    if empty_rows == "zero":
        w = torch.where(empty, torch.zeros_like(w), w)
    elif empty_rows == "nan":
        w = torch.where(empty, torch.full_like(w, math.nan), w)
    return w


def _empty_rows(yours: torch.Tensor, keep: torch.Tensor) -> str:
    empty = ~keep.any(-1)
    if not bool(empty.any()):
        return "zero"
    rows = yours[empty]
    if bool(torch.isnan(rows).any()):
        return "nan"
    return "zero" if float(rows.abs().max()) < 1e-6 else "uniform"


def _fill_estimate(scores: torch.Tensor, keep: torch.Tensor, yours: torch.Tensor) -> float | None:
    """The value in the student's masked scores that their leaked weights imply:
    w_masked / w_visible = exp(fill - s_visible) in the same row, v the row's heaviest visible key
    (rows with no visible key, a non-finite weight or no weight on v say nothing)."""
    n = scores.shape[-1]
    s, kp, w = scores.reshape(-1, n), keep.reshape(-1, n), yours.reshape(-1, n)
    v = torch.argmax(torch.where(kp, w, torch.full_like(w, -1.0)), -1, keepdim=True)  # (rows, 1)
    w_v, s_v = w.gather(-1, v)[:, 0], s.gather(-1, v)[:, 0]
    rows = kp.any(-1) & torch.isfinite(w).all(-1) & (w_v > 1e-12)
    row, key = torch.nonzero(~kp & (w > 1e-9) & rows[:, None], as_tuple=True)  # leaked cells, row by row
    if not row.numel():
        return None
    # The ratio in float64 as Python would divide; the log and the sum in Python, as before.
    ests = sorted(a + math.log(r) for a, r in zip(s_v[row].tolist(), (w[row, key] / w_v[row]).tolist()))
    est = ests[len(ests) // 2]
    return 0.0 if abs(est) < 1e-3 else float(f"{est:.3g}")


def _same(a: torch.Tensor, b: torch.Tensor, tol: float) -> bool:
    nan_a, nan_b = torch.isnan(a), torch.isnan(b)
    if not torch.equal(nan_a, nan_b):
        return False
    diff = (a - b).abs()[~nan_a]
    return diff.numel() == 0 or float(diff.max()) <= tol


def student_rule(scores: torch.Tensor, keep: torch.Tensor, yours: torch.Tensor,
                 tol: float) -> tuple[float, str, bool] | None:
    """(fill, empty_rows, after_softmax) of the first rule that reproduces ``yours``, or None."""
    empty = _empty_rows(yours, keep)
    est = _fill_estimate(scores, keep, yours)
    plain = [-math.inf, FINITE_MIN] if empty != "uniform" else [FINITE_MIN]
    candidates = [(f, False) for f in ([est] if est is not None else []) + [0.0] + plain] + [(0.0, True)]
    for fill, after in candidates:
        if _same(replay(scores, keep, fill, empty, after), yours, tol):
            return (0.0 if after else fill), empty, after
    return None


def _r4(t: torch.Tensor) -> list:
    return [[[[float(f"{x:.4g}") if math.isfinite(x) else x for x in row] for row in m] for m in h]
            for h in t.tolist()]


def _w4(t: torch.Tensor) -> list:
    return [[[[round(x, 4) if math.isfinite(x) else x for x in row] for row in m] for m in h] for h in t.tolist()]


def attention_explorer(q: torch.Tensor, k: torch.Tensor, keep: torch.Tensor | None, actual_w: torch.Tensor,
                       dtype: torch.dtype, bad: list[int] | None, *, scale: float | None = None) -> Explorer | None:
    """The explorer of one attention call (q, k, the case's keep mask, the student's weights);
    None when it does not fit (more than 12 keys, over two leading dims, head-dependent masks)."""
    q64, k64 = q.detach().cpu().double(), k.detach().cpu().double()
    scores = _as4(q64 @ k64.transpose(-2, -1) * (scale if scale is not None else 1 / math.sqrt(q.shape[-1])))
    w = _as4(actual_w.detach().cpu().double())
    if scores is None or w is None or w.shape != scores.shape or scores.shape[-1] > MAX_SIDE:
        return None
    shape = tuple(scores.shape)
    try:
        keep4 = torch.ones(shape, dtype=torch.bool) if keep is None else \
            _as4(keep.detach().cpu().bool().expand(actual_w.shape))
    except RuntimeError:  # a mask that does not broadcast: nothing to replay
        return None
    if keep4 is None:
        return None
    if not torch.equal(keep4, keep4[:, :1].expand(shape)):
        return None  # a mask per head: not a causal or padding mask a student toggles
    b0, nb, h0, nh, q0, nq, _ = _window(bad, shape)
    win = (slice(b0, b0 + nb), slice(h0, h0 + nh), slice(q0, q0 + nq))
    parts = mask_parts(keep4[:, 0]) if keep is not None else []
    parts = [MaskPart(p.kind, _cut(p, b0, nb, q0, nq)) for p in parts]
    s, kp, yours = scores[win], _parts_keep(parts, (nb, nh, nq, shape[-1])), w[win]
    tol = 1e-3 if dtype in (torch.float32, torch.float64) else 3e-2
    shown = _r4(s)  # the scores as the page shows them; the rule is replayed on these
    rule = student_rule(torch.tensor(shown, dtype=torch.float64), kp, yours, tol)
    fill, empty, after = rule if rule is not None else (None, "zero", False)
    return Explorer(scores=shown, parts=parts, reference=None, yours=None if rule is not None else _w4(yours),
                    fill=fill, empty_rows=empty, after_softmax=after, dtype=str(dtype), tolerance=tol,
                    offsets=[b0, h0, q0, 0])


def _cut(p: MaskPart, b0: int, nb: int, q0: int, nq: int) -> list:
    if p.kind == "causal":
        return p.keep[q0:q0 + nq]
    if p.kind == "padding":
        return p.keep[b0:b0 + nb]
    return [m[q0:q0 + nq] for m in p.keep[b0:b0 + nb]]


def illustrative_scores(B: int, Lq: int, Lk: int) -> list:
    """Made-up scores for a case that checks a mask only: higher near each query's own position
    (queries are the last Lq of Lk positions), as in the course's first experiment."""
    return [[[[round(2.0 - 0.5 * abs(Lk - Lq + i - j), 2) for j in range(Lk)] for i in range(Lq)]] for _ in range(B)]


def mask_explorer(got: torch.Tensor, expected: torch.Tensor) -> Explorer | None:
    """The explorer of a mask case: the reference's mask and the student's on illustrative scores.
    Masks (Lq, Lk), padding masks (B, T) (they hide keys of a T x T attention) and (B, 1, Lq, Lk)."""
    got, exp = got.detach().cpu().bool(), expected.detach().cpu().bool()
    if exp.dim() == 4 and exp.shape[1] == 1:
        exp3, got3 = exp[:, 0], got[:, 0]
        parts = mask_parts(exp3)
    elif exp.dim() == 2 and torch.equal(exp, torch.ones_like(exp).tril(exp.shape[1] - exp.shape[0])):
        exp3, got3 = exp[None], got[None]
        parts = [MaskPart("causal", exp.tolist())]
    elif exp.dim() == 2:  # (B, T) real tokens: the keys of a T x T attention
        T = exp.shape[1]
        exp3, got3 = exp[:, None, :].expand(-1, T, -1), got[:, None, :].expand(-1, T, -1)
        parts = [MaskPart("padding", exp.tolist())]
    else:
        return None
    B, Lq, Lk = exp3.shape
    if Lq > MAX_SIDE or Lk > MAX_SIDE or B > MAX_SLICES:
        return None
    return Explorer(scores=illustrative_scores(B, Lq, Lk), parts=parts, reference=None, yours=None,
                    your_mask=got3.tolist(), fill=-math.inf, empty_rows="zero", illustrative=True,
                    dtype="torch.bool", offsets=[0, 0, 0, 0])


def mask_step_explorer(q: torch.Tensor, k: torch.Tensor, keep: torch.Tensor, your_keep: torch.Tensor) -> Explorer | None:
    """The explorer of a module's call (multi-head attention, a decoding step) whose output matches
    attention with another mask: the call's scores (computed at setup), the reference's mask in
    its parts, and ``your_keep`` (B, 1, Lq, Lk), the mask the output was matched to."""
    q64, k64 = q.detach().cpu().double(), k.detach().cpu().double()
    scores = q64 @ k64.transpose(-2, -1) / math.sqrt(q64.shape[-1])  # (B, H, Lq, Lk)
    if scores.dim() != 4 or scores.shape[-1] > MAX_SIDE:
        return None
    shape = tuple(scores.shape)
    b0, nb, h0, nh, q0, nq, _ = _window(None, shape)
    parts = [MaskPart(p.kind, _cut(p, b0, nb, q0, nq)) for p in mask_parts(keep.cpu().bool().expand(shape[0], 1, *shape[2:])[:, 0])]
    mine = your_keep.cpu().bool().expand(shape[0], 1, *shape[2:])[b0:b0 + nb, 0, q0:q0 + nq]
    return Explorer(scores=_r4(scores[b0:b0 + nb, h0:h0 + nh, q0:q0 + nq]), parts=parts, reference=None, yours=None,
                    your_mask=mine.tolist(), fill=-math.inf, empty_rows="zero", offsets=[b0, h0, q0, 0])

"""Heatmap geometry: a `results.Heatmap` -> panels of positioned, coloured cells for the SVG template.

Pure: numbers in, dataclasses (and the cells' markup) out. The template only draws what is
computed here, so the same cells can be counted by tests without a browser. The cells' own SVG
layers (`cell_layers`: a few elements per cell, ~1,000 cells on the page of a submission that
gets every case wrong) are written here rather than by the template: drawn by the template, each
with its tooltip built as a message, they cost ~45 µs a cell more than `cell_layers` (~10 µs) with
its cached tooltips (docs/performance.md).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from markupsafe import Markup, escape

from grader.i18n import DEFAULT, N_, tr, translate
from grader.report.text import one_line
from grader.results import Heatmap

ROW_SUM_TOLERANCE = 1e-3
_WHITE = (255, 255, 255)
_BLUE = (30, 64, 175)        # attention weight 1
_ORANGE = (194, 65, 12)      # largest difference
_NAN_FILL = "#9ca3af"
_MASK_ON = "#3b82f6"
_MASK_OFF = "#f8fafc"
_MISMATCH = "#dc2626"


@dataclass(frozen=True)
class Cell:
    q: int
    k: int
    x: float
    y: float
    fill: str
    text: str
    """Value printed inside the cell ("" when cells are too small)."""
    ink: str
    """Text colour readable on `fill`."""
    tooltip: str
    masked: bool
    """The reference forbids this cell (future or padding): drawn hatched."""
    leak: bool
    """Weight (or a 1) where the reference forbids it: outlined."""


@dataclass(frozen=True)
class RowSum:
    y: float
    text: str
    wrong: bool
    """The submission's row sum differs from the reference's."""


@dataclass(frozen=True)
class AxisLabel:
    pos: float
    text: str


@dataclass(frozen=True)
class Panel:
    role: str
    """"expected", "actual" or "difference"."""
    caption: str
    width: float
    height: float
    cells: list[Cell]
    row_sums: list[RowSum]
    col_labels: list[AxisLabel]
    row_labels: list[AxisLabel]


@dataclass(frozen=True)
class HeatmapView:
    uid: str
    """Unique within the page; prefixes the SVG pattern ids."""
    title: str
    kind: str
    n_q: int
    n_k: int
    cell: float
    left: float
    top: float
    font: float
    panels: list[Panel]
    n_leaks: int
    n_wrong_rows: int
    rows_should_sum_to_one: bool
    """Every reference row sums to 1 (no fully masked query), so "should be 1" can be said."""
    has_masked: bool


def _mix(a: tuple[int, int, int], b: tuple[int, int, int], t: float) -> str:
    t = min(1.0, max(0.0, t))
    r, g, bl = (round(x + (y - x) * t) for x, y in zip(a, b))
    return f"#{r:02x}{g:02x}{bl:02x}"


def _short(v: float) -> str:
    """Fits in a small cell: 0, 1, .25, -.3, NaN, ∞."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    if abs(v) < 0.005:
        return "0"
    if abs(v - round(v)) < 0.005 and abs(v) < 100:
        return str(int(round(v)))
    if abs(v) >= 10:
        return f"{v:.0f}"
    s = f"{v:.2f}"
    return s.replace("0.", ".", 1) if abs(v) < 1 else s


def _cell_size(n_q: int, n_k: int) -> float:
    return float(max(8, min(40, 320 // max(n_q, n_k, 1))))


def _value_cell(v: float, kind: str, role: str) -> tuple[str, str]:
    """(fill, ink) for one value."""
    if math.isnan(v):
        return _NAN_FILL, "#111827"
    if kind == "mask":
        if role == "difference":
            return (_MISMATCH, "#ffffff") if v > 0.5 else (_MASK_OFF, "#6b7280")
        return (_MASK_ON, "#ffffff") if v > 0.5 else (_MASK_OFF, "#6b7280")
    if role == "difference":
        t = math.sqrt(min(1.0, abs(v)))  # sqrt: small but real differences stay visible
        return _mix(_WHITE, _ORANGE, t), ("#ffffff" if t > 0.6 else "#111827")
    t = 0.0 if math.isinf(v) and v < 0 else min(1.0, abs(v))
    return _mix(_WHITE, _BLUE, t), ("#ffffff" if t > 0.5 else "#111827")


def _labels(n: int, start: float, cell: float) -> list[AxisLabel]:
    step = 1 if n <= 16 else math.ceil(n / 8)
    return [AxisLabel(start + i * cell + cell / 2, str(i)) for i in range(0, n, step)]


def _leak_set(hm: Heatmap, leaking_cells: list[list[int]] | None) -> set[tuple[int, int]]:
    """Leaking (q, k) cells: from the evidence (last two indices) or, failing that, derived here."""
    n_q, n_k = len(hm.expected), len(hm.expected[0]) if hm.expected else 0
    found: set[tuple[int, int]] = set()
    if hm.keep is not None and hm.actual is not None:
        for q, row in enumerate(hm.actual):
            for k, v in enumerate(row):
                if not hm.keep[q][k] and (math.isnan(v) or abs(v) > 1e-6):
                    found.add((q, k))
    for idx in leaking_cells or []:
        if len(idx) >= 2 and 0 <= idx[-2] < n_q and 0 <= idx[-1] < n_k:
            if hm.keep is None or not hm.keep[idx[-2]][idx[-1]]:
                found.add((idx[-2], idx[-1]))
    return found


@functools.lru_cache(maxsize=1 << 14)
def _tooltip(q: int, k: int, value: str, masked: bool, leak: bool, lang: str) -> str:
    """A cell's tooltip in `lang`. Cached: the reference panels of one case are the same on every
    student's page, and the same mistake draws the same cells."""
    tip = tr("query {q}, key {k}: {value}", q=q, k=k, value=value)
    if masked:
        tip += tr(" — may not attend (future/padding)")
    if leak:
        tip += tr("; received weight it should not")
    return tip.render(lang)


def _panel(role: str, caption: str, values: list[list[float]], hm: Heatmap, geo: HeatmapView,
           leaks: set[tuple[int, int]], show_sums: bool, lang: str = DEFAULT) -> Panel:
    c, left, top = geo.cell, geo.left, geo.top
    show_text = c >= 22
    cells: list[Cell] = []
    for q, row in enumerate(values):
        for k, v in enumerate(row):
            masked = hm.keep is not None and not hm.keep[q][k]
            fill, ink = _value_cell(v, hm.kind, role)
            leak = (q, k) in leaks and role != "expected"
            short = _short(v)
            cells.append(Cell(q, k, left + k * c, top + q * c, fill, short if show_text else "", ink,
                              _tooltip(q, k, short, masked, leak, lang), masked, leak))
    sums: list[RowSum] = []
    if show_sums:
        for q, row in enumerate(values):
            got, want = sum(row), sum(hm.expected[q])
            wrong = math.isnan(got) or abs(got - want) > ROW_SUM_TOLERANCE
            sums.append(RowSum(top + q * c + c / 2, "Σ " + _short(got) if not math.isnan(got) else "Σ NaN", wrong))
    extra = 64 if show_sums else 8
    return Panel(role, caption, left + geo.n_k * c + extra, top + geo.n_q * c + 8, cells, sums,
                 _labels(geo.n_k, left, c), _labels(geo.n_q, top, c))


def build_heatmap(hm: Heatmap, uid: str, leaking_cells: list[list[int]] | None = None,
                  lang: str = DEFAULT) -> HeatmapView | None:
    """Lay out expected / actual / |difference| panels, captions in `lang`; None for an empty or ragged matrix."""
    n_q = len(hm.expected)
    n_k = len(hm.expected[0]) if n_q else 0
    if n_q == 0 or n_k == 0 or any(len(r) != n_k for r in hm.expected):
        return None
    actual = hm.actual
    if actual is not None and (len(actual) != n_q or any(len(r) != n_k for r in actual)):
        actual = None  # a wrong-shaped matrix cannot be drawn against the reference
    keep = hm.keep
    if keep is not None and (len(keep) != n_q or any(len(r) != n_k for r in keep)):
        keep = None
    title = hm.title.render(lang)
    hm = Heatmap(hm.title, hm.expected, actual, keep, hm.kind)
    c = _cell_size(n_q, n_k)
    leaks = _leak_set(hm, leaking_cells)
    geo = HeatmapView(uid, one_line(title, 80), hm.kind, n_q, n_k, c, 50.0, 36.0, max(8.0, min(12.0, c * 0.34)),
                      [], len(leaks), 0, False, keep is not None and any(not v for r in keep for v in r))
    is_mask = hm.kind == "mask"
    panels = [_panel("expected", translate(N_("Reference mask") if is_mask else N_("Reference (what it should be)"), lang),
                     hm.expected, hm, geo, leaks, False, lang)]
    wrong_rows = 0
    if actual is not None:
        mine = _panel("actual", translate(N_("Your mask") if is_mask else N_("Your weights"), lang), actual, hm, geo,
                      leaks, not is_mask, lang)
        wrong_rows = sum(s.wrong for s in mine.row_sums)
        diff = [[abs(a - e) for a, e in zip(ra, re_)] for ra, re_ in zip(actual, hm.expected)]
        panels += [mine, _panel("difference", translate(N_("Where they differ") if is_mask
                                                        else N_("Difference |yours − reference|"), lang),
                                diff, hm, geo, leaks, False, lang)]
    return HeatmapView(geo.uid, geo.title, geo.kind, n_q, n_k, c, geo.left, geo.top, geo.font, panels,
                       len(leaks) if actual is not None else 0, wrong_rows,
                       all(abs(sum(r) - 1) <= ROW_SUM_TOLERANCE for r in hm.expected), geo.has_masked)


def cell_layers(h: HeatmapView, p: Panel) -> Markup:
    """The SVG of a panel's cells, as `_heatmap.html` places it: the cells with their tooltips,
    then the hatching over masked cells, the printed values and the outlines of leaking cells,
    one line per cell. Each layer is one group, and what its cells share is said once, on the
    group, as inherited presentation attributes rather than CSS: the notebook's and Gradescope's
    output may drop a page's styles. Colours and numbers are this module's own; the tooltip and
    the printed value are escaped as the template would."""
    size = h.cell
    half = size / 2
    rects, overlays, texts, leaks = [], [], [], []
    for c in p.cells:
        classes = "cell" + (" masked" if c.masked else "") + (" leaking" if c.leak else "")
        rects.append(f'  <rect class="{classes}" data-q="{c.q}" data-k="{c.k}" x="{c.x}" y="{c.y}" width="{size}" '
                     f'height="{size}" fill="{c.fill}"><title>{escape(c.tooltip)}</title></rect>')
        if c.masked:
            overlays.append(f'<rect class="overlay" x="{c.x}" y="{c.y}" width="{size}" height="{size}"/>')
        if c.text:
            texts.append(f'<text x="{c.x + half}" y="{c.y + half}" fill="{c.ink}" '
                         f'dominant-baseline="central">{escape(c.text)}</text>')
        if c.leak:
            leaks.append(f'<rect class="leak" data-q="{c.q}" data-k="{c.k}" x="{c.x + 1.5}" y="{c.y + 1.5}" '
                         f'width="{size - 3}" height="{size - 3}"/>')
    return Markup(
        '<g stroke="#e2e8f0" stroke-width="1">' + "".join(rects) + "  </g>\n"
        f'  <g fill="url(#hatch-{escape(h.uid)}-{escape(p.role)})">' + "".join(overlays) + "</g>\n"
        f'  <g font-size="{h.font}" text-anchor="middle">' + "".join(texts) + "</g>\n"
        '  <g fill="none" stroke="#e11d48" stroke-width="3">' + "".join(leaks) + "</g>")

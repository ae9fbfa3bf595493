"""The similarity report: ``similarity.html`` beside the dashboard and ``similarity.csv``.

Ranked pairs (`grader.similarity.pairs.Pair`) with their evidence side by side: each one's matched
lines with a little context, and the cases on which both gave the same wrong output. The words
report what was found, never what anyone did. Student code is shown through Jinja's
autoescaping, cleaned of control characters first; the page runs no script.
"""

from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass
from pathlib import Path

from grader.i18n import choose
from grader.report.dashboard import SIMILARITY_PAGE, report_filename
from grader.report.html import environment
from grader.report.outdir import write_text_atomic
from grader.report.text import csv_cell, one_line
from grader.similarity.pairs import Document, Pair
from grader.untrusted import text as clean_text

SHOWN_PAIRS = 40
"""Pairs with their code side by side on the page; the CSV lists every pair."""
LISTED_PAIRS = 300
"""Pairs in the page's ranking table."""
CONTEXT = 1
"""Unmatched lines shown around matched ones."""
MAX_SHOWN_LINES = 120
"""Lines of one submission shown for one pair."""
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"


@dataclass(frozen=True)
class CodeLine:
    number: int
    text: str
    matched: bool
    gap_before: bool
    """Lines were left out before this one."""


@dataclass(frozen=True)
class CodeBlock:
    label: str
    lines: list[CodeLine]


@dataclass(frozen=True)
class PairView:
    rank: int
    a: str
    b: str
    page_a: str
    page_b: str
    code_a: str
    code_b: str
    shared_outputs: list[tuple[str, str, bool, int]]
    """(case title, case id, hidden, how many submissions gave that output)."""
    blocks_a: list[CodeBlock]
    blocks_b: list[CodeBlock]


def _blocks(doc: Document | None, matched: frozenset[tuple[int, int]], starter: frozenset[str]) -> list[CodeBlock]:
    """The matched lines of `doc` with `CONTEXT` lines around; a line that is one of the starter's
    own (`starter`, stripped) is shown but not marked: it is not what the pair shares."""
    if doc is None or not matched:
        return []
    blocks, budget = [], MAX_SHOWN_LINES
    for unit, source in enumerate(doc.units):
        lines = source.splitlines()
        hits = {line for u, line in matched if u == unit}
        if not hits or budget <= 0:
            continue
        keep = sorted({n for h in hits for n in range(h - CONTEXT, h + CONTEXT + 1) if 1 <= n <= len(lines)})
        shown, prev = [], 0
        for n in keep[:budget]:
            hit = n in hits and lines[n - 1].strip() not in starter
            shown.append(CodeLine(n, clean_text(lines[n - 1], 300), hit, gap_before=n != prev + 1))
            prev = n
        budget -= len(shown)
        blocks.append(CodeBlock(one_line(doc.labels[unit], 120), shown))
    return blocks


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def pair_views(pairs: list[Pair], docs: dict[str, Document], starter: frozenset[str] = frozenset()) -> list[PairView]:
    return [PairView(rank=i + 1, a=p.a, b=p.b, page_a=f"{report_filename(p.a)}.html", page_b=f"{report_filename(p.b)}.html",
                     code_a=_pct(p.code_a), code_b=_pct(p.code_b),
                     shared_outputs=[(one_line(s.case_title, 200), s.case_id, s.hidden, s.given_by)
                                     for s in p.shared_outputs],
                     blocks_a=_blocks(docs.get(p.a), p.lines_a, starter) if i < SHOWN_PAIRS else [],
                     blocks_b=_blocks(docs.get(p.b), p.lines_b, starter) if i < SHOWN_PAIRS else [])
            for i, p in enumerate(pairs)]


def render_similarity(pairs: list[Pair], docs: dict[str, Document], *, assignment: str, compared: int,
                      starter: frozenset[str] = frozenset(), lang: str | None = None) -> str:
    """The page; `starter`: the starter's lines (stripped), never marked as matched."""
    lang = choose(lang)
    return environment(lang).get_template("similarity.html").render(
        pairs=pair_views(pairs[:LISTED_PAIRS], docs, starter), more=max(0, len(pairs) - LISTED_PAIRS),
        assignment=one_line(assignment, 200), compared=compared, shown=SHOWN_PAIRS, csp=CSP, lang=lang)


def similarity_csv(pairs: list[Pair]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["rank", "student_a", "student_b", "code_share_a", "code_share_b", "matched_lines_a",
                "matched_lines_b", "identical_wrong_outputs", "cases"])
    for i, p in enumerate(pairs):
        w.writerow([i + 1, csv_cell(p.a), csv_cell(p.b), f"{p.code_a:.3f}", f"{p.code_b:.3f}", len(p.lines_a),
                    len(p.lines_b), len(p.shared_outputs), csv_cell(" ".join(s.case_id for s in p.shared_outputs))])
    return buf.getvalue()


def write_similarity(pairs: list[Pair], docs: dict[str, Document], out_dir: str | os.PathLike[str], *,
                     assignment: str, compared: int, starter: frozenset[str] = frozenset(),
                     lang: str | None = None) -> tuple[Path, Path]:
    """``similarity.html`` and ``similarity.csv`` in `out_dir`."""
    out = Path(out_dir)
    page = write_text_atomic(out / SIMILARITY_PAGE, render_similarity(pairs, docs, assignment=assignment,
                                                                       compared=compared, starter=starter, lang=lang))
    return page, write_text_atomic(out / "similarity.csv", similarity_csv(pairs))

"""The self-check as an HTML fragment for a notebook cell's output (``grader.notebook``).

Reuses the report page's pieces (the view model, the case article with its evidence and
heatmaps, the stylesheets) in one ``<div class="grader-check">`` whose styles are scoped to it,
so the notebook's own look is untouched. No script: the page's heatmap controls stay hidden and
every figure is shown, as in the report without JavaScript.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from markupsafe import Markup

from grader.assignment.builtin import explanation
from grader.report.html import environment
from grader.report.view import ReportView
from grader.i18n import DEFAULT, translate

SCOPE = ".grader-check"

_INLINE_CSS = """
.grader-check { max-width: 1100px; margin: 0; padding: 6px 2px 4px; }
.grader-check h2 { font-size: 1.08em; margin: 16px 0 6px; }
.grader-check .sc-head { display: flex; justify-content: space-between; gap: 16px; flex-wrap: wrap; }
.grader-check .score.selfcheck .lead { max-width: none; font-size: 1.05em; }
.grader-check .score.selfcheck .pts { display: block; }
.grader-check .banner.stale { background: var(--warn-bg); border: 2px solid #f59e0b; color: var(--warn); }
.grader-check ul.passed-list { list-style: none; padding: 0; margin: 4px 0; display: flex; flex-wrap: wrap; gap: 2px 16px; }
.grader-check details.more-cases > summary { cursor: pointer; color: var(--accent); margin: 4px 0 8px; }
.grader-check .hidden-count { color: var(--muted); margin: 10px 0 0; }
"""


@dataclass(frozen=True)
class InlineView:
    """What the notebook output says around the report's pieces (all plain text, escaped on render)."""

    title: str
    """"Self-check of causal_mask in attention.ipynb"."""
    graded_file: str
    """Which file was graded, and when it was saved: the kernel's state is not what is graded."""
    warning: str
    """Save the notebook: the file on disk is older than code the kernel ran ("" when not)."""
    note: str
    """grade_one's note (an untouched starter, which file of a folder), or ""."""
    lead: str
    """"Public cases: 3 of 53 points checked, 35 hidden cases at grading time"."""
    passed: str
    """"Passed 2 of 3 public cases (2 / 3 points)"."""
    hidden: str
    """How many hidden cases run at grading time; this is not the grade."""
    function: str
    """The function checked, "" for the whole notebook."""


def _scope_selector(sel: str) -> str:
    sel = sel.strip()
    if sel in (":root", "html", "body"):
        return SCOPE
    if sel.startswith(("html ", "body ")):
        return f"{SCOPE} {sel.split(' ', 1)[1]}"
    return f"{SCOPE} {sel}"


def scope_css(css: str) -> str:
    """Our own stylesheet (trusted, no strings or comments with braces) with every rule limited
    to ``.grader-check``; ``@media`` blocks are scoped inside."""
    out, i = [], 0
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    while True:
        brace = css.find("{", i)
        if brace < 0:
            break
        head = css[i:brace].strip()
        depth, j = 1, brace + 1
        while depth:
            depth += {"{": 1, "}": -1}.get(css[j], 0)
            j += 1
        body = css[brace + 1: j - 1]
        if head.startswith("@"):
            out.append(f"{head} {{\n{scope_css(body)}}}\n")
        else:
            out.append(", ".join(_scope_selector(s) for s in head.split(",")) + f" {{{body}}}\n")
        i = j
    return "".join(out)


@functools.lru_cache(maxsize=1)
def stylesheet() -> Markup:
    env = environment()
    sources = [env.loader.get_source(env, name)[0] for name in ("common.css", "report.css")]  # type: ignore[union-attr]
    # rem would follow the notebook page's root size (classic Notebook's Bootstrap sets 10px): em
    # follows the output's own 15px.
    css = re.sub(r"(\d)rem\b", r"\1em", "".join(scope_css(s) for s in sources)) + _INLINE_CSS
    if "</" in css:
        raise ValueError("the inline stylesheet must not contain '</'")
    return Markup(css)


def render_inline(n: InlineView, v: ReportView, lang: str = DEFAULT) -> str:
    """The self-check's cell output in `lang`: header, score line, failing cases with evidence and
    heatmaps, passed cases, hidden-case count."""
    return environment(lang).get_template("notebook_check.html").render(
        n=n, v=v, css=stylesheet(), load_explanation=translate(explanation("load-error"), lang))

"""The notebook self-check's output inside each front end a student uses, and the report on a phone,
in Debian's Chromium: a Chinese evidence label never wraps a character per line, headings keep a
readable size where the page's root font is small, no word of the overview table is broken across
lines and nothing overflows at 390 px, and every outcome icon has a font here.

Each front end is mimicked by the rules of its own that reached our output (written here from
what they do, not copied): JupyterLab floats every ``dt`` of an output at 20 % of its list's width;
classic Notebook's Bootstrap sets the root font to 10px; VS Code shows outputs in a narrow dark
webview with a 13px font.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from grader.report import write_submission
from grader.report.inline import InlineView, render_inline
from grader.report.view import OUTCOME_LABELS, build_view
from grader.results import report_from_dict

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # full tier: a real Chromium

RESULT = Path(__file__).resolve().parents[1] / "data" / "results" / "ada_zero_fill.json"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]

FRONT_ENDS = {
    "jupyterlab": (1100, "",
                   ".jp-OutputArea-output dl, .jp-OutputArea-output dt, .jp-OutputArea-output dd { display: block; }"
                   ".jp-OutputArea-output dl { width: 100%; overflow: hidden; padding: 0; margin: 0; }"
                   ".jp-OutputArea-output dt { font-weight: bold; float: left; width: 20%; padding: 0; margin: 0; }"
                   ".jp-OutputArea-output dd { float: left; width: 80%; padding: 0; margin: 0; }",
                   '<div class="jp-OutputArea-output jp-RenderedHTMLCommon">{}</div>'),
    "classic": (1100, "", "html { font-size: 10px; } body { font-size: 13px; line-height: 1.42857; }"
                ".rendered_html h2 { font-size: 157.1%; }",
                '<div class="output_html rendered_html output_subarea">{}</div>'),
    "vscode": (620, "", "body { margin: 0; padding: 0 8px; background: #1e1e1e; color: #d4d4d4; font-size: 13px; }",
               '<div class="output_container" style="overflow-x: auto">{}</div>'),
    "phone": (390, '<meta name="viewport" content="width=device-width, initial-scale=1">', "", "{}"),
}

MEASURE = """() => {
  const lines = el => { const r = document.createRange(); r.selectNodeContents(el);
    return new Set([...r.getClientRects()].filter(x => x.width > 0).map(x => Math.round(x.top))).size; };
  const broken = [];
  for (const cell of document.querySelectorAll('table.cases td, dl.facts dt')) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const m of node.data.matchAll(/[A-Za-z0-9_.']{2,}/g)) {
        const r = document.createRange(); r.setStart(node, m.index); r.setEnd(node, m.index + m[0].length);
        if (new Set([...r.getClientRects()].map(x => Math.round(x.top))).size > 1) broken.push(m[0]);
      }
    }
  }
  const h2 = [...document.querySelectorAll('.grader-check h2, main h2, body > h2, section h2')];
  return {
    labels: [...document.querySelectorAll('dl.facts dt')].map(d => [d.textContent, lines(d)]),
    broken,
    h2: h2.map(h => parseFloat(getComputedStyle(h).fontSize)),
    overflow: document.documentElement.scrollWidth - document.documentElement.clientWidth,
  };
}"""


def _chromium() -> str | None:
    for candidate in (os.environ.get("GRADER_CHROMIUM"), shutil.which("chromium"), "/usr/bin/chromium"):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    why = "Chromium is not installed" if _chromium() is None else ""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        why = why or "the playwright package is not installed"
    if why:
        if os.environ.get("GRADER_REQUIRE_BROWSER") == "1":
            pytest.fail(f"browser tests are required (GRADER_REQUIRE_BROWSER=1) but {why}")
        pytest.skip(why)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=_chromium(), args=FLAGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def zh_report():
    data = json.loads(RESULT.read_text(encoding="utf-8"))
    return report_from_dict({**data, "lang": "zh-CN"})


def _fragment(report) -> str:
    n = InlineView(title="自检 attention.ipynb 中的 masked_attention", graded_file="评分的是 10:00:00 保存的 attention.ipynb",
                   warning="", note="", lead="masked_attention 的公开用例检查了总分 56 分中的 8 分",
                   passed="通过了 9 个公开用例中的 2 个（2 / 8 分）", hidden="正式评分时还会运行 36 个隐藏用例",
                   function="masked_attention")
    return render_inline(n, build_view(report, uid_prefix="t-"), "zh-CN")


def _open(browser, path: Path, width: int):
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto(path.resolve().as_uri())
    page.wait_for_load_state("load")
    return page


def _shots() -> Path | None:
    where = os.environ.get("GRADER_SCREENSHOT_DIR")
    return Path(where) if where else None


@pytest.mark.parametrize("front_end", sorted(FRONT_ENDS))
def test_the_notebook_output_reads_well_in_each_front_end(browser, zh_report, tmp_path, front_end):
    width, head, css, wrap = FRONT_ENDS[front_end]
    page_file = tmp_path / f"{front_end}.html"
    page_file.write_text(f"<!doctype html><html lang=zh-CN><head><meta charset=utf-8>{head}<style>{css}</style>"
                         f"</head><body>{wrap.format(_fragment(zh_report))}</body></html>", encoding="utf-8")
    page = _open(browser, page_file, width)
    seen = page.evaluate(MEASURE)
    (tmp_path / "shot.png").write_bytes(page.locator(".grader-check").screenshot())
    if _shots():
        shutil.copy(tmp_path / "shot.png", _shots() / f"frontend-{front_end}.png")
    page.close()
    assert seen["labels"], "the failing case shows its evidence"
    assert [label for label, lines in seen["labels"] if lines > 2] == [], seen["labels"]
    assert seen["broken"] == []
    assert seen["h2"] and min(seen["h2"]) >= 14, seen["h2"]
    assert seen["overflow"] <= 0


@pytest.mark.parametrize("lang", ["zh-CN", "en"])
def test_the_report_on_a_phone_breaks_no_word_and_does_not_overflow(browser, zh_report, tmp_path, lang):
    report = report_from_dict({**json.loads(RESULT.read_text(encoding="utf-8")), "lang": lang})
    path = write_submission(report, tmp_path / "report.html")
    page = _open(browser, path, 390)
    seen = page.evaluate(MEASURE)
    table = page.locator("table.cases")
    assert table.is_visible()
    (tmp_path / "table.png").write_bytes(table.screenshot())
    if _shots():
        shutil.copy(tmp_path / "table.png", _shots() / f"report-390-{lang}.png")
    page.close()
    assert seen["broken"] == []
    assert [label for label, lines in seen["labels"] if lines > 2] == []
    assert seen["overflow"] <= 0


def test_every_outcome_icon_has_a_font_here():
    """⏱ has no glyph but in a colour emoji font (none on a plain Debian with Noto CJK): a box."""
    if shutil.which("fc-list") is None:
        pytest.skip("fontconfig's fc-list is not installed")
    for icon, _ in OUTCOME_LABELS.values():
        found = subprocess.run(["fc-list", f":charset={ord(icon):x}", "family"], capture_output=True, text=True)
        assert found.stdout.strip(), f"no installed font draws {icon!r} (U+{ord(icon):04X})"

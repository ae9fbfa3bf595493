"""The mask explorer in a real headless Chromium: in the reports of a real grading run (a 0 fill, a
finite fill that leaves an empty row uniform, a top-left causal mask) and in a kit's explore.html.

What it must do: show the reference's weights for the masks switched on (checked against
``reference.oracle_attention`` on the case's own inputs), change the matrix with the head, say the
tutorial's points on the student's data, work from the keyboard, fit a 390 px screen, speak the
report's language, and pass axe-core (``GRADER_AXE``: the path of axe.min.js; .ci/run installs
it with npm). Skips without Chromium or Playwright, except with GRADER_REQUIRE_BROWSER=1 (CI).
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import pytest
import torch

import reference
from grader.assignment.spec import load_assignment
from grader.authoring import explore_page
from grader.grading.engine import Engine
from grader.report import write_all
from grader.results import report_from_dict

import test_browser_report as shared
from test_browser_report import OVERFLOW, Watched

pytestmark = [pytest.mark.browser, pytest.mark.slow]
browser = shared.browser  # the same headless Chromium fixture as the report's browser tests


def _unavailable(reason: str):
    if os.environ.get("GRADER_REQUIRE_BROWSER") == "1":
        pytest.fail(f"browser tests are required (GRADER_REQUIRE_BROWSER=1) but {reason}")
    pytest.skip(reason)

ROOT = Path(__file__).resolve().parents[2]
BUGGY = ROOT / "submissions" / "masked-attention" / "buggy"
SAMPLES = ("zero_fill", "tutorial_001_finfo_min", "causal_top_left")


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[str, Path]:
    """One real grading run in English, its results re-rendered in Chinese: {"en": site, "zh": site}."""
    from click.testing import CliRunner

    from grader.cli.app import main

    subs = tmp_path_factory.mktemp("explorer-subs")
    for name in SAMPLES:
        shutil.copy(BUGGY / f"{name}.py", subs / f"{name}.py")
    out = tmp_path_factory.mktemp("explorer-site")
    result = CliRunner().invoke(main, ["grade", str(subs), "-a", str(ROOT / "assignments" / "masked-attention"),
                                       "-o", str(out), "-j", "1"])
    assert result.exit_code == 0, result.output
    zh = tmp_path_factory.mktemp("explorer-site-zh")
    reports = [report_from_dict(json.loads(p.read_text("utf-8"))) for p in sorted((out / "results").glob("*.json"))]
    write_all(reports, zh, lang="zh-CN", write_results=False)
    return {"en": out, "zh": zh}


@pytest.fixture(scope="module")
def inputs():
    """The public cases' own inputs, as the grader builds them."""
    engine = Engine(load_assignment(ROOT / "assignments" / "masked-attention"), None, public_only=True)  # type: ignore[arg-type]
    return {i.id: engine.setup(i).inputs for i in engine.instances}


def _value(text: str) -> float:
    t = text.replace("−", "-").replace("✗", "").strip()
    if t in ("NaN", "?"):
        return math.nan
    if t == "-∞":
        return -math.inf
    return float(t.replace("-.", "-0.") if t.startswith("-.") else ("0" + t if t.startswith(".") else t))


def _table(section, kind: str) -> list[list[float]]:
    rows = section.locator(f".ex-table.{kind} tbody tr")
    return [[_value(t) for t in rows.nth(i).locator("td:not(.sum)").all_inner_texts()] for i in range(rows.count())]


def _close(shown: list[list[float]], want: torch.Tensor, tol: float = 0.006) -> bool:
    w = want.tolist()
    return len(shown) == len(w) and all(
        len(a) == len(b) and all((math.isnan(x) and math.isnan(y)) or abs(x - y) <= tol for x, y in zip(a, b))
        for a, b in zip(shown, w))


def _explorer(page, case_id: str):
    section = page.locator(f'article[data-case-id="{case_id}"] section[data-explorer]')
    assert section.is_visible()
    return section


def _pressed(section, what: str) -> int:
    return int(section.locator(f"button[data-{what}][aria-pressed=true]").get_attribute(f"data-{what}"))


def test_toggling_the_causal_mask_shows_the_references_weights_for_that_mask(browser, graded, inputs, tmp_path):
    _, context = browser
    w = Watched(context, graded["en"] / "zero_fill.html")
    ex = _explorer(w.page, "attention_causal_small")
    i = inputs["attention_causal_small"]
    q, k, v, mask = (i[n].double() for n in ("q", "k", "v")), None, None, i["mask"]
    q, k, v = q
    h = _pressed(ex, "head")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    yours = torch.softmax(scores.masked_fill(~mask, 0.0), -1)  # what zero_fill.py does
    assert _close(_table(ex, "reference"), reference.oracle_attention(q, k, v, mask)[1][0, h])
    assert _close(_table(ex, "mine"), yours[0, h])
    leaks = int(((yours - reference.oracle_attention(q, k, v, mask)[1])[0, h].abs() > 1e-3).sum())
    assert ex.locator(".ex-table.mine td.differs").count() == leaks > 0
    assert "the masked cells hold 0, more than every visible score" in ex.locator(".ex-status").inner_text()
    masked_scores = [row for row in _table(ex, "scores")]
    assert masked_scores[0][1:] == [0.0] * 4  # the student's fill, where the reference has −∞
    ex.screenshot(path=str(tmp_path / "zero_fill_explorer.png"))

    ex.get_by_label("causal mask (future keys hidden)").uncheck()
    assert _close(_table(ex, "reference"), reference.oracle_attention(q, k, v, None)[1][0, h])
    assert ex.locator(".ex-table.mine td.differs").count() == 0
    assert ex.locator(".ex-status").inner_text().startswith("These weights match the reference's")
    ex.get_by_label("causal mask (future keys hidden)").check()
    assert _close(_table(ex, "reference"), reference.oracle_attention(q, k, v, mask)[1][0, h])

    before = _table(ex, "scores")
    other = 1 - h
    ex.locator(f"button[data-head='{other}']").click()
    after = _table(ex, "scores")
    assert after != before
    shown = [[x if k <= r else math.nan for k, x in enumerate(row)] for r, row in enumerate(after)]
    want = torch.tril(scores[0, other]) + torch.triu(torch.full_like(scores[0, other], math.nan), 1)
    assert _close(shown, want, tol=0.006)
    assert _close(_table(ex, "reference"), reference.oracle_attention(q, k, v, mask)[1][0, other])
    w.assert_quiet()


def test_a_finite_fill_leaves_the_empty_row_uniform_and_minus_inf_makes_it_nan(browser, graded):
    _, context = browser
    w = Watched(context, graded["en"] / "tutorial_001_finfo_min.html")
    ex = _explorer(w.page, "attention_empty_row")
    assert _table(ex, "mine")[1] == [0.2] * 5 and _table(ex, "reference")[1] == [0.0] * 5
    assert "each key gets 1/5: the mean of v" in ex.locator(".ex-status").inner_text()
    assert "min" in ex.locator(".ex-table.scores tbody tr").nth(1).inner_text()
    ex.get_by_label("−∞, without a guard").check()
    assert all(math.isnan(x) for x in _table(ex, "mine")[1])
    assert "the softmax is 0/0 and gives NaN" in ex.locator(".ex-status").inner_text()
    w.assert_quiet()


def test_a_top_left_mask_with_fewer_queries_than_keys(browser, graded):
    _, context = browser
    w = Watched(context, graded["en"] / "causal_top_left.html")
    ex = _explorer(w.page, "causal_mask_offset[2 of 5]")
    mine, ref = _table(ex, "mine"), _table(ex, "reference")
    assert mine[0] == [1.0, 0.0, 0.0, 0.0, 0.0]  # top-left: query 0 sees key 0 only
    assert [x > 0 for x in ref[0]] == [True, True, True, True, False]  # bottom-right: keys 0 to 3
    status = ex.locator(".ex-status").inner_text()
    assert "keys visible with your mask: 1; with the reference's: 4" in status and "keys 0 to 3" in status
    w.assert_quiet()


def test_the_explorer_works_from_the_keyboard(browser, graded):
    _, context = browser
    w = Watched(context, graded["en"] / "zero_fill.html")
    page = w.page
    ex = _explorer(page, "attention_causal_small")
    box = ex.get_by_label("causal mask (future keys hidden)")
    box.focus()
    order = []
    for _ in range(12):
        order.append(page.evaluate("""() => { const e = document.activeElement;
            return e.tagName + ':' + (e.type || '') + ':' + (e.getAttribute('data-head') || e.getAttribute('aria-label') || e.id); }"""))
        page.keyboard.press("Tab")
    kinds = [o.split(":")[0] + ":" + o.split(":")[1] for o in order]
    assert kinds[:4] == ["INPUT:checkbox", "BUTTON:button", "BUTTON:button", "INPUT:radio"]
    assert "DIV:" in kinds[4]  # then the tables' scrolling regions and their row buttons
    box.focus()
    page.keyboard.press("Space")
    assert not box.is_checked() and ex.locator(".ex-table.mine td.differs").count() == 0
    page.keyboard.press("Space")
    assert box.is_checked()
    row = ex.locator(".ex-table.scores tbody tr").nth(2).locator("button")
    row.focus()
    page.keyboard.press("Enter")
    assert ex.locator(".ex-detail h5").inner_text() == "Row 2"
    assert row.get_attribute("aria-pressed") == "true"
    radio = ex.get_by_label("0", exact=True)
    ex.get_by_label("what your code uses: 0").focus()
    for _ in range(4):
        page.keyboard.press("ArrowDown")
    assert radio.is_checked()
    w.assert_quiet()


def _axe_source() -> str:
    path = os.environ.get("GRADER_AXE") or str(ROOT / ".ci" / "node_modules" / "axe-core" / "axe.min.js")
    if not Path(path).is_file():
        _unavailable(f"axe-core is not installed ({path}; npm install axe-core, or set GRADER_AXE)")
    return Path(path).read_text("utf-8")


def _axe(page, selector: str) -> list[str]:
    """axe-core's WCAG 2.1 A/AA rules on the elements matching `selector`: the violations, described."""
    page.evaluate(_axe_source())  # DevTools evaluation: not subject to the page's CSP
    result = page.evaluate("""async (sel) => {
        const r = await axe.run({include: Array.from(document.querySelectorAll(sel)).map(e => [e])},
                                {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice']}});
        return r.violations.map(v => v.id + ': ' + v.nodes.map(n => n.target.join(' ')).slice(0, 3).join(', '));
    }""", selector)
    return result


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("name", SAMPLES)
def test_explorers_pass_axe_and_fit_a_phone(browser, graded, name, lang, tmp_path):
    _, context = browser
    w = Watched(context, graded[lang] / f"{name}.html")
    page = w.page
    assert page.locator("section[data-explorer]").count() >= 1
    assert _axe(page, "section[data-explorer]") == []
    page.set_viewport_size({"width": 390, "height": 900})
    assert page.evaluate(OVERFLOW) == []
    for box in page.locator("section[data-explorer] .ex-table").all():
        if box.is_visible():
            b = box.bounding_box()
            assert b["x"] >= 0 and b["x"] + b["width"] <= 390  # a wide table scrolls inside its own box
    if lang == "zh":
        assert page.locator("section[data-explorer] legend").first.inner_text() == "掩码"
    page.locator("section[data-explorer]").first.screenshot(path=str(tmp_path / f"{name}_{lang}_390.png"))
    w.assert_quiet()


@pytest.fixture(scope="module")
def kit_pages(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("explore-kit")
    pages = {}
    for lang in ("en", "zh-CN"):
        (out / lang).mkdir()
        pages[lang] = explore_page.write(out / lang, lang)
    return pages


def test_the_kit_page_runs_the_tutorials_experiment_on_the_references_numbers(browser, kit_pages, tmp_path):
    _, context = browser
    w = Watched(context, kit_pages["en"])
    page = w.page
    tutorial, chunk, padded = (page.locator("section[data-explorer]").nth(i) for i in range(3))
    examples = explore_page.examples()
    assert tutorial.locator(".ex-table.scores thead th").all_inner_texts()[1:] == ["我", "爱", "猫"]
    ex = examples[0]
    v = torch.zeros(*ex.k.shape[:-1], 1, dtype=torch.float64)
    assert _close(_table(tutorial, "reference"), reference.oracle_attention(ex.q, ex.k, v, ex.keep)[1][0, 0])
    head0 = _table(tutorial, "scores")
    tutorial.locator("button[data-head='1']").click()
    assert _table(tutorial, "scores") != head0
    # Same forbidden cells in both heads: the mask is a rule, the head a learned relation.
    assert [[math.isinf(x) for x in r] for r in _table(tutorial, "scores")] == [[math.isinf(x) for x in r] for r in head0]
    tutorial.get_by_label("causal mask (future keys hidden)").uncheck()
    assert _close(_table(tutorial, "reference"), reference.oracle_attention(ex.q, ex.k, v, None)[1][0, 1])

    chunk.get_by_label("0", exact=True).check()
    row0 = _table(chunk, "mine")[0]
    assert row0[4] == max(row0) and chunk.locator(".ex-table.mine td.differs").count() > 0
    assert "the masked cells hold 0, more than every visible score" in chunk.locator(".ex-status").inner_text()

    padded.locator("button[data-batch='1']").click()
    assert _table(padded, "reference")[0] == [0.0] * 4
    padded.get_by_label("−∞, without a guard").check()
    assert all(math.isnan(x) for x in _table(padded, "mine")[0])
    padded.get_by_label("padding mask (padded keys hidden)").uncheck()
    assert not any(math.isnan(x) for x in _table(padded, "mine")[0])  # causal alone: query 0 sees key 0
    assert _axe(page, "body") == []
    page.screenshot(path=str(tmp_path / "explore_en.png"), full_page=True)
    w.assert_quiet()


def test_the_kit_page_in_chinese_fits_a_phone(browser, kit_pages, tmp_path):
    _, context = browser
    w = Watched(context, kit_pages["zh-CN"])
    page = w.page
    page.set_viewport_size({"width": 390, "height": 900})
    assert page.get_attribute("html", "lang") == "zh-CN"
    assert page.locator("h1").inner_text() == "一步一步看掩码：一个实验"
    assert page.locator("section[data-explorer]").first.get_by_label("因果掩码（屏蔽未来的键）").is_checked()
    assert page.evaluate(OVERFLOW) == []
    assert _axe(page, "body") == []
    page.screenshot(path=str(tmp_path / "explore_zh_390.png"), full_page=True)
    w.assert_quiet()

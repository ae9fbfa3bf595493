"""The report and the dashboard in a real headless Chromium (Debian's, never a downloaded one).

Opened from disk (file://): no console errors, no request but the page itself, the heatmaps
drawn, the interactive bits working, and readable with JavaScript off. Screenshots are kept
under each test's tmp_path. Skips without Chromium or Playwright, except with
GRADER_REQUIRE_BROWSER=1 (CI), where that is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from grader.report import write_all
from grader.results import report_from_dict

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # full tier: a real Chromium

DATA = Path(__file__).resolve().parents[1] / "data" / "results"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _chromium() -> str | None:
    for candidate in (os.environ.get("GRADER_CHROMIUM"), shutil.which("chromium"), "/usr/bin/chromium"):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def _unavailable(reason: str):
    if os.environ.get("GRADER_REQUIRE_BROWSER") == "1":
        pytest.fail(f"browser tests are required (GRADER_REQUIRE_BROWSER=1) but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    reports = [report_from_dict(json.loads(p.read_text(encoding="utf-8"))) for p in sorted(DATA.glob("*.json"))]
    out = tmp_path_factory.mktemp("site")
    write_all(reports, out, run={"date": "2026-11-29T10:05:00Z"})
    return out


def _launch(p, user_dir: Path, **options):
    # Playwright passes user_data_dir as Chromium's --user-data-dir; Debian's binary, nothing downloaded.
    return p.chromium.launch_persistent_context(str(user_dir), executable_path=_chromium(), headless=True,
                                                args=FLAGS, viewport={"width": 1200, "height": 900}, **options)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if _chromium() is None:
        _unavailable("Chromium is not installed (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is not installed (pip install playwright; no browser download)")
    with sync_playwright() as p:
        context = _launch(p, tmp_path_factory.mktemp("chromium-profile"))
        try:
            yield p, context
        finally:
            context.close()


class Watched:
    """A page that records console errors, page errors and every request it makes."""

    def __init__(self, context, path: Path):
        self.page = context.new_page()
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.url = path.resolve().as_uri()
        self.page.goto(self.url)
        self.page.wait_for_load_state("load")

    def assert_quiet(self):
        assert self.errors == []
        assert self.requests == [self.url]


def test_zero_fill_report_heatmaps_switch_and_toggle(browser, site, tmp_path):
    _, context = browser
    w = Watched(context, site / "ada_zero_fill.html")
    page = w.page
    case = page.locator('article[data-case-id="masked_attention_causal"]')
    figures = case.locator("figure.hm-figure")
    assert figures.count() == 2
    assert figures.nth(0).locator("rect.cell").count() == 75
    assert figures.nth(0).locator("svg[data-role=actual] rect.leak").count() == 10
    assert figures.nth(0).is_visible() and not figures.nth(1).is_visible()  # JS collapsed to one slice
    case.get_by_role("button", name="batch 0, head 1").click()
    assert figures.nth(1).is_visible() and not figures.nth(0).is_visible()
    case.get_by_role("button", name="batch 0, head 0").click()
    overlay = figures.nth(0).locator("rect.overlay").first
    assert overlay.is_visible()
    case.get_by_label("hatch the cells a query may not see (future / padding)").uncheck()
    assert not overlay.is_visible()
    case.get_by_label("hatch the cells a query may not see (future / padding)").check()
    page.emulate_media(media="print")  # printed, every slice shows and the controls go
    assert figures.nth(0).is_visible() and figures.nth(1).is_visible()
    assert not case.locator(".hm-controls").is_visible()
    page.emulate_media(media="screen")
    # The hidden case's details are absent from the page, not merely hidden.
    assert "SECRET" not in page.content()
    page.screenshot(path=str(tmp_path / "zero_fill_report.png"), full_page=True)
    case.screenshot(path=str(tmp_path / "zero_fill_case.png"))
    w.assert_quiet()


def test_mask_after_softmax_report_shows_row_sums(browser, site, tmp_path):
    _, context = browser
    w = Watched(context, site / "ben_after_softmax.html")
    case = w.page.locator('article[data-case-id="masked_attention_causal"]')
    sums = case.locator("figure.hm-figure").nth(0).locator("svg[data-role=actual] text.rowsum")
    assert sums.all_text_contents() == ["Σ .08 ✗", "Σ .74 ✗", "Σ .86 ✗", "Σ .45 ✗", "Σ 1"]
    box = case.locator("figure.hm-figure").nth(0).locator("svg[data-role=actual]").bounding_box()
    assert box["width"] > 200 and box["height"] > 200  # drawn at a readable size
    case.screenshot(path=str(tmp_path / "mask_after_softmax_case.png"))
    w.assert_quiet()


def test_noisy_output_renders_as_text(browser, site):
    _, context = browser
    w = Watched(context, site / "cy_noisy.html")
    assert "<script>alert(1)</script>" in w.page.locator("pre.stdout").inner_text()
    assert w.page.locator("script").count() == 1
    w.assert_quiet()


def test_dashboard_sorts_filters_and_links(browser, site, tmp_path):
    _, context = browser
    w = Watched(context, site / "index.html")
    page = w.page

    def first_column():
        return [t.strip() for t in page.locator("#students tbody tr:visible td:first-child").all_inner_texts()]

    assert first_column() == ["ada_zero_fill", "ben_after_softmax", "cy_noisy", "dee_perfect", "eve_syntax"]
    page.get_by_role("button", name="Score").click()
    assert first_column()[0] == "eve_syntax" and first_column()[-1] == "dee_perfect"
    page.get_by_role("button", name="Score").click()
    assert first_column()[0] == "dee_perfect"
    page.get_by_label("Filter:").fill("mask-after")
    assert first_column() == ["ben_after_softmax"]
    page.get_by_label("Filter:").fill("")
    page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
    w.assert_quiet()
    page.get_by_role("link", name="cy_noisy").click()
    page.wait_for_load_state("load")
    assert page.url == (site / "cy_noisy.html").resolve().as_uri()


def test_report_is_complete_without_javascript(browser, site, tmp_path):
    p, _ = browser
    context = _launch(p, tmp_path / "profile-nojs", java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto((site / "ada_zero_fill.html").resolve().as_uri())
        figures = page.locator('article[data-case-id="masked_attention_causal"] figure.hm-figure')
        assert figures.count() == 2 and figures.nth(0).is_visible() and figures.nth(1).is_visible()
        assert page.locator(".hm-controls").first.is_hidden()  # no dead buttons
        assert page.locator("rect.cell:visible").count() == 150
        page.screenshot(path=str(tmp_path / "no_js.png"), full_page=True)
    finally:
        context.close()


# --- Chinese pages ---------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
CJK_FONT = "Noto Sans CJK SC"  # what .ci/run installs (Debian's fonts-noto-cjk); the page names it, never loads it


@pytest.fixture(scope="module")
def site_zh(tmp_path_factory) -> Path:
    """A real grading run in Chinese (pages and dashboard): a failing student, a passing one."""
    from click.testing import CliRunner

    from grader.cli.app import main

    subs = tmp_path_factory.mktemp("zh-subs")
    shutil.copy(ROOT / "submissions" / "masked-attention" / "buggy" / "zero_fill.py", subs / "张三.py")
    shutil.copy(ROOT / "submissions" / "masked-attention" / "buggy" / "mask_after_softmax.py", subs / "li.py")
    out = tmp_path_factory.mktemp("zh-site")
    result = CliRunner().invoke(main, ["grade", str(subs), "-a", str(ROOT / "assignments" / "masked-attention"),
                                       "-o", str(out), "-j", "1", "--lang", "zh-CN", "--dashboard-lang", "zh-CN"])
    assert result.exit_code == 0, result.output
    return out


OVERFLOW = """() => {
  const wide = (el) => el.scrollWidth > el.clientWidth + 1;
  const out = [];
  if (document.documentElement.scrollWidth > document.documentElement.clientWidth + 1) out.push('page');
  for (const el of document.querySelectorAll('td, th, figcaption, .panel-caption, dd, h1, h2, h3, .legend span')) {
    if (wide(el)) out.push(el.tagName + ': ' + el.textContent.trim().slice(0, 60));
  }
  return out;
}"""


def _cjk_font_installed() -> bool:
    import subprocess

    try:
        return CJK_FONT in subprocess.run(["fc-list"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return False


@pytest.mark.parametrize("width", [1200, 390])
def test_chinese_report_holds_its_layout(browser, site_zh, tmp_path, width):
    _, context = browser
    [path] = [p for p in site_zh.glob("*.html") if p.name.startswith("张三")]
    w = Watched(context, path)
    page = w.page
    page.set_viewport_size({"width": width, "height": 900})
    assert page.get_attribute("html", "lang") == "zh-CN"
    assert page.locator("h1").inner_text() == "张三 的反馈"
    case = page.locator('article[data-case-id="attention_causal_small"]')
    assert "被屏蔽的位置分到了注意力权重" in case.inner_text()
    assert case.locator("figure.hm-figure").first.locator("svg[data-role=actual] rect.leak").count() > 0
    assert case.get_by_label("给查询看不到的位置画斜线（未来位置 / 填充）").is_checked()  # the script's words, translated
    assert page.evaluate(OVERFLOW) == []  # on a phone too: heatmaps shrink, long lines wrap
    family = page.evaluate("getComputedStyle(document.body).fontFamily")
    assert CJK_FONT in family and "Microsoft YaHei" in family and "PingFang SC" in family
    if _cjk_font_installed():
        assert page.evaluate(f"document.fonts.check('16px \"{CJK_FONT}\"', '注意力')")
    page.screenshot(path=str(tmp_path / f"zh_report_{width}.png"), full_page=True)
    w.assert_quiet()


def test_chinese_dashboard_holds_its_layout(browser, site_zh, tmp_path):
    _, context = browser
    w = Watched(context, site_zh / "index.html")
    page = w.page
    assert page.get_attribute("html", "lang") == "zh-CN"
    assert "最常见的错误" in page.locator("#concepts").inner_text()
    assert page.locator("#students a", has_text="张三").count() == 1
    assert page.evaluate(OVERFLOW) == []
    page.screenshot(path=str(tmp_path / "zh_dashboard.png"), full_page=True)
    w.assert_quiet()

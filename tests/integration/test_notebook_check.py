"""grader.notebook in a real Jupyter kernel (nbclient): the kit's starter notebook with its check
cells, filled in once with a correct solution and once with the zero-fill sample's functions.

One kernel per notebook, executed once per module; the tests read the cells' outputs. The
rendered output of the zero-fill notebook's masked_attention check is screenshot in headless
Chromium (kept under the test's tmp_path, like tests/integration/test_browser_report.py).
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # full tier: a real Jupyter kernel

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "submissions" / "masked-attention"
ENTRY_POINTS = ("causal_mask", "padding_mask", "combine_masks", "masked_attention")

ZERO_FILL_FAILS = ["attention_causal_small", "attention_empty_row", "attention_half[float16]",
                   "attention_half[bfloat16]", "attention_large_scores", "attention_twice", "attention_value_size"]
"""The public cases a 0 fill fails: every one that masks a score."""


def _counts() -> dict:
    """What the page says about the assignment as it is now: public cases and points, hidden ones."""
    from grader.assignment.spec import load_assignment

    a = load_assignment(ROOT / "assignments" / "masked-attention")
    public = a.instances(public_only=True)

    def of(function: str) -> tuple[int, float]:
        mine = [i for i in public if function in i.case.uses]
        return len(mine), sum(i.points for i in mine)

    return {"n": len(public), "points": a.possible(public_only=True), "total": a.possible(),
            "hidden": sum(i.case.hidden for i in a.instances()),
            "hidden_points": a.possible() - a.possible(public_only=True),
            "causal_mask": of("causal_mask"), "masked_attention": of("masked_attention"),
            "zero_fill_lost": sum(i.points for i in public if i.id in ZERO_FILL_FAILS)}


C = _counts()


def _functions(sample: Path) -> dict[str, str]:
    src = sample.read_text(encoding="utf-8")
    return {n.name: ast.get_source_segment(src, n) for n in ast.parse(src).body if isinstance(n, ast.FunctionDef)}


def _kit_notebook(tmp: Path, sample: Path, lang: str | None = None) -> Path:
    """A fresh kit whose starter notebook has the sample's functions in place of the stubs."""
    from grader.assignment.spec import load_assignment
    from grader.authoring.release import release

    kit = release(load_assignment("masked-attention"), tmp, lang=lang).dir
    path = kit / "attention.ipynb"
    nb = nbformat.read(path, as_version=4)
    funcs = _functions(sample)
    for cell in nb.cells:
        m = re.match(r"def (\w+)", cell.source) if cell.cell_type == "code" else None
        if m and m.group(1) in ENTRY_POINTS:
            cell.source = funcs[m.group(1)]
    # A cell run but never saved (as if edited after the last save), then a check.
    nb.cells.append(nbformat.v4.new_code_cell(
        'try:\n    get_ipython().run_cell("unsaved_edit = 1")\nexcept NameError:  # graded: no IPython\n    pass'))
    nb.cells.append(nbformat.v4.new_code_cell('stale = notebook.check("combine_masks")\nstale'))
    nbformat.write(nb, path)
    return path


def _execute(path: Path) -> dict[str, dict]:
    """Run every cell in a new kernel started in the kit folder; outputs of each check cell by its
    argument ("" for notebook.check())."""
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(nb, timeout=180, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}}).execute()
    checks: dict[str, dict] = {}
    for cell in nb.cells:
        m = re.fullmatch(r'notebook\.check\((?:"(\w+)")?\)', cell.source.strip())
        if cell.cell_type == "code" and m:
            (out,) = [o for o in cell.outputs if o.output_type == "execute_result"]
            checks[m.group(1) or ""] = out.data
        if cell.cell_type == "code" and cell.source.startswith("stale = "):
            checks["stale"] = [o for o in cell.outputs if o.output_type == "execute_result"][0].data
    assert not [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    return checks


@pytest.fixture(scope="module")
def correct(tmp_path_factory) -> dict[str, dict]:
    return _execute(_kit_notebook(tmp_path_factory.mktemp("kit-correct"), SAMPLES / "correct" / "einsum.py"))


@pytest.fixture(scope="module")
def zero_fill(tmp_path_factory) -> dict[str, dict]:
    return _execute(_kit_notebook(tmp_path_factory.mktemp("kit-zero-fill"), SAMPLES / "buggy" / "zero_fill.py"))


def test_correct_solution_passes_every_check_cell(correct):
    html = {name: out["text/html"] for name, out in correct.items() if name != "stale"}
    assert set(html) == set(ENTRY_POINTS) | {""}
    assert f"Passed {C['n']} of {C['n']} public cases ({C['points']:g} / {C['points']:g} points)" in html[""]
    assert (f"Public cases: {C['points']:g} of {C['total']:g} points checked, {C['hidden']} hidden cases at "
            "grading time") in html[""]
    assert f"Passed {C['causal_mask'][0]} of {C['causal_mask'][0]} public cases" in html["causal_mask"]
    assert f"Public cases for causal_mask: {C['causal_mask'][1]:g} of {C['total']:g} points checked" in html["causal_mask"]
    for name, h in html.items():
        assert 'class="case' not in h and "banner stale" not in h and "Code that raised" not in h, name
        assert f"{C['hidden']} hidden cases will run at grading time (worth {C['hidden_points']:g} more points)" in h
        assert "found: the only notebook in this folder" in h
    assert f"Passed {C['causal_mask'][0]} of {C['causal_mask'][0]} public cases" in correct["causal_mask"]["text/plain"]


def test_zero_fill_check_cell_shows_the_failing_case_its_concept_and_the_heatmap(zero_fill):
    out = zero_fill["masked_attention"]
    h = out["text/html"]
    assert 'data-grader-check="masked_attention"' in h
    assert (f"Public cases for masked_attention: {C['masked_attention'][1]:g} of {C['total']:g} points checked, "
            f"{C['hidden']} hidden cases at grading time") in h
    n, points = C["masked_attention"]
    passed = n - len(ZERO_FILL_FAILS)  # every case a 0 fill fails calls masked_attention
    failed = re.findall(r'<article class="case failed"[^>]*>.*?data-case-id="([^"]+)"', h, flags=re.S)
    assert f"Passed {passed} of {n} public cases ({points - C['zero_fill_lost']:g} / {points:g} points)" in h, \
        (re.findall("Passed[^<]*", h), "failed:", failed, "expected to fail:", ZERO_FILL_FAILS)
    assert 'data-concept="mask-fill-value"' in h
    assert 'data-case-id="attention_causal_small"' in h
    assert "Masked positions received attention weight" in h
    assert "Weight on cells it may not see" in h  # the evidence
    assert h.count('<svg class="heatmap"') >= 2 and 'class="leak"' in h
    assert f"{len(ZERO_FILL_FAILS) - 1} more cases with this problem</summary>" in h  # folded: a cell output stays short
    assert "Code that raised" not in h  # the check cells themselves were skipped when graded
    assert "mask-fill-value" in out["text/plain"] and "attention_causal_small" in out["text/plain"]
    # Only masked_attention's cases: the masks were right.
    assert "causal_mask_square" not in h
    assert f"Passed {C['causal_mask'][0]} of {C['causal_mask'][0]} public cases" in zero_fill["causal_mask"]["text/html"]
    passed = C["n"] - len(ZERO_FILL_FAILS)
    assert (f"Passed {passed} of {C['n']} public cases ({C['points'] - C['zero_fill_lost']:g} / {C['points']:g} "
            "points)") in zero_fill[""]["text/html"]


@pytest.fixture(scope="module")
def zero_fill_zh(tmp_path_factory) -> dict[str, dict]:
    return _execute(_kit_notebook(tmp_path_factory.mktemp("kit-zh"), SAMPLES / "buggy" / "zero_fill.py", "zh-CN"))


def test_a_chinese_kits_notebook_text_output_is_chinese_outside_code(zero_fill_zh):
    """What print(notebook.check()) shows, and the console's text of a check cell."""
    text, stale = zero_fill_zh[""]["text/plain"], zero_fill_zh["stale"]["text/plain"]
    assert "找到方式：这个文件夹里唯一的笔记本" in text
    assert "公开用例" in text and "[attention_causal_small] — 被屏蔽的分数在 softmax 之前必须是 -inf" in text
    assert "（mask-fill-value）" in text
    assert "请先保存笔记本。你在 " in stale and "请保存（Ctrl+S）后再检查一次。" in stale
    english = ("Save the notebook", "You ran code", "the only notebook", "Passed ", "Public cases", "hidden case",
               "points checked", "Self-check of", "as saved at")
    for out in (text, stale):
        assert not [e for e in english if e in out], out
        assert ". \n" not in out and not any(line.endswith(("分.", "例.")) for line in out.splitlines())


def test_code_run_but_not_saved_is_named_and_the_student_told_to_save(zero_fill):
    h, text = zero_fill["stale"]["text/html"], zero_fill["stale"]["text/plain"]
    assert '<div class="banner stale" role="alert"><strong>Save the notebook.</strong> You ran code at ' in h
    assert "that is not in the saved file (unsaved_edit = 1); attention.ipynb was saved at " in h
    assert "Save the notebook. You ran code at " in text and "save (Ctrl+S) and check again." in text
    assert "Passed 1 of 1 public case (1 / 1 points)" in h  # still graded: the saved file


def _chromium() -> str | None:
    for candidate in (os.environ.get("GRADER_CHROMIUM"), shutil.which("chromium"), "/usr/bin/chromium"):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


@pytest.mark.browser
def test_zero_fill_check_output_in_chromium(zero_fill, tmp_path):
    """The cell's HTML as a notebook shows it: heatmaps drawn, styles scoped, nothing fetched."""
    chromium = _chromium()
    why = ("Chromium is not installed" if chromium is None else
           "the playwright package is not installed" if importlib.util.find_spec("playwright") is None else "")
    if why:
        if os.environ.get("GRADER_REQUIRE_BROWSER") == "1":
            pytest.fail(f"browser tests are required (GRADER_REQUIRE_BROWSER=1) but {why}")
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    page_html = ("<!doctype html><html><head><meta charset=utf-8><title>cell output</title></head>"
                 "<body style=\"margin:16px; font: 14px sans-serif\"><h1 id=outside>A notebook heading</h1>"
                 f"{zero_fill['masked_attention']['text/html']}</body></html>")
    (tmp_path / "cell.html").write_text(page_html, encoding="utf-8")
    shot = Path(os.environ.get("GRADER_SCREENSHOT_DIR") or tmp_path) / "notebook_check_zero_fill.png"
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=chromium, headless=True,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
            viewport={"width": 1100, "height": 900})
        try:
            page = context.new_page()
            requests: list[str] = []
            page.on("request", lambda r: requests.append(r.url))
            page.goto((tmp_path / "cell.html").as_uri())
            case = page.locator('article[data-case-id="attention_causal_small"]')
            assert case.is_visible()
            box = case.locator("svg.heatmap").first.bounding_box()
            assert box is not None and box["width"] > 100 and box["height"] > 100
            assert page.locator("rect.leak").count() > 0
            # Scoped styles: the page's own heading keeps the browser's default size.
            assert page.eval_on_selector("#outside", "e => getComputedStyle(e).fontSize") == "28px"
            assert page.eval_on_selector(".grader-check h2", "e => getComputedStyle(e).fontSize") != "28px"
            assert not page.locator('article[data-case-id="attention_twice"]').is_visible()  # folded
            page.locator(".grader-check").screenshot(path=str(shot))
            assert requests == [(tmp_path / "cell.html").as_uri()]
        finally:
            context.close()
    assert shot.stat().st_size > 10_000

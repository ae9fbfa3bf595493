"""`grader grade` writes the similarity report: a planted copied pair (renamed, re-commented) and a
planted pair giving identical wrong outputs rank first, untouched starters are not paired, the
dashboard links to the page, and the page shows in a real browser."""

from __future__ import annotations

import csv
import html
import io
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli.app import main

pytestmark = pytest.mark.slow  # full tier: grades real submissions (tens of seconds)

ROOT = Path(__file__).resolve().parents[2]
PLANTED = ROOT / "tests" / "data" / "similarity"
CORRECT = ROOT / "submissions" / "masked-attention" / "correct"
STARTER = ROOT / "assignments" / "masked-attention" / "starter" / "attention.py"


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> tuple[Path, str]:
    batch = tmp_path_factory.mktemp("batch")
    for p in PLANTED.glob("*.py"):
        shutil.copy(p, batch / p.name)
    for src, name in (("einsum", "carol"), ("sdpa", "dave"), ("neg_inf_guard", "gina")):
        shutil.copy(CORRECT / f"{src}.py", batch / f"{name}.py")
    out = tmp_path_factory.mktemp("out")
    r = CliRunner().invoke(main, ["grade", str(batch), "-a", "masked-attention", "-o", str(out), "-j", "2"])
    assert r.exit_code == 0, r.output
    return out, r.output


def test_planted_pairs_rank_first(graded):
    out, output = graded
    rows = list(csv.DictReader(io.StringIO((out / "similarity.csv").read_text())))
    top = [{r["student_a"], r["student_b"]} for r in rows[:2]]
    assert {"alice", "bob"} in top and {"erin", "frank"} in top
    copied = next(r for r in rows if {r["student_a"], r["student_b"]} == {"alice", "bob"})
    assert float(copied["code_share_a"]) == 1.0 and int(copied["matched_lines_a"]) > 10
    wrong = next(r for r in rows if {r["student_a"], r["student_b"]} == {"erin", "frank"})
    assert int(wrong["identical_wrong_outputs"]) >= 10 and "causal_square" in wrong["cases"].split()
    assert all({r["student_a"], r["student_b"]} != {"ivan", "judy"} for r in rows)  # only the starter shared
    assert f"Similarity: {out / 'similarity.html'} ({len(rows)} pair(s) with evidence to review)" in output
    assert 'href="similarity.html"' in (out / "index.html").read_text()
    page = (out / "similarity.html").read_text()
    assert "evidence for you to review, not a finding" in page
    for word in ("cheat", "plagiar", "copied from", "guilty"):
        assert word not in page.lower()
    starter = {line.strip() for line in STARTER.read_text().splitlines() if line.strip()}
    hits = [html.unescape(h).strip() for h in re.findall(r'<span class="ln hit[^"]*"><span class="no">\d+</span>(.*?)</span>', page)]
    assert len(hits) > 20 and not any(h in starter for h in hits)  # the starter's own lines are never marked
    assert any("def causal_mask(q_len, k_len=None, device=None):" in h for h in
               re.findall(r'<span class="ln"><span class="no">\d+</span>(.*?)</span>', page))


@pytest.mark.browser
def test_similarity_page_in_chromium(graded, tmp_path):
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(chromium).exists():
        pytest.skip("Chromium is not installed")
    playwright = pytest.importorskip("playwright.sync_api")
    out, _ = graded
    with playwright.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(str(tmp_path / "profile"), executable_path=chromium,
                                                       headless=True, args=["--no-sandbox", "--disable-gpu"],
                                                       viewport={"width": 1300, "height": 1000})
        try:
            page = context.new_page()
            errors: list[str] = []
            requests: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("request", lambda r: requests.append(r.url))
            page.goto((out / "similarity.html").as_uri())
            assert page.locator("#ranking tbody tr").count() >= 2
            side = page.locator("section.pair .side").first
            assert side.is_visible()
            boxes = side.locator(":scope > div").all()
            left, right = boxes[0].bounding_box(), boxes[1].bounding_box()
            assert left["x"] + left["width"] <= right["x"] + 1  # the two submissions side by side
            assert page.locator(".code .ln.hit").count() > 10  # matched lines highlighted
            page.screenshot(path=str(out / "similarity.png"), full_page=True)
            assert errors == [] and all(u.startswith("file://") for u in requests)
        finally:
            context.close()

"""The student report and the class dashboard, checked on parsed HTML (no browser)."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import re
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest

from grader.submission.ids import name_hash
from grader.i18n import verbatim
from grader.report import render_dashboard, render_submission
from grader.assignment.builtin import EXPLANATIONS
from grader.report.dashboard import RunInfo
from grader.report.html import environment
from grader.results import report_from_dict, to_dict

DATA = Path(__file__).resolve().parents[1] / "data" / "results"


def load_fixture(name: str):
    return report_from_dict(json.loads((DATA / f"{name}.json").read_text(encoding="utf-8")))


def all_fixtures():
    return [load_fixture(p.stem) for p in sorted(DATA.glob("*.json"))]


# --- a tiny DOM over html.parser ----------------------------------------------------------------

class Node:
    def __init__(self, tag: str, attrs: dict[str, str | None], parent: Node | None):
        self.tag, self.attrs, self.parent, self.children = tag, attrs, parent, []

    @property
    def classes(self) -> set[str]:
        return set((self.attrs.get("class") or "").split())

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self):
        for c in self.children:
            if isinstance(c, Node):
                yield c
                yield from c.iter()

    def find_all(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> list[Node]:
        return [n for n in self.iter() if (tag is None or n.tag == tag) and (cls is None or cls in n.classes)
                and all(n.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())]

    def find(self, *a, **kw) -> Node:
        found = self.find_all(*a, **kw)
        assert found, f"no element {a} {kw}"
        return found[0]


_VOID = {"meta", "link", "br", "hr", "img", "input", "source", "area", "base", "col", "wbr"}


class _Builder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {}, None)
        self.cur = self.root

    def handle_starttag(self, tag, attrs):
        node = Node(tag, dict(attrs), self.cur)
        self.cur.children.append(node)
        if tag not in _VOID:
            self.cur = node

    def handle_startendtag(self, tag, attrs):
        self.cur.children.append(Node(tag, dict(attrs), self.cur))

    def handle_endtag(self, tag):
        n = self.cur
        while n is not None and n.tag != tag:
            n = n.parent
        if n is not None and n.parent is not None:
            self.cur = n.parent

    def handle_data(self, data):
        self.cur.children.append(data)


def parse(html: str) -> Node:
    b = _Builder()
    b.feed(html)
    b.close()
    return b.root


# --- fixtures stay in sync with their generator ---------------------------------------------------

def test_fixture_json_matches_its_generator():
    spec = importlib.util.spec_from_file_location("fixture_make", DATA / "_make.py")
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    built = make.build_all()
    assert sorted(built) == sorted(p.stem for p in DATA.glob("*.json"))
    for sid, rep in built.items():
        assert to_dict(load_fixture(sid)) == to_dict(rep), sid


# --- the 0-fill bug -------------------------------------------------------------------------------

def _case(doc: Node, case_id: str) -> Node:
    return doc.find("article", data_case_id=case_id)


def test_zero_fill_failure_shows_concept_text_and_leaking_cells():
    report = load_fixture("ada_zero_fill")
    doc = parse(render_submission(report))
    section = doc.find("section", id="concept-mask-fill-value")
    assert EXPLANATIONS["mask-fill-value"] in " ".join(section.find("p", cls="explain").text().split())
    case = _case(section, "masked_attention_causal")
    evidence = {dt.text(): dd.text() for dt, dd in zip(case.find_all("dt"), case.find_all("dd"))}
    assert evidence["Weight on cells it may not see"].startswith("query 0 → key 1, query 0 → key 2")
    assert evidence["Largest difference"] == "0.8 (allowed 1e-05)"
    figure = case.find("figure", cls="hm-figure")
    actual = figure.find("svg", data_role="actual")
    leaks = {(int(r.attrs["data-q"]), int(r.attrs["data-k"])) for r in actual.find_all("rect", cls="leak")}
    expected_leaks = {tuple(c) for c in report.cases[1].evidence.leaking_cells}
    assert leaks == expected_leaks and len(leaks) == 10  # every future cell of a 5x5 causal mask
    assert figure.find("svg", data_role="expected").find_all("rect", cls="leak") == []
    assert "10 hidden cells received weight" in " ".join(figure.find("figcaption").text().split())


def test_heatmap_svgs_have_one_cell_per_query_key_pair():
    doc = parse(render_submission(load_fixture("ada_zero_fill")))
    figures = _case(doc, "masked_attention_causal").find_all("figure", cls="hm-figure")
    assert [f.attrs["data-hm-title"] for f in figures] == ["batch 0, head 0", "batch 0, head 1"]
    for fig in figures:
        svgs = fig.find_all("svg", cls="heatmap")
        assert [s.attrs["data-role"] for s in svgs] == ["expected", "actual", "difference"]
        for svg in svgs:
            cells = svg.find_all("rect", cls="cell")
            assert len(cells) == 25
            assert {(c.attrs["data-q"], c.attrs["data-k"]) for c in cells} == {
                (str(q), str(k)) for q in range(5) for k in range(5)}
            assert len(svg.find_all("rect", cls="overlay")) == 10  # future cells hatched
        assert fig.attrs["data-cells"] == "75"


# --- the mask-after-softmax bug -------------------------------------------------------------------

def test_mask_after_softmax_marks_rows_that_do_not_sum_to_one():
    doc = parse(render_submission(load_fixture("ben_after_softmax")))
    section = doc.find("section", id="concept-mask-after-softmax")
    assert "Zeroing weights after the softmax" in section.find("p", cls="explain").text()
    fig = _case(section, "masked_attention_causal").find("figure", cls="hm-figure")
    sums = fig.find("svg", data_role="actual").find_all("text", cls="rowsum")
    assert [s.text() for s in sums] == ["Σ .08 ✗", "Σ .74 ✗", "Σ .86 ✗", "Σ .45 ✗", "Σ 1"]
    assert sum("wrong" in s.classes for s in sums) == 4
    assert "4 rows of your weights do not sum to 1" in " ".join(fig.find("figcaption").text().split())
    assert fig.find("svg", data_role="actual").find_all("rect", cls="leak") == []  # zeros, no leak


def test_mask_heatmap_is_a_zero_one_grid_with_mismatches_in_red():
    doc = parse(render_submission(load_fixture("cy_noisy")))
    fig = _case(doc, "causal_mask_square").find("figure", cls="hm-figure")
    diff = fig.find("svg", data_role="difference").find_all("rect", cls="cell")
    assert len(fig.find_all("rect", cls="cell")) == 75
    assert sorted((c.attrs["data-q"], c.attrs["data-k"]) for c in diff if c.attrs["fill"] == "#dc2626") == [
        (str(i), str(i)) for i in range(5)]  # the diagonal
    assert {t.text() for t in fig.find("svg", data_role="actual").find_all("text") if t.text() in "01"} == {"0", "1"}


# --- hidden cases ---------------------------------------------------------------------------------

def test_hidden_case_shows_title_concept_outcome_only_unless_released():
    report = load_fixture("ada_zero_fill")
    html = render_submission(report)
    assert "SECRET" not in html
    case = _case(parse(html), "hidden_padding[mixed]")
    assert "Mixed padding" in case.text() and "failed" in case.text()
    assert case.find_all("figure") == [] and case.find_all("dl") == []
    assert case.parent.attrs["id"] == "concept-padding-broadcast"

    released = render_submission(report, release_hidden=True)
    case = _case(parse(released), "hidden_padding[mixed]")
    assert "SECRET-MESSAGE" in case.text() and "SECRET-NOTE" in case.text()
    assert len(case.find_all("figure", cls="hm-figure")) == 1
    assert "released" in case.find("p", cls="hidden-note").text()


# --- student text is escaped and cleaned ------------------------------------------------------------

def test_student_output_is_escaped_stripped_and_truncated():
    html = render_submission(load_fixture("cy_noisy"))
    doc = parse(html)
    scripts = doc.find_all("script")
    assert len(scripts) == 1 and "alert" not in scripts[0].text()  # only our own script
    assert doc.find_all("img") == [] and doc.find_all("b") == []
    stdout = doc.find("pre", cls="stdout").text()
    assert "step 1 <script>alert(1)</script>" in stdout  # shown as text
    assert "RED WARNING done\nprogress 10%\nprogress 100%" in stdout
    assert "more characters not shown" in stdout
    assert "&lt;script&gt;alert(1)" in html and "<script>alert" not in html
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", html)
    assert "<img src=x onerror=alert(2)>" in doc.find("pre", cls="stderr").text()
    assert "ZeroDivisionError: <b>float</b> division by zero" in doc.find("details", cls="traceback").text()


def test_cell_errors_name_the_cell():
    doc = parse(render_submission(load_fixture("cy_noisy")))  # an older result: a number, no label
    section = doc.find("section", id="cell-errors")
    assert "Code cell 4: NameError: name 'plt' is not defined" in " ".join(section.find("h3").text().split())


def test_cell_errors_name_the_cell_by_its_label_with_the_first_line():
    import dataclasses

    r = load_fixture("cy_noisy")
    e = dataclasses.replace(r.load.cell_errors[0], label=verbatim("code cell 4 (plt.plot(w[0, 0]))"))
    doc = parse(render_submission(dataclasses.replace(r, load=dataclasses.replace(r.load, cell_errors=[e]))))
    h3 = " ".join(doc.find("section", id="cell-errors").find("h3").text().split())
    assert h3.startswith("Code cell 4 (plt.plot(w[0, 0])): NameError")


def test_load_error_report_explains_without_repeating_each_case():
    doc = parse(render_submission(load_fixture("eve_syntax")))
    banner = doc.find("section", id="load-error")
    assert "SyntaxError: invalid syntax (attention.py, line 12)" in banner.text()
    assert EXPLANATIONS["load-error"] in banner.text()
    assert doc.find_all("section", id="concept-load-error") == []
    rows = doc.find("section", id="summary").find_all("tr")[1:]
    assert len(rows) == 6 and all("not run" in r.text() for r in rows)
    assert doc.find("section", id="summary").find_all("a") == []  # nothing to link to


# --- header, banner, self-containment ------------------------------------------------------------

def test_header_shows_id_assignment_score_and_environment():
    report = load_fixture("ada_zero_fill")
    doc = parse(render_submission(report))
    assert doc.find("span", cls="student-id").text() == "ada_zero_fill"
    assert doc.find("div", id="score").find("span", cls="pct").text() == "56%"
    env = {dt.text(): dd.text() for dt, dd in zip(doc.find("dl", cls="env").find_all("dt"),
                                                   doc.find("dl", cls="env").find_all("dd"))}
    assert env == {"Grader": "0.1.0", "PyTorch": "2.5.1", "Python": "3.11.9", "Device": "cpu",
                   "Dtypes": "float32, float16", "Isolation": "bwrap+cgroup"}
    assert doc.find_all(id="self-check") == []
    selfcheck = parse(render_submission(replace(report, public_only=True))).find("div", id="self-check")
    assert "Self-check: public cases only, not an official grade." in selfcheck.text()


def test_self_check_leads_with_how_much_of_the_grade_it_checks_not_a_percentage():
    report = load_fixture("dee_perfect")
    assert report.score.earned == report.score.possible
    page = render_submission(replace(report, public_only=True, hidden_cases=27, hidden_points=36.0))
    score = parse(page).find("div", id="score")
    pts = f"{report.score.possible:g}"
    assert score.find("span", cls="lead").text() == (f"Public cases: {pts} of {report.score.possible + 36:g} points "
                                                     "checked, 27 hidden cases at grading time")
    assert score.find("span", cls="pts").text().startswith(f"passed {len(report.cases)} of {len(report.cases)} public cases")
    assert score.find_all("span", cls="pct") == [] and "100%" not in score.text()


def test_page_is_self_contained_and_its_csp_allows_only_its_own_script():
    html = render_submission(load_fixture("ada_zero_fill"))
    doc = parse(html)
    assert all(a.attrs["href"].startswith("#") for a in doc.find_all("a"))
    assert not [n for n in doc.iter() if n.tag in ("link", "img", "iframe", "object") or "src" in n.attrs]
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "") and "https://" not in html
    csp = doc.find("meta", http_equiv="Content-Security-Policy").attrs["content"]
    digest = base64.b64encode(hashlib.sha256(doc.find("script").text().encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in csp and "default-src 'none'" in csp


def test_jinja_environment_is_built_once_with_autoescape():
    env = environment()
    assert env is environment()
    assert env.from_string("{{ x }}").render(x="<b>") == "&lt;b&gt;"


# --- dashboard -------------------------------------------------------------------------------------

def test_dashboard_sentences_table_and_metadata():
    reports = all_fixtures()
    doc = parse(render_dashboard(reports, run={"date": "2026-11-29", "isolation": "bwrap+cgroup"}))
    sentences = [" ".join(li.text().split()) for li in doc.find("section", id="concepts").find_all("li")]
    assert sentences[0].startswith("40 % of the class broadcast the padding mask along the wrong axis (2 of 5")
    assert any(s.startswith("20 % of the class filled masked scores with 0") for s in sentences)
    rows = doc.find("table", id="students").find("tbody").find_all("tr")
    assert [r.attrs["data-student"] for r in rows] == [
        "ada_zero_fill", "ben_after_softmax", "cy_noisy", "dee_perfect", "eve_syntax"]
    assert [r.find("a").attrs["href"] for r in rows][0] == "ada_zero_fill.html"
    assert [r.find("td", cls="num").attrs["data-value"] for r in rows] == ["55.56", "55.56", "77.78", "100.0", "0.0"]
    run = {dt.text(): dd.text() for dt, dd in zip(doc.find("dl", id="run").find_all("dt"),
                                                   doc.find("dl", id="run").find_all("dd"))}
    assert run == {"Assignment": "masked-attention", "Version": "1.0", "Graded": "5", "Date": "2026-11-29",
                   "Grader": "0.1.0", "Isolation": "bwrap+cgroup"}
    bars = doc.find("svg", cls="hist").find_all("rect", cls="bar")
    assert len(bars) == 10
    case_rates = {li.attrs["data-case"]: " ".join(li.text().split())
                  for li in doc.find("section", id="cases").find_all("li")}
    assert case_rates["masked_attention_causal"].startswith("60 % did not pass Causal attention weights")


def test_dashboard_links_are_relative_and_escaped_for_odd_ids():
    evil = replace(load_fixture("dee_perfect"), submission=replace(load_fixture("dee_perfect").submission,
                                                                    id='../x"<script>'))
    html = render_dashboard([evil], run=RunInfo(assignment="a", version="1"))
    link = parse(html).find("table", id="students").find("a")
    # separators, quotes, brackets replaced, no leading dot, and a hash of the exact id (no other id meets it)
    assert link.attrs["href"] == f"_x__script_-{name_hash(evil.submission.id.encode())}.html"
    assert link.text() == '../x"<script>'
    assert html.count("<script") == 1 and "&lt;script&gt;" in html  # ours only; the id is escaped


def test_run_info_refuses_unknown_fields():
    with pytest.raises(ValueError, match="unknown run fields \\['colour'\\]"):
        render_dashboard(all_fixtures(), run={"colour": "red"})


def test_run_info_refuses_a_field_of_the_wrong_type():
    with pytest.raises(ValueError, match="run fields \\['version'\\] have the wrong type: version is str"):
        render_dashboard(all_fixtures(), run={"version": 3, "public_only": True})


@pytest.mark.parametrize("lang", ["en", "zh_CN"])
def test_a_prepared_page_compiles_nothing_more_when_rendered(lang, monkeypatch):
    """`grader check` compiles the page's templates before grading ends (prepare_submission_page):
    it must find every template the page uses, or the head start is lost."""
    import jinja2

    from grader.report import html

    html.environment.cache_clear()
    html.prepare_submission_page(lang)
    compiled = []
    real = jinja2.Environment.compile

    def recording(self, source, name=None, *args, **kwargs):
        compiled.append(name)
        return real(self, source, name, *args, **kwargs)

    monkeypatch.setattr(jinja2.Environment, "compile", recording)
    for report in all_fixtures():
        render_submission(report, lang=lang)
    assert compiled == []

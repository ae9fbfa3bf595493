"""Helpers of grader.report: cleaning student text, concept wording, heatmap geometry."""

from __future__ import annotations

import math
import re

from hypothesis import given, strategies as st

from grader.assignment.builtin import CLASS_PHRASES, CONCEPTS, EXPLANATIONS
from grader.i18n import verbatim
from grader.report.heatmap import build_heatmap, cell_layers
from grader.report.text import clean, clean_block, csv_cell, md_escape
from grader.results import Heatmap


def test_every_concept_has_a_two_sentence_explanation_and_a_class_phrase():
    assert set(EXPLANATIONS) == set(CONCEPTS)
    assert set(CLASS_PHRASES) == set(CONCEPTS)
    for cid, text in EXPLANATIONS.items():
        assert len(re.split(r"(?<=[.!?])\s+", text.strip())) == 2, cid


def test_clean_strips_ansi_controls_and_bidi_but_keeps_newlines_and_tabs():
    raw = "\x1b[1;31mred\x1b[0m\tok\x07\x00\r\nnext\rover\u202eevil\x1b]0;title\x07end\x9b2J"
    assert clean(raw) == "red\tok\nnext\noverevilend"


def test_clean_block_truncates_with_a_note():
    assert clean_block("a" * 20, 10) == "a" * 10 + "\n… (10 more characters not shown)"
    assert clean_block(None) == ""


@given(st.text())
def test_cleaned_text_has_no_control_characters(s):
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\x1b]", clean(s))


def test_csv_cells_starting_like_formulas_are_neutralised():
    assert [csv_cell(x) for x in ["=1+2", "+1", "-2", "@SUM(A1)", "\t=x", "ok", "a=b"]] == [
        "'=1+2", "'+1", "'-2", "'@SUM(A1)", "'=x", "ok", "a=b"]


def test_markdown_escape_cannot_break_a_table_or_inject_html():
    out = md_escape("a|b <script>x</script> *bold* [l](u)\nnext")
    assert out == r"a\|b &lt;script&gt;x&lt;/script&gt; \*bold\* \[l\](u) next"


def _square(n, f):
    return [[f(q, k) for k in range(n)] for q in range(n)]


def test_heatmap_derives_leaks_from_keep_and_flags_wrong_row_sums():
    keep = _square(3, lambda q, k: k <= q)
    expected = _square(3, lambda q, k: 1 / (q + 1) if k <= q else 0.0)
    actual = _square(3, lambda q, k: 1 / 3)
    hm = build_heatmap(Heatmap(verbatim("t"), expected, actual, keep), "u")
    mine = next(p for p in hm.panels if p.role == "actual")
    assert {(c.q, c.k) for c in mine.cells if c.leak} == {(0, 1), (0, 2), (1, 2)}
    assert hm.n_leaks == 3 and hm.n_wrong_rows == 0  # rows of 1/3 still sum to 1
    assert [p.role for p in hm.panels] == ["expected", "actual", "difference"]


def test_heatmap_without_actual_has_one_panel_and_nan_is_spelled_out():
    hm = build_heatmap(Heatmap(verbatim("t"), [[1.0, 0.0]], None, [[True, False]]), "u")
    assert [p.role for p in hm.panels] == ["expected"] and hm.n_leaks == 0
    hm = build_heatmap(Heatmap(verbatim("t"), [[1.0, 0.0]], [[math.nan, 0.0]], [[True, False]]), "u")
    mine = hm.panels[1]
    assert mine.cells[0].text == "NaN" and mine.row_sums[0].wrong and mine.row_sums[0].text == "Σ NaN"


def test_heatmap_refuses_ragged_or_empty_matrices_and_drops_a_wrong_shaped_actual():
    assert build_heatmap(Heatmap(verbatim("t"), [], None), "u") is None
    assert build_heatmap(Heatmap(verbatim("t"), [[1.0], [1.0, 2.0]], None), "u") is None
    hm = build_heatmap(Heatmap(verbatim("t"), [[1.0, 0.0]], [[1.0]], [[True, False]]), "u")
    assert [p.role for p in hm.panels] == ["expected"]


def test_large_heatmaps_get_smaller_cells_without_numbers():
    hm = build_heatmap(Heatmap(verbatim("t"), _square(40, lambda q, k: 0.0), _square(40, lambda q, k: 0.0)), "u")
    assert hm.cell == 8 and all(c.text == "" for p in hm.panels for c in p.cells)
    assert sum(len(p.cells) for p in hm.panels) == 3 * 1600


def test_cell_layers_draw_every_cell_once_with_its_tooltip_in_the_pages_language():
    keep = _square(2, lambda q, k: k <= q)
    hm = build_heatmap(Heatmap(verbatim("t"), [[1.0, 0.0], [0.5, 0.5]], [[0.5, 0.5], [0.5, 0.5]], keep), "u")
    mine = next(p for p in hm.panels if p.role == "actual")
    svg = str(cell_layers(hm, mine))
    assert svg.count('<rect class="cell') == 4 and svg.count('class="overlay"') == 1
    assert svg.count('<rect class="leak" data-q="0" data-k="1"') == 1 and 'class="cell masked leaking"' in svg
    assert "<title>query 0, key 1: .50 — may not attend (future/padding); received weight it should not</title>" in svg
    zh = build_heatmap(Heatmap(verbatim("t"), [[1.0, 0.0], [0.5, 0.5]], [[0.5, 0.5], [0.5, 0.5]], keep), "u",
                       lang="zh-CN")
    assert "<title>查询 0，键 1：" in str(cell_layers(zh, zh.panels[1]))  # the cached English tooltip is not reused


def test_cell_layers_escape_the_text_they_carry():
    from dataclasses import replace

    hm = build_heatmap(Heatmap(verbatim("t"), [[1.0]], None), "u")
    panel = hm.panels[0]
    odd = replace(panel, cells=[replace(panel.cells[0], tooltip='<b a="1">&', text="<i>")])
    svg = str(cell_layers(hm, odd))
    assert "<title>&lt;b a=&#34;1&#34;&gt;&amp;</title>" in svg and ">&lt;i&gt;</text>" in svg


def test_the_evidence_names_a_dtype_only_where_it_differs():
    from grader.report.view import evidence_facts
    from grader.results import Evidence

    same = evidence_facts(Evidence(expected_shape=[1], actual_shape=[], expected_dtype="torch.int64",
                                   actual_dtype="torch.int64"))
    assert [f.label for f in same] == ["Shape"]
    assert same[0].value == "expected (1), yours ()"
    other = evidence_facts(Evidence(expected_dtype="torch.float32", actual_dtype="torch.float64"))
    assert [(f.label, f.value) for f in other] == [("Dtype", "expected torch.float32, yours torch.float64")]

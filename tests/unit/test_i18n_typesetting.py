"""Chinese text built from a template and values reads as Chinese typesetting wants: a space between
code and Han characters, none between two Chinese words, 、 between the items of a list."""

from __future__ import annotations

import pytest

from grader.i18n import fill, tr
from grader.i18n.formats import listing


@pytest.mark.parametrize("template, values, want", [
    ("{phase}时超过了 {seconds} 秒", {"phase": "调用 masked_attention()", "seconds": "10"},
     "调用 masked_attention() 时超过了 10 秒"),
    ("{what} 是参考实现的", {"what": "masked_cross_entropy 对 logits 的梯度"}, "masked_cross_entropy 对 logits 的梯度是参考实现的"),
    ("{what} 是参考实现的", {"what": "grad"}, "grad 是参考实现的"),
    ("把{fill}填进去", {"fill": "-inf"}, "把 -inf 填进去"),
    ("加载{where}时出错", {"where": "模块的顶层代码"}, "加载模块的顶层代码时出错"),
    ("期望 {x}，你的 {y}", {"x": "1", "y": "0.25"}, "期望 1，你的 0.25"),
    ("{title}（{id}）", {"title": "因果掩码", "id": "mask-fill-value"}, "因果掩码（mask-fill-value）"),
    ("{{literal}} {a}", {"a": "中"}, "{literal} 中"),
    ("缺少 {missing}", {}, "缺少 {missing}"),
])
def test_values_meet_chinese_text_with_the_spacing_it_wants(template, values, want):
    assert fill(template, values, cjk=True) == want


def test_english_and_the_default_fill_are_untouched():
    assert fill("{phase}时", {"phase": "f()"}) == "f()时"
    assert tr("Error: {message}", message="x").render("en") == "Error: x"


def test_lists_use_the_languages_separator():
    assert listing(["causal_mask", "padding_mask"], "en") == "causal_mask, padding_mask"
    assert listing(["causal_mask", "padding_mask"], "zh-CN") == "causal_mask、padding_mask"

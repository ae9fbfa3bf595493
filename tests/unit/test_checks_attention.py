"""Diagnosing attention results and masks from tensors alone: what each classic mistake looks like."""

from __future__ import annotations

import math

import torch
from hypothesis import given, settings, strategies as st

import reference
from grader.checks.attention import MESSAGES, AttentionCase, check_attention, uniform_empty_rows
from grader.checks.compare import Expected
from grader.checks.masks import check_mask


def attention_case(q, k, v, keep) -> AttentionCase:
    """What a setup computes with the reference: oracle, naive results, the mistakes' weights."""
    with reference.exact_float32():
        o64, w64 = reference.oracle_attention(q, k, v, keep)
        on, wn = reference.masked_attention(q, k, v, keep)
    return AttentionCase(q, k, v, keep, Expected(o64, on, q.dtype), Expected(w64, wn, q.dtype),
                         mistakes=reference.mistakes.attention_mistakes(q, k, keep))


def student(q, k, v, keep, *, fill=None, guard=False, add_bool=False):
    """Attention as students write it: masked_fill with ``fill`` (default -inf), optionally a guard."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if add_bool:
        scores = scores + keep  # a bool keep-mask used as if it were additive
    else:
        scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min if fill is None else fill)
    w = scores.softmax(-1)
    if guard:
        w = torch.where(keep.any(-1, keepdim=True), w, 0.0)
    return w @ v, w


def qkv(seed: int, lq: int, lk: int, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(2, 2, n, 8, generator=g).to(dtype) for n in (lq, lk, lk)]


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 6), st.integers(2, 7), st.data())
def test_a_finite_fill_without_a_guard_is_diagnosed_as_uniform_rows(seed, lq, lk, data):
    q, k, v = qkv(seed, lq, lk)
    keep = reference.causal_mask(lq, lk).clone()
    empty = data.draw(st.lists(st.integers(0, lq - 1), min_size=1, max_size=lq, unique=True))
    keep[empty] = False
    a = attention_case(q, k, v, keep)
    verdict = check_attention(student(q, k, v, keep), a, concept="fully-masked-rows", message="generic")
    assert not verdict.passed and verdict.concept == "fully-masked-rows"
    assert verdict.message == MESSAGES["fully-masked-rows/uniform"]
    assert "finfo" in str(verdict.message) and "1/Lk" in str(verdict.message) and "large finite" not in str(verdict.message)
    # The same fill with the guard is right, and is not taken for the mistake.
    guarded = student(q, k, v, keep, guard=True)
    assert check_attention(guarded, a, concept="fully-masked-rows", message="generic").passed
    assert not uniform_empty_rows(guarded[1], a)


def test_uniform_rows_in_half_precision_too():
    q, k, v = qkv(3, 6, 6, torch.float16)
    keep = reference.causal_mask(6).clone()
    keep[2] = False
    verdict = check_attention(student(q, k, v, keep), attention_case(q, k, v, keep), concept="fully-masked-rows",
                              message="generic")
    assert verdict.concept == "fully-masked-rows" and verdict.message == MESSAGES["fully-masked-rows/uniform"]


def test_nan_rows_from_minus_inf_are_not_called_uniform():
    q, k, v = qkv(4, 5, 5)
    keep = reference.causal_mask(5).clone()
    keep[1] = False
    verdict = check_attention(student(q, k, v, keep, fill=float("-inf")), attention_case(q, k, v, keep),
                              concept="fully-masked-rows", message="generic")
    assert verdict.concept == "fully-masked-rows"
    assert str(verdict.message).startswith("Your output contains NaN.") and "uniform" not in str(verdict.message)


def test_a_bool_mask_added_to_the_scores_is_a_convention_mistake():
    q, k, v = qkv(5, 5, 5)
    keep = reference.causal_mask(5)
    verdict = check_attention(student(q, k, v, keep, add_bool=True), attention_case(q, k, v, keep),
                              concept="mask-fill-value", message="generic")
    assert verdict.concept == "mask-convention" and "bool keep-mask" in str(verdict.message)


@settings(deadline=None)  # no timing assertion: a loaded machine is slow, not wrong
@given(st.integers(1, 5), st.integers(0, 4))
def test_an_additive_float_mask_is_named_as_one(lq, extra):
    lk = lq + extra
    want = reference.causal_mask(lq, lk)
    additive = torch.zeros(lq, lk).masked_fill(~want, float("-inf"))
    for got in (additive, additive[None], torch.zeros(lq, lk).masked_fill(~want, torch.finfo(torch.float32).min)):
        v = check_mask(got, want, what="causal_mask", concept="causal-alignment", message="generic")
        assert v.concept == "mask-convention" and "`additive == 0`" in str(v.message)
    v = check_mask(want.float(), want, what="causal_mask", concept="causal-alignment", message="generic")
    assert v.concept == "mask-convention" and "dtype=torch.bool" in str(v.message)
    assert check_mask(want.clone(), want, what="causal_mask", concept="causal-alignment", message="generic").passed


def test_an_inverted_mask_is_a_convention_mistake_whatever_the_case_tests():
    want = reference.padding_mask([3, 1], 4)
    v = check_mask(~want, want, what="padding_mask", concept="padding-broadcast", message="generic")
    assert v.concept == "mask-convention"


def test_a_row_sum_is_short_of_one_only_beyond_the_dtypes_rounding():
    """A bfloat16 softmax by hand sums to 0.996: rounding (4 eps = 0.031), not weights zeroed after the softmax."""
    from grader.checks.attention import rows_short_of_one

    sums = torch.tensor([0.996, 0.9, 0.0, 1.0])
    assert rows_short_of_one(sums, torch.bfloat16).tolist() == [False, True, False, False]
    assert rows_short_of_one(sums, torch.float32).tolist() == [True, True, False, False]
    assert rows_short_of_one(torch.tensor([0.9985]), torch.float16).tolist() == [False]  # 4 eps = 0.0039


def test_a_bare_tensor_is_not_the_pair_and_says_so_before_anything_else():
    from grader.checks.attention import check_pair

    q = torch.zeros(1, 2, 3, 4)
    a = AttentionCase(q, q, q, None, Expected(q.double(), None, q.dtype), Expected(torch.zeros(1, 2, 3, 3, dtype=torch.float64),
                                                                            None, q.dtype))
    v = check_pair(q, a, concept="dropout")
    assert v.concept == "signature" and "must return a tuple (out, weights); it returned Tensor" in str(v.message)
    assert check_pair((q, torch.zeros(1, 2, 3, 3)), a, concept="dropout") is None

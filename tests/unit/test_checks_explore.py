"""grader.checks.explore: the explorer a failing case carries, and the rule found in a student's weights."""

from __future__ import annotations

import json
import math

import pytest
import torch

import reference
from grader.checks.explore import MAX_CELLS, attention_explorer, mask_explorer, mask_parts, replay
from grader.explorer import FINITE_MIN, MAX_SIDE
from grader.results import CaseResult, Evidence, Outcome, Points, case_from_dict, to_dict


def _qk(B=1, H=2, Lq=5, Lk=5, d=8, negative=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, Lq, d, generator=g)
    k = torch.randn(B, H, Lk, d, generator=g)
    if negative:  # every score negative: a 0 fill beats them all
        q, k = q.abs() + 0.5, -(k.abs() + 0.5)
    return q, k


def _scores(q, k):
    return q.double() @ k.double().transpose(-2, -1) / math.sqrt(q.shape[-1])


def test_a_zero_fill_is_found_and_replayed_instead_of_stored():
    q, k = _qk(negative=True)
    keep = reference.causal_mask(5)
    w = torch.softmax(_scores(q, k).masked_fill(~keep, 0.0), -1).float()
    e = attention_explorer(q, k, keep, w, torch.float32, [0, 1, 0, 1])
    assert (e.fill, e.empty_rows, e.after_softmax) == (0.0, "zero", False)
    assert e.yours is None  # the rule reproduces them: the page recomputes, nothing stored twice
    assert [p.kind for p in e.parts] == ["causal"] and e.parts[0].keep == keep.tolist()


@pytest.mark.parametrize("fill, empty_rows, want_fill", [
    (torch.finfo(torch.float32).min, "uniform", FINITE_MIN),  # a finite fill: a row with no key comes out 1/Lk
    (-math.inf, "nan", -math.inf),  # -inf without a guard: 0/0
])
def test_what_a_row_with_no_visible_key_gets_is_read_from_the_weights(fill, empty_rows, want_fill):
    q, k = _qk(Lq=4)
    keep = reference.causal_mask(4, 5).clone()
    keep[1] = False
    w = torch.softmax(_scores(q, k).masked_fill(~keep, fill), -1).float()
    e = attention_explorer(q, k, keep, w, torch.float32, None)
    assert (e.fill, e.empty_rows) == (want_fill, empty_rows)
    assert [p.kind for p in e.parts] == ["mask"]  # not a causal AND padding mask: shown as given


def test_weights_zeroed_after_the_softmax_are_named_so():
    q, k = _qk()
    keep = reference.causal_mask(5)
    s = _scores(q, k)
    e = attention_explorer(q, k, keep, (torch.softmax(s, -1) * keep).float(), torch.float32, None)
    assert e.after_softmax and e.yours is None


def test_weights_no_rule_reproduces_are_kept_as_returned():
    q, k = _qk()
    keep = reference.causal_mask(5)
    w = torch.softmax((_scores(q, k) * 8 ** 0.5).masked_fill(~keep, -math.inf), -1).float()  # unscaled scores
    e = attention_explorer(q, k, keep, w, torch.float32, None)
    assert e.fill is None and e.yours is not None
    assert torch.allclose(torch.tensor(e.yours, dtype=torch.float64), w.double(), atol=1e-4)


def test_causal_and_padding_are_told_apart():
    pad = reference.padding_mask([5, 3], 5, side="left")
    keep = reference.combine_masks(reference.causal_mask(5), pad)[:, 0]
    parts = mask_parts(keep)
    assert [p.kind for p in parts] == ["causal", "padding"] and parts[1].keep == pad.tolist()
    assert [p.kind for p in mask_parts(pad[:, None, :].expand(2, 5, 5))] == ["padding"]


def test_the_reference_rule_is_the_reference():
    q, k = _qk(B=2, Lq=4, Lk=6)
    keep = reference.combine_masks(reference.causal_mask(4, 6), reference.padding_mask([6, 1], 6, side="left"))
    _, w = reference.oracle_attention(q.double(), k.double(), torch.zeros(2, 2, 6, 1, dtype=torch.float64), keep)
    got = replay(_scores(q, k), keep.expand(2, 2, 4, 6), -math.inf, "zero")
    assert torch.allclose(got, w, atol=1e-12)


def test_large_inputs_are_cut_to_fit_and_too_many_keys_get_none():
    q, k = _qk(B=8, H=8, Lq=30, Lk=12)
    keep = reference.causal_mask(30, 12)
    w = torch.softmax(_scores(q, k).masked_fill(~keep, 0.0), -1)
    e = attention_explorer(q, k, keep, w, torch.float32, [6, 5, 20, 3])
    B, H, Lq, Lk = len(e.scores), len(e.scores[0]), len(e.scores[0][0]), len(e.scores[0][0][0])
    assert Lq == MAX_SIDE and Lk == 12 and B * H * Lq * Lk <= MAX_CELLS
    assert e.offsets[2] <= 20 < e.offsets[2] + Lq  # the window holds the first wrong value
    q, k = _qk(Lq=4, Lk=13)
    assert attention_explorer(q, k, None, torch.softmax(_scores(q, k), -1), torch.float32, None) is None


def test_a_mask_case_shows_both_masks_on_made_up_scores():
    e = mask_explorer(torch.ones(2, 5, dtype=torch.bool).tril(), reference.causal_mask(2, 5))  # top-left
    assert e.illustrative and e.parts[0].kind == "causal" and e.your_mask == [torch.ones(2, 5).tril().bool().tolist()]
    e = mask_explorer(reference.padding_mask([4, 1, 0], 4), reference.padding_mask([4, 1, 0], 4, side="left"))
    assert e.parts[0].kind == "padding" and len(e.scores) == 3 and len(e.scores[0][0]) == 4


def test_an_explorer_survives_the_results_file():
    q, k = _qk(Lq=4)
    keep = reference.causal_mask(4, 5).clone()
    keep[1] = False
    w = torch.softmax(_scores(q, k).masked_fill(~keep, -math.inf), -1) * 3  # NaN rows, no rule
    e = attention_explorer(q, k, keep, w, torch.float32, None)
    case = CaseResult("c", "C", Outcome.FAILED, Points(0, 1), False, "fully-masked-rows", "m", Evidence(explorer=e))
    back = case_from_dict(json.loads(json.dumps(to_dict(case), allow_nan=False))).evidence.explorer
    assert back.fill == e.fill and math.isnan(back.yours[0][0][1][0]) and back.parts == e.parts


def test_a_decoding_step_shows_the_mask_the_output_matched():
    from grader.checks.explore import mask_step_explorer

    g = torch.Generator().manual_seed(1)
    weights = {f"W_{n}.weight": torch.randn(8, 8, generator=g) for n in "qkvo"}
    x = torch.randn(1, 5, 8, generator=g)
    seen = reference.mistakes.step_masks(weights, 2, x, [(0, 2), (2, 4), (4, 5)])
    assert tuple(seen["q"].shape) == (1, 2, 2, 4) and tuple(seen["k"].shape) == (1, 2, 4, 4)
    e = mask_step_explorer(seen["q"], seen["k"], seen["keep"], seen["masks"]["causal-alignment"])
    assert e.parts[0].kind == "causal" and e.parts[0].keep == reference.causal_mask(2, 4).tolist()
    assert e.your_mask == [torch.ones(2, 4, dtype=torch.bool).tril().tolist()] and not e.illustrative


def test_a_combined_mask_with_query_rows_gives_each_step_its_own_rows():
    """One (B, 1, T, T) keep mask (causal AND padding, no causal=True): the explorer keeps the
    mask's rows for the step's queries, and a mask without the padding differs from it."""
    g = torch.Generator().manual_seed(2)
    weights = {f"W_{n}.weight": torch.randn(8, 8, generator=g) for n in "qkvo"}
    x = torch.randn(2, 5, 8, generator=g)
    pad = reference.padding_mask([5, 2], 5, side="left")
    keep = reference.causal_mask(5)[None, None] & pad[:, None, None, :]
    seen = reference.mistakes.step_masks(weights, 2, x, [(0, 5)], mask=keep, causal=False)
    assert torch.equal(seen["keep"], keep)
    assert torch.equal(seen["masks"]["mask-combination"], torch.ones(2, 1, 5, 5, dtype=torch.bool))

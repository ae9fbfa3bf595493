"""grader/checks/masks.py: a boolean mask a student built, and the mistake named when it is wrong."""

import torch

from grader.checks.masks import MASK_MESSAGES, additive_mask_verdict, check_mask, mask_heatmaps, with_mask_messages
from grader.i18n import EMPTY

CAUSAL = torch.ones(4, 4, dtype=torch.bool).tril()


def _check(actual, alternatives=None):
    return check_mask(actual, CAUSAL, what="causal_mask(4)", concept="causal-direction", message="Look again.",
                      alternatives=alternatives)


def test_the_right_mask_passes():
    assert _check(CAUSAL.clone()).passed


def test_an_inverted_mask_is_the_convention_mistake():
    v = _check(~CAUSAL)
    assert v.concept == "mask-convention" and v.message == MASK_MESSAGES["inverted"]
    assert [str(n) for n in v.evidence.notes] == ["16 of 16 cells differ"]


def test_a_known_mistake_is_named_by_its_alternative_with_its_own_message():
    no_diagonal = torch.ones(4, 4, dtype=torch.bool).tril(-1)
    v = _check(no_diagonal, with_mask_messages({"causal-diagonal": no_diagonal}))
    assert v.concept == "causal-diagonal" and v.message == MASK_MESSAGES["causal-diagonal"]
    assert v.evidence.first_bad_index == [0, 0]
    own = _check(no_diagonal, {"window-size": (no_diagonal, "The window is one too small.")})
    assert (own.concept, str(own.message)) == ("window-size", "The window is one too small.")


def test_an_alternative_without_a_message_keeps_neither_the_cases_nor_a_built_in_sentence():
    """Said in the alternative concept's own words (the engine fills in its title), not "Look again."
    and not the attention sentence of a built-in concept with the same id."""
    no_diagonal = torch.ones(4, 4, dtype=torch.bool).tril(-1)
    for concept in ("window-size", "causal-diagonal"):
        v = _check(no_diagonal, {concept: no_diagonal})
        assert (v.concept, v.message) == (concept, EMPTY)


def test_any_other_wrong_mask_gets_the_cases_concept_and_message():
    wrong = CAUSAL.clone()
    wrong[3, 0] = False
    v = _check(wrong)
    assert (v.concept, str(v.message)) == ("causal-direction", "Look again.")
    assert v.evidence.first_bad_index == [3, 0] and v.evidence.expected_value == 1.0


def test_an_additive_float_mask_is_recognised_as_the_convention_mistake():
    additive = torch.zeros(4, 4).masked_fill(~CAUSAL, float("-inf"))
    v = _check(additive[None])  # tutorial code returns (1, T, T)
    assert v.concept == "mask-convention" and "additive" in str(v.message) and "`additive == 0`" in str(v.message)
    assert str(additive_mask_verdict(CAUSAL.float(), CAUSAL, "m").message).startswith("m returned a 0/1")


def test_a_float_mask_of_another_pattern_is_a_dtype_failure_of_the_case():
    v = _check(torch.rand(4, 4))
    assert v.concept == "causal-direction" and "must be a bool tensor" in str(v.message)


def test_heatmaps_show_the_first_items_that_differ():
    exp = CAUSAL.expand(5, 4, 4)
    got = exp.clone()
    got[1] = ~got[1]
    got[3] = ~got[3]
    maps = mask_heatmaps(got, exp)
    assert [str(m.title) for m in maps] == ["item 1", "item 3"]
    assert maps[0].keep == CAUSAL.tolist()

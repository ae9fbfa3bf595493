"""Documented defaults from spec.toml signatures, and calls left with only non-default arguments."""

from __future__ import annotations

from grader.assignment.signatures import Params, entry_defaults, parse_params, without_defaults

MHA = ("class MultiHeadAttention(nn.Module): __init__(self, d_model, h); "
       "forward(self, x, mask=None, *, causal=False, cache=None)")


def test_a_class_signature_gives_its_constructor_and_forward_as_the_module_call():
    found = entry_defaults("MultiHeadAttention", "class", MHA)
    assert found["MultiHeadAttention"] == Params(("d_model", "h"), {})
    assert found["MultiHeadAttention.__call__"] == Params(("x", "mask"), {"mask": None, "causal": False, "cache": None})


def test_a_function_signature_gives_its_defaults():
    assert entry_defaults("padding_mask", "function", 'padding_mask(lengths, max_len, side="right", device=None)') == {
        "padding_mask": Params(("lengths", "max_len", "side", "device"), {"side": "right", "device": None})}


def test_text_that_is_not_python_parameters_gives_no_defaults():
    assert parse_params("q, k, v, mask: (B, T)?") is None
    assert entry_defaults("f", "function", "f(q, k, v, mask: ?)") == {}


def test_arguments_equal_to_their_defaults_are_left_out_and_others_kept():
    forward = entry_defaults("M", "class", MHA)["M.__call__"]
    assert without_defaults(forward, ("x", None), {"causal": False, "cache": None}) == (("x",), {})
    assert without_defaults(forward, ("x", "keep"), {"causal": True}) == (("x", "keep"), {"causal": True})
    # 0 is not False, and a positional default in the middle stays (the later ones keep their positions)
    assert without_defaults(forward, ("x",), {"causal": 0}) == (("x",), {"causal": 0})
    pad = Params(("lengths", "max_len", "side", "device"), {"side": "right", "device": None})
    assert without_defaults(pad, ("l", 5, "right", "meta"), {}) == (("l", 5, "right", "meta"), {})
    assert without_defaults(pad, ("l", 5, "right", None), {}) == (("l", 5), {})


def test_an_unknown_callable_keeps_its_call_as_written():
    assert without_defaults(None, ("x", None), {"causal": False}) == (("x", None), {"causal": False})

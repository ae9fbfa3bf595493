"""The tensor-free diagnoses: placeholders, entry points rebound by a later statement, exception patterns."""

from __future__ import annotations

import keyword

from hypothesis import given, strategies as st

from grader.checks.diagnose import (NOT_IMPLEMENTED, Rebinding, concept_of_exception, find_rebinding,
                                    not_implemented_message, wrong_kind_message)
from grader.submission.load import CodeUnit


def cell(n: int, source: str) -> CodeUnit:
    return CodeUnit(f"code cell {n}", n, source)


# --- NotImplementedError: no concept, no hint -------------------------------------------------

TB_METHOD = ('Traceback (most recent call last):\n  File "<submission: mha.py>", line 9, in __init__\n'
             '    raise NotImplementedError\nNotImplementedError\n')


def test_a_placeholder_is_named_with_its_class():
    units = [CodeUnit("mha.py", None, "import torch\n\n\nclass KVCache:\n    x = 1\n\n\nclass Other:\n"
                                      "    def __init__(self):\n        raise NotImplementedError\n")]
    assert str(not_implemented_message("NotImplementedError", "", TB_METHOD, units)) == (
        "Not implemented yet: Other.__init__ still raises NotImplementedError. Write it, then check again.")


def test_a_placeholder_function_and_its_message():
    tb = 'File "<submission: code cell 3>", line 2, in causal_mask\n    raise NotImplementedError("todo")\n'
    msg = str(not_implemented_message("NotImplementedError", "todo", tb))
    assert msg == "Not implemented yet: causal_mask still raises NotImplementedError (todo). Write it, then check again."


def test_pytorchs_own_not_implemented_error_is_no_placeholder():
    """.item() on a meta tensor raises NotImplementedError inside PyTorch: the student's line is a
    call, not a `raise`, so the code is written and the case judges it."""
    tb = ('File "<submission: attention.py>", line 7, in masked_attention\n    if mask.any().item():\n'
          'NotImplementedError: aten::_local_scalar_dense: cannot be called on meta tensors\n')
    assert not_implemented_message("NotImplementedError", "cannot be called on meta tensors", tb) is None


def test_other_exceptions_are_no_placeholder():
    assert not_implemented_message("ValueError", "x", TB_METHOD) is None
    assert str(not_implemented_message("NotImplementedError", "", "")).startswith(
        f"{NOT_IMPLEMENTED}: your code raised NotImplementedError")


# --- an entry point rebound after its def ------------------------------------------------------

def test_a_demo_cell_that_rebinds_the_function_is_found():
    units = [cell(1, "import torch"), cell(2, "def causal_mask(n):\n    return torch.ones(n, n).tril().bool()"),
             cell(3, "seq_len = 4\n\ncausal_mask = causal_mask(seq_len)\nprint(causal_mask)")]
    assert find_rebinding(units, "causal_mask") == Rebinding("code cell 3", 3, "causal_mask = causal_mask(seq_len)")


def test_a_def_after_the_rebinding_makes_it_a_function_again():
    units = [cell(1, "causal_mask = None"), cell(2, "def causal_mask(n):\n    pass")]
    assert find_rebinding(units, "causal_mask") is None


def test_every_kind_of_module_level_binding_is_found():
    for stmt in ("f = 1", "f: int = 1", "f += 1", "for f in range(3): pass", "with open('x') as f: pass",
                 "import os as f", "from os import path as f", "if True:\n    f = 2", "a, (b, f) = 1, (2, 3)"):
        units = [cell(1, "def f():\n    pass"), cell(2, stmt)]
        assert find_rebinding(units, "f") is not None, stmt


def test_bindings_inside_functions_or_of_other_names_are_not_rebindings():
    units = [cell(1, "def f():\n    f = 3\n    return f"), cell(2, "g = f()\nclass C:\n    f = 2")]
    assert find_rebinding(units, "f") is None


def test_a_cell_that_does_not_parse_is_skipped():
    assert find_rebinding([cell(1, "def f(:"), cell(2, "f = 1")], "f") == Rebinding("code cell 2", 1, "f = 1")


@given(st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True).filter(lambda n: not keyword.iskeyword(n)),
       st.integers(0, 5))
def test_the_last_module_level_assignment_wins(name, blank_lines):
    units = [cell(1, f"def {name}():\n    pass"), cell(2, "\n" * blank_lines + f"{name} = {name}()")]
    assert find_rebinding(units, name) == Rebinding("code cell 2", blank_lines + 1, f"{name} = {name}()")


def test_the_message_names_the_type_and_the_cell_and_has_an_article():
    r = Rebinding("code cell 7", 3, "causal_mask = causal_mask(seq_len)")
    msg = str(wrong_kind_message("causal_mask", "function", "causal_mask(q_len)", "other", "torch.Tensor", r))
    assert msg == ("'causal_mask' should be a function (causal_mask(q_len)) but is a torch.Tensor: code cell 7, "
                   "line 3 rebinds it (`causal_mask = causal_mask(seq_len)`). Give the value another name.")
    assert " an int." in str(wrong_kind_message("f", "function", "f()", "other", "int"))
    assert " is None." in str(wrong_kind_message("f", "function", "f()", "other", "NoneType"))
    assert " is a function." in str(wrong_kind_message("C", "class", "class C", "function"))
    assert "a other" not in str(wrong_kind_message("f", "function", "f()", "other"))


# --- exceptions that name a mistake ------------------------------------------------------------

def test_a_float32_mask_promoting_half_scores_is_not_an_overflow():
    promoted = "expected m1 and m2 to have the same dtype, but got: float != c10::Half"
    assert concept_of_exception("RuntimeError", promoted, "dtype-overflow") == "mask-dtype-promotion"
    overflow = "value cannot be converted to type at::Half without overflow"
    assert concept_of_exception("RuntimeError", overflow, "mask-fill-value") == "dtype-overflow"


def test_the_type_name_from_the_worker_is_taken_only_when_it_is_a_dotted_name():
    from grader.sandbox.host.reports import valid_type_name

    assert valid_type_name("torch.Tensor") == "torch.Tensor" and valid_type_name("int") == "int"
    for forged in ("\x1b[31mred", "a b", "x" * 200, None, 3, "", "<lambda>"):
        assert valid_type_name(forged) == ""


def test_a_unit_too_long_to_parse_in_the_grader_gives_no_rebinding_hint():
    from grader.checks.diagnose import MAX_ANALYSED_CHARS

    body = "x = 1\n" * (MAX_ANALYSED_CHARS // 6 + 1)
    assert find_rebinding([cell(1, body + "f = 1\n")], "f") is None
    assert find_rebinding([cell(1, "x = 1\n" * 100 + "f = 1\n")], "f") == Rebinding("code cell 1", 101, "f = 1")


def test_the_rebinding_line_is_counted_as_python_counts_lines():
    units = [cell(1, "def f():\r    pass\rx = 1;\x0cf = 2\r\nprint(f)")]
    assert find_rebinding(units, "f") == Rebinding("code cell 1", 3, "x = 1;\x0cf = 2")

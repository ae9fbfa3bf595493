"""Broken and hostile submissions through the whole engine: each fault costs only its own cases."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from grader.assignments import load_assignment
from grader.engine import Engine, limits_for
from grader.results import Outcome
from grader.sandbox import Sandbox

ROOT = Path(__file__).resolve().parents[2]
CORRECT = (ROOT / "submissions/masked-attention/correct/reference_style.py").read_text()


@pytest.fixture(scope="module")
def engine():
    a = load_assignment("masked-attention")
    limits = dataclasses.replace(limits_for(a), call_timeout_s=3.0)
    with Sandbox(limits) as sb:
        yield Engine(a, sb)


def grade(engine, tmp_path, source: str | bytes, name="student.py"):
    p = tmp_path / name
    p.write_bytes(source if isinstance(source, bytes) else source.encode())
    return engine.grade_path(p)


def by_id(report):
    return {c.id: c for c in report.cases}


def test_missing_function_names_what_was_found(engine, tmp_path):
    src = CORRECT.replace("def masked_attention(", "def attention(")
    report = grade(engine, tmp_path, src)
    c = by_id(report)["attention_basic"]
    assert c.outcome is Outcome.ERROR and c.concept == "signature"
    assert "defines no 'masked_attention'" in c.message and "attention" in c.message.split("found:")[1]
    assert by_id(report)["causal_mask_square"].outcome is Outcome.PASSED


def test_syntax_error_gives_a_report_with_zero_and_the_reason(engine, tmp_path):
    report = grade(engine, tmp_path, "def causal_mask(:\n    pass\n")
    assert report.score.earned == 0 and report.score.possible > 0
    assert not report.load.ok
    assert all(c.outcome is Outcome.ERROR and c.concept == "load-error" for c in report.cases)
    assert "SyntaxError" in report.load.message or "syntax" in report.load.message.lower()


def test_non_utf8_file_is_a_clear_load_error(engine, tmp_path):
    report = grade(engine, tmp_path, b"x = '\xff\xfe'\n")
    assert not report.load.ok and "UTF-8" in report.load.message
    assert all(c.concept == "load-error" for c in report.cases)


def test_hang_in_one_case_times_out_that_case_only(engine, tmp_path):
    src = CORRECT + '''
_orig = masked_attention
def masked_attention(q, k, v, mask=None):
    if q.dtype == torch.bfloat16:
        while True:
            pass
    return _orig(q, k, v, mask)
'''
    report = grade(engine, tmp_path, src)
    bf16 = {"attention_half[bfloat16]", "bf16_pad_causal", "option_pairs[bf16,empty-rows]",
            "option_pairs[bf16,decode,left]"}  # every case that calls it with bfloat16 inputs
    for cid in bf16:
        assert (by_id(report)[cid].outcome, by_id(report)[cid].concept) == (Outcome.TIMEOUT, "timeout"), cid
    others = [c for c in report.cases if c.id not in bf16]
    assert all(c.outcome is Outcome.PASSED for c in others), [c.id for c in others if c.outcome is not Outcome.PASSED]


def test_exit_during_a_call_costs_that_case_only(engine, tmp_path):
    src = CORRECT + '''
import os
_orig = masked_attention
def masked_attention(q, k, v, mask=None):
    if q.shape[-2] == 37:
        os._exit(0)
    return _orig(q, k, v, mask)
'''
    report = grade(engine, tmp_path, src)
    cases = by_id(report)
    assert cases["basic_nomask"].outcome is Outcome.ERROR and cases["basic_nomask"].concept == "crash"
    assert cases["causal_square"].outcome is Outcome.PASSED


def test_tensor_subclass_and_lies_are_not_believed(engine, tmp_path):
    src = CORRECT + '''
class Liar(torch.Tensor):
    def __eq__(self, other):
        return True
torch.allclose = lambda *a, **k: True
_orig = masked_attention
def masked_attention(q, k, v, mask=None):
    out, w = _orig(q, k, v, mask)
    return torch.zeros_like(out).as_subclass(Liar), w
'''
    report = grade(engine, tmp_path, src)
    c = by_id(report)["attention_basic"]
    assert c.outcome is not Outcome.PASSED
    assert c.concept == "signature"


def test_student_error_is_reported_with_their_traceback(engine, tmp_path):
    src = CORRECT.replace("def causal_mask(", "def causal_mask(*a, **k):\n    raise KeyError('boom')\n\ndef _unused(")
    report = grade(engine, tmp_path, src)
    c = by_id(report)["causal_mask_square"]
    assert c.outcome is Outcome.ERROR
    assert "KeyError" in c.message and "boom" in c.message
    assert c.evidence.traceback and "student.py" in c.evidence.traceback


def test_empty_notebook_is_a_load_error(engine, tmp_path):
    report = grade(engine, tmp_path, b"", name="empty.ipynb")
    assert not report.load.ok and report.score.earned == 0

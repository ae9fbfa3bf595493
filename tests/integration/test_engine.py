"""Broken and hostile submissions through the whole engine: each fault costs only its own cases."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from grader.assignment.spec import load_assignment
from grader.grading.engine import Engine, limits_for
from grader.results import Outcome

ROOT = Path(__file__).resolve().parents[2]
CORRECT = (ROOT / "submissions/masked-attention/correct/reference_style.py").read_text()


@pytest.fixture(scope="module")
def engine(sandbox_for):
    a = load_assignment("masked-attention")
    return Engine(a, sandbox_for(dataclasses.replace(limits_for(a), call_timeout_s=3.0)))


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
    assert "defines no 'masked_attention'" in str(c.message) and "attention" in str(c.message).split("found:")[1]
    assert by_id(report)["causal_mask_square"].outcome is Outcome.PASSED


def test_syntax_error_gives_a_report_with_zero_and_the_reason(engine, tmp_path):
    report = grade(engine, tmp_path, "def causal_mask(:\n    pass\n")
    assert report.score.earned == 0 and report.score.possible > 0
    assert not report.load.ok
    assert all(c.outcome is Outcome.ERROR and c.concept == "load-error" for c in report.cases)
    assert "SyntaxError" in str(report.load.message) or "syntax" in str(report.load.message).lower()
    # said once: the first case carries the reason, the others that they did not run
    first, *rest = report.cases
    assert "SyntaxError" in str(first.message) or "syntax" in str(first.message).lower()
    assert {str(c.message) for c in rest} == {"Not run: the file does not load."}


def test_non_utf8_file_is_a_clear_load_error(engine, tmp_path):
    report = grade(engine, tmp_path, b"x = '\xff\xfe'\n")
    assert not report.load.ok and "UTF-8" in str(report.load.message)
    assert all(c.concept == "load-error" for c in report.cases)


@pytest.mark.slow
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
            "option_pairs[bf16,decode,left]", "value_size_padded"}  # every case that calls it with bfloat16 inputs
    for cid in bf16:
        assert (by_id(report)[cid].outcome, by_id(report)[cid].concept) == (Outcome.TIMEOUT, "timeout"), cid
    others = [c for c in report.cases if c.id not in bf16]
    assert all(c.outcome is Outcome.PASSED for c in others), [c.id for c in others if c.outcome is not Outcome.PASSED]


@pytest.mark.slow
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


def test_the_restart_cap_costs_only_the_entry_point_that_keeps_crashing(engine, tmp_path):
    src = CORRECT + '''
import os
def masked_attention(q, k, v, mask=None):
    os._exit(3)
'''
    report = grade(engine, tmp_path, src)
    attention = [c for c in report.cases if "masked_attention" in _uses(engine, c.id)]
    crashed = [c for c in attention if c.concept == "crash"]
    not_run = [c for c in attention if c.concept == "not-run"]
    cap = engine.sandbox.limits.max_restarts
    assert len(crashed) == cap + 1 and len(not_run) == len(attention) - cap - 1 > 0
    assert all(c.outcome is Outcome.ERROR for c in not_run)
    assert str(not_run[0].message).startswith(f"Not run: cases calling masked_attention crashed or timed out {cap + 1} times")
    others = [c for c in report.cases if c not in attention]
    assert others and all(c.outcome is Outcome.PASSED for c in others), [c.id for c in others if c.outcome is not Outcome.PASSED]
    assert "not-run" not in report.concepts_failed() and "crash" in report.concepts_failed()


def _uses(engine, case_id):
    return next(i.case.uses for i in engine.instances if i.id == case_id)


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
    assert "KeyError" in str(c.message) and "boom" in str(c.message)
    assert c.evidence.traceback and "student.py" in c.evidence.traceback


def test_empty_notebook_is_a_load_error(engine, tmp_path):
    report = grade(engine, tmp_path, b"", name="empty.ipynb")
    assert not report.load.ok and report.score.earned == 0


# --- outcomes come from facts the grader controls, never from what a submission says ---------------

HOSTILE = ROOT / "tests" / "data" / "hostile"


HIDDEN_CALL = "ARGS causal_mask: 4, 7, 'meta'"
"""What prints_args.py prints for the hidden case causal_mask_device (q_len=4, k_len=7 on meta);
no public case makes that call."""


def _failing(report) -> set[str]:
    return {c.id for c in report.cases if c.outcome is not Outcome.PASSED}


def test_a_forged_meta_message_never_makes_a_pass(engine):
    honest = engine.grade_path(ROOT / "submissions/masked-attention/buggy/cpu_mask.py")
    forged = engine.grade_path(HOSTILE / "forged_meta_message.py")
    device_cases = {i.id for i in engine.instances if i.case.concept == "device-placement"}
    assert _failing(honest) == _failing(forged) == device_cases
    assert forged.score == honest.score and forged.score.earned < forged.score.possible
    c = by_id(forged)["attention_device"]
    # It raises NotImplementedError itself (a `raise` line): that is code not written, whatever it says.
    assert c.outcome is Outcome.ERROR and str(c.message).startswith("Not implemented yet")
    assert "Inconclusive" not in str(c.message)


def test_the_reference_decides_whether_a_meta_case_can_be_judged(engine):
    device_cases = [i for i in engine.instances if i.case.concept == "device-placement"]
    assert device_cases and all(engine.reference_runs(i) for i in device_cases)


def test_words_of_a_timeout_in_an_import_error_are_a_load_error(engine):
    report = engine.grade_path(HOSTILE / "time_words_at_import.py")
    assert not report.load.ok and "ran out of time" in str(report.load.message)
    assert {(c.outcome, c.concept) for c in report.cases} == {(Outcome.ERROR, "load-error")}


@pytest.mark.slow
def test_a_real_import_timeout_is_a_timeout(engine, monkeypatch):
    monkeypatch.setattr(engine.sandbox, "limits", dataclasses.replace(engine.sandbox.limits, import_timeout_s=1.0))
    report = engine.grade_path(HOSTILE / "spin_at_import.py")
    assert not report.load.ok
    assert {(c.outcome, c.concept) for c in report.cases} == {(Outcome.TIMEOUT, "timeout")}


def test_output_printed_once_hidden_cases_started_is_kept_apart(engine):
    report = engine.grade_path(HOSTILE / "prints_args.py")
    assert report.score.earned == report.score.possible
    assert report.load.stdout.startswith("LOADED:") and "ARGS masked_attention" in report.load.stdout
    assert HIDDEN_CALL not in report.load.stdout + report.load.stderr
    assert HIDDEN_CALL in report.load.hidden_stdout


def test_nasty_text_from_a_worker_is_made_safe_on_arrival(engine):
    import nasty

    report = engine.grade_path(HOSTILE / "nasty_text.py")
    c = by_id(report)["causal_mask_square"]
    assert c.outcome is Outcome.ERROR and "@org/team" in str(c.message) and "notes_\ufffd.txt" in str(c.message)
    texts = [report.load.stdout, str(c.message), c.evidence.traceback] + [str(x.message) for x in report.cases]
    assert all(nasty.bad_chars(t) == [] for t in texts)
    assert len(c.evidence.traceback) < 70_000 and len(report.load.stdout) <= 64 << 10
    assert by_id(report)["attention_basic"].outcome is Outcome.PASSED


@pytest.mark.slow  # the whole assignment, graded once
def test_a_worker_never_holds_a_request_but_the_one_it_answers(engine):
    """The worker's channel is readable by the student's code: peeks_channel.py looks at it during
    every call it serves and prints what it finds waiting there. One request, one reply: nothing
    ever waits (so no hidden case's inputs sit where a submission can read them before it runs)."""
    report = engine.grade_path(ROOT / "tests" / "data" / "hostile" / "peeks_channel.py")
    assert report.score.earned == report.score.possible
    peeks = [line.split()[1:] for line in (report.load.stdout + report.load.hidden_stdout).splitlines()
             if line.startswith("PEEK")]
    assert len(peeks) > 20 and not any(peeks)


def test_the_references_run_in_the_jail_spares_replaying_it_here(sandbox_for, tmp_path, monkeypatch):
    """A batch proves the reference in the jail before grading: every case it passed there, it got
    through, so a submission raising on a device case is judged without running the reference again
    in this process (its first meta op costs about a second, once per slot process)."""
    import grader.grading.engine as engine_module
    from grader.grading.factory import prove_reference
    from grader.grading.reference_run import ReferenceWorker

    a = load_assignment("masked-attention")
    src = CORRECT.replace("def causal_mask(", "def causal_mask_(") + \
        "\n\ndef causal_mask(q_len, k_len=None):\n    raise TypeError('no device argument here')\n"
    fresh, proven = (Engine(a, sandbox_for(limits_for(a))) for _ in range(2))
    prove_reference(proven)
    replays = []
    monkeypatch.setattr(engine_module, "ReferenceWorker", lambda ref: replays.append(ref) or ReferenceWorker(ref))

    def verdicts(engine):
        return {c.id: (c.outcome, c.concept, str(c.message)) for c in grade(engine, tmp_path, src).cases}

    by_proven = verdicts(proven)
    assert replays == []
    assert verdicts(fresh) == by_proven
    assert replays  # the engine that had not seen the reference's run replayed it for the device cases
    assert by_proven["causal_mask_on_device"][0] is Outcome.ERROR  # raising is not inconclusive: the reference ran

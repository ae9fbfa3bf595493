"""Slot processes (`-j N` on the CPU, grader/batch/slots.py): every result comes back whole and is taken
once; a slot process that dies costs the submission it was grading and nothing else; none outlives
the batch."""

import os
import threading

import pytest

from grader.batch import slots
from grader.assignment.spec import load_assignment
from grader.grading.engine import Engine
from grader.assignment.fingerprint import Fingerprint
from grader.records.ledger import LedgerKey
from grader.results import SubmissionInfo, to_dict

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="slot processes need fork()")


class _NoSandbox:
    isolation = "none (test)"
    limits_note = ""

    def __init__(self):
        self.shared = False

    def share_with_forks(self):
        self.shared = True

    def adopt_after_fork(self):
        pass

    def close(self):
        pass


class _Engine(Engine):
    """A real Engine whose grading is scripted per submission name (no worker involved)."""

    def grade(self, sub, *, student_id=None, worker=None):
        if sub == "dies":
            os._exit(3)  # the slot process itself goes away mid-submission
        if sub == "raises":
            raise ValueError("a grader fault")
        info = SubmissionInfo(id=student_id, sha256="0" * 64, filename=f"{sub}.py", kind="py")
        return self.report_without_results(info, "load-error", f"scripted report for {sub}")


class _Tally:
    def __init__(self):
        self.taken = []

    def take(self, key, report, seconds, error, data=None):
        self.taken.append((key.student_id, report, error, data))


def _key(name):
    return LedgerKey(name, "0" * 64, "masked-attention", "all@cpu", Fingerprint("c", "r", "s", "0"))


def _children():
    me = os.getpid()
    with open(f"/proc/{me}/task/{me}/children") as f:
        return {int(x) for x in f.read().split()}


def test_results_come_back_whole_and_a_dead_slot_costs_only_its_submission():
    engine = _Engine(load_assignment("masked-attention"), _NoSandbox())
    names = [f"ok{i}" for i in range(6)] + ["raises", "dies"] + [f"late{i}" for i in range(4)]
    todo = [(_key(n), n) for n in names]
    tally = _Tally()
    before = _children()
    slots.run(engine, engine.sandbox, todo, 2, tally, threading.Event(), debug=False)

    taken = {name: (report, error, data) for name, report, error, data in tally.taken}
    assert sorted(taken) == sorted(names) and len(tally.taken) == len(names)  # each exactly once
    for name in names:
        report, error, data = taken[name]
        if name == "raises":
            assert report is None and error == "ValueError: a grader fault"
        elif name == "dies":
            assert report is None and "the grading process for this submission died (exit code 3)" in error
        else:  # graded by whichever slot was left, as the same report the engine built
            assert error == "" and report.submission.id == name
            assert str(report.load.message) == f"scripted report for {name}"
            assert data == to_dict(report)
    assert engine.sandbox.shared
    assert _children() <= before  # no slot process outlives the batch


def test_a_stop_hands_out_nothing_new():
    engine = _Engine(load_assignment("masked-attention"), _NoSandbox())
    stop = threading.Event()
    stop.set()
    todo = [(_key(f"s{i}"), f"s{i}") for i in range(8)]
    tally = _Tally()
    slots.run(engine, engine.sandbox, todo, 2, tally, stop, debug=False)
    assert len(tally.taken) <= 2  # at most the one each slot already had


class _SlowEngine(_Engine):
    def grade(self, sub, *, student_id=None, worker=None):
        import time

        time.sleep(0.05)
        return super().grade(sub, student_id=student_id)


def test_a_stop_while_grading_skips_what_was_handed_out_but_not_started():
    engine = _SlowEngine(load_assignment("masked-attention"), _NoSandbox())
    stop = threading.Event()

    class _StopAtFirst(_Tally):
        def take(self, key, report, seconds, error, data=None):
            super().take(key, report, seconds, error, data)
            stop.set()

    todo = [(_key(f"s{i}"), f"s{i}") for i in range(20)]
    tally = _StopAtFirst()
    before = _children()
    slots.run(engine, engine.sandbox, todo, 2, tally, stop, debug=False)
    # The first result, then per slot at most the one it was grading and one it may have begun
    # before the stop reached it; the others handed to it (three at a time) come back as skipped,
    # neither taken nor reported as errors.
    assert 1 <= len(tally.taken) <= 5
    assert all(error == "" and report is not None for _, report, error, _ in tally.taken)
    assert _children() <= before


def test_what_a_dead_slot_held_but_had_not_started_is_graded_by_another():
    engine = _Engine(load_assignment("masked-attention"), _NoSandbox())
    names = ["dies"] + [f"ok{i}" for i in range(7)]  # the first slot is handed "dies", ok0 and ok1
    todo = [(_key(n), n) for n in names]
    tally = _Tally()
    before = _children()
    slots.run(engine, engine.sandbox, todo, 2, tally, threading.Event(), debug=False)
    taken = {sid: (report, error) for sid, report, error, _ in tally.taken}
    assert sorted(taken) == sorted(names) and len(tally.taken) == len(names)  # every one exactly once
    assert taken["dies"][0] is None and "died" in taken["dies"][1]
    assert all(taken[n][0] is not None and taken[n][1] == "" for n in names[1:])
    assert _children() <= before

"""Requests sent ahead (the call plan learned from the trusted reference) never change a grade.

A batch learns, from the reference graded in a real worker, the requests each case makes, and
sends them to every later worker in one write (``Engine.learn_calls``, ``Worker.send_ahead``).
Whatever a submission does, its report must be the one a straight run (one round trip per call)
gives: same outcomes, same messages, same evidence, same captured output.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from grader.assignment.spec import load_assignment
from grader.grading.call_plan import learn_calls
from grader.grading.engine import Engine, limits_for
from grader.submission.load import load_submission
from grader.results import Outcome, to_dict
from grader.sandbox import OffPlan, Sandbox

pytestmark = pytest.mark.slow  # full tier: every sample graded twice, straight and planned

ROOT = Path(__file__).resolve().parents[2]
MASKED = ROOT / "submissions/masked-attention"
CORRECT = (MASKED / "correct/reference_style.py").read_text()

# Right everywhere except rows with no visible key (NaN there, so `fully_masked_rows` fails its
# forward check and never asks for gradients), and wrong for good once it has been called with
# inputs that require grad. A straight run never makes that gradient call; a worker that ran the
# planned calls regardless would have, and every case after it would fail.
HISTORY_DEPENDENT = CORRECT.replace('''    scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    # A row with no visible key is softmax(all -inf) = NaN: replace it by zeros.
    has_key = mask.any(dim=-1, keepdim=True)
    weights = torch.where(has_key, weights, torch.zeros((), dtype=weights.dtype, device=weights.device))
    return torch.matmul(weights, v), weights''', '''    global _poisoned
    _poisoned = _poisoned or q.requires_grad
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if _poisoned:
        weights = weights * 0.5
    return torch.matmul(weights, v), weights''') + "\n_poisoned = False\n"

# Hangs on its half-precision calls only: those cases time out, the others pass.
HANGS_ON_FP16 = CORRECT.replace('''    scale = 1.0 / math.sqrt(q.shape[-1])''', '''    if q.dtype == torch.float16:
        while True:
            pass
    scale = 1.0 / math.sqrt(q.shape[-1])''')

# Prints on every call, and exits the process on its bfloat16 call.
PRINTS_AND_EXITS = CORRECT.replace('''    scale = 1.0 / math.sqrt(q.shape[-1])''', '''    print("called with", tuple(q.shape), q.dtype)
    if q.dtype == torch.bfloat16:
        import os
        os._exit(3)
    scale = 1.0 / math.sqrt(q.shape[-1])''')


def _comparable(report) -> dict:
    d = to_dict(report)
    d.pop("graded_at")
    for c in d["cases"]:
        c.pop("duration_s")
    return d


def _engine_pair(assignment_id: str):
    """(straight engine, engine with a learned plan) on one sandbox."""
    a = load_assignment(assignment_id)
    limits = dataclasses.replace(limits_for(a), call_timeout_s=2.0)
    with Sandbox(limits) as sb:
        straight = Engine(a, sb)
        straight.prepare()
        planned = Engine(a, sb)
        planned.share_setups_from(straight)
        learn_calls(planned, a)
        yield straight, planned


@pytest.fixture(scope="module", params=["masked-attention", "mha-kv-cache"])
def engines(request):
    yield from _engine_pair(request.param)


@pytest.fixture(scope="module")
def masked_engines():
    yield from _engine_pair("masked-attention")


def _samples(assignment_id: str) -> list[Path]:
    folder = ROOT / "submissions" / assignment_id
    return sorted(p for p in folder.glob("*/*") if p.suffix in (".py", ".ipynb"))


def test_the_plan_is_learned_from_the_reference(engines):
    straight, planned = engines
    assert not straight.plan.requests
    assert set(planned.plan.requests) == {i.id for i in planned.instances}  # the reference passes every case
    assert all(planned.plan.requests.values())


def test_every_sample_gets_the_straight_runs_report(engines):
    straight, planned = engines
    samples = _samples(straight.assignment.id)
    assert len(samples) >= 5
    for path in samples:
        assert _comparable(planned.grade_path(path)) == _comparable(straight.grade_path(path)), path.name


def test_correct_samples_stay_on_the_plan(engines):
    straight, planned = engines
    planned.plan.stops.clear()
    for path in sorted((ROOT / "submissions" / straight.assignment.id / "correct").glob("*")):
        report = planned.grade_path(path)
        assert report.score.earned == report.score.possible, path.name
    assert planned.plan.stops == {}


@pytest.mark.parametrize("source", [HISTORY_DEPENDENT, HANGS_ON_FP16, PRINTS_AND_EXITS],
                         ids=["history-dependent", "hangs-on-fp16", "prints-and-exits"])
def test_submissions_that_leave_the_plan_get_the_straight_runs_report(masked_engines, tmp_path, source):
    straight, planned = masked_engines
    path = tmp_path / "attention.py"
    path.write_text(source)
    want = straight.grade_path(path)
    planned.plan.stops.clear()  # as for the first submission of a batch to leave the plan here
    got = planned.grade_path(path)
    assert _comparable(got) == _comparable(want)
    failed = {c.id for c in got.cases if c.outcome is not Outcome.PASSED}
    if source is HISTORY_DEPENDENT:
        assert failed == {"attention_empty_row", "fully_masked_rows", "fp16_fully_masked",
                          "option_pairs[bf16,empty-rows]", "option_pairs[fp64,empty-rows]"}
    elif source is HANGS_ON_FP16:
        assert {c.outcome for c in got.cases if c.id in failed} == {Outcome.TIMEOUT}
        assert failed == {"attention_half[float16]", "fp16_pad_causal", "fp16_fully_masked", "large_logits[fp16]",
                          "option_pairs[fp16,none]", "option_pairs[fp16,chunk,right]"}
    else:
        printed = [(r.load.stdout.count("called with"), r.load.hidden_stdout.count("called with")) for r in (got, want)]
        assert printed[0] == printed[1] and sum(printed[0]) > 5


def test_a_hidden_cases_requests_are_never_readable_before_it_starts(masked_engines):
    """The worker's channel is readable by the student's code: peeks_channel.py prints a fingerprint
    of every request frame queued on it at each of its calls. Every peek must show public cases'
    requests only, or the requests of the one hidden case that is running (sent all at once, as
    before, the first public call saw every hidden case's inputs)."""
    import hashlib

    straight, planned = masked_engines
    planned.plan.stops.clear()
    report = planned.grade_path(ROOT / "tests" / "data" / "hostile" / "peeks_channel.py")
    assert report.score.earned == report.score.possible
    hidden = {i.id for i in planned.instances if i.case.hidden}
    case_of = {hashlib.sha256(f).hexdigest()[:16]: i.id for i in planned.instances for f in planned.plan.requests.get(i.id, [])}
    peeks = [line.split()[1:] for line in (report.load.stdout + report.load.hidden_stdout).splitlines()
             if line.startswith("PEEK")]
    assert len(peeks) > 20 and any(peeks)  # it did see public requests queued ahead
    for peek in peeks:
        cases = {case_of.get(h, "?") for h in peek}
        assert cases <= {i.id for i in planned.instances if not i.case.hidden} or (len(cases) == 1 and cases <= hidden), cases
    plain = straight.grade_path(ROOT / "tests/data/hostile/peeks_channel.py")  # what it peeks differs, not how it scores
    assert [(c.id, c.outcome) for c in report.cases] == [(c.id, c.outcome) for c in plain.cases]


def test_public_requests_go_in_one_write_and_hidden_ones_one_case_at_a_time(masked_engines, monkeypatch):
    """Each hidden case's requests go alone, when the worker holds nothing else (it has answered
    every call of the case before), and that case is the next to run."""
    from grader.sandbox import Worker

    _, planned = masked_engines
    planned.plan.stops.clear()
    owner = {f: i.id for i in planned.instances for f in planned.plan.requests.get(i.id, [])}
    hidden = {i.id for i in planned.instances if i.case.hidden}
    events: list[tuple] = []
    send_ahead, run_one = Worker.send_ahead, Engine.run_case

    def logged_send(self, frames):
        frames = list(frames)
        events.append(("send", frozenset(owner.get(f, "load") for f in frames), self.queued))
        return send_ahead(self, frames)

    def logged_run(self, inst, worker, *args, **kwargs):
        events.append(("run", inst.id))
        return run_one(self, inst, worker, *args, **kwargs)

    monkeypatch.setattr(Worker, "send_ahead", logged_send)
    monkeypatch.setattr(Engine, "run_case", logged_run)
    report = planned.grade_path(MASKED / "correct/sdpa.py")
    assert report.score.earned == report.score.possible
    sends = [e for e in events if e[0] == "send"]
    public = {i.id for i in planned.instances if not i.case.hidden and planned.plan.requests.get(i.id)}
    assert sends[0][1] == public and not sends[0][1] & hidden  # the public cases, in one write
    hidden_sends = [(k, e) for k, e in enumerate(events) if e[0] == "send" and e[1] & hidden]
    assert len(hidden_sends) == len(hidden)
    for k, (_, cases, queued) in hidden_sends:
        assert len(cases) == 1 and queued == 0
        assert next(e for e in events[k:] if e[0] == "run") == ("run", next(iter(cases)))


def test_a_request_off_the_plan_is_refused_before_it_is_sent(tmp_path):
    """The worker-level contract: the next request must be the next frame sent ahead."""
    path = tmp_path / "counter.py"
    path.write_text("calls = []\n\ndef f(x):\n    calls.append(x)\n    return list(calls)\n")
    sub = load_submission(path)
    with Sandbox() as sb:
        first = sb.open(sub)
        first.record = []
        assert [first.call("f", i) for i in (1, 2, 3)] == [[1], [1, 2], [1, 2, 3]]
        frames = first.record
        first.close()

        w = sb.open(sub)
        w.send_ahead(frames)
        assert w.queued == 3
        assert w.call("f", 1) == [1]
        with pytest.raises(OffPlan):
            w.call("f", 7)
        assert w.queued == 2
        assert w.call("f", 2) == [1, 2]  # the refused request was never sent
        assert w.call("f", 3) == [1, 2, 3] and w.queued == 0
        assert w.call("f", 4) == [1, 2, 3, 4]  # nothing queued: a plain round trip
        w.close()

        fresh = sb.open(sub)
        fresh.replay(frames[:2], timeout=5.0)
        assert fresh.queued == 0
        assert fresh.call("f", 9) == [1, 2, 9]
        fresh.close()

"""What a student's exception becomes in a case: the concept it shows, never a cause it does not."""

from types import SimpleNamespace

import pytest

from grader.assignment.spec import load_assignment
from grader.grading.outcomes import raised
from grader.results import Outcome
from grader.submission.load import LoadedSubmission


@pytest.fixture(scope="module")
def device_case():
    a = load_assignment("masked-attention")
    inst = next(i for i in a.instances() if i.case.concept == "device-placement")
    return a, inst


def _raised(a, inst, exc_type, message):
    sub = LoadedSubmission(id="s", path="s.py", kind="py", sha256="0")
    e = SimpleNamespace(exc_type=exc_type, message=message, traceback="")
    return raised(a, inst, e, sub, reference_runs=lambda: True)


def test_a_plain_python_error_on_the_meta_device_is_said_as_itself(device_case):
    a, inst = device_case
    done = _raised(a, inst, "KeyError", "'k_len'")
    assert done.outcome is Outcome.ERROR
    assert done.verdict.concept == "exception"
    assert str(done.verdict.message) == "Your code raised KeyError: 'k_len'."


def test_an_error_from_reading_a_meta_tensor_keeps_the_device_rule(device_case):
    a, inst = device_case
    done = _raised(a, inst, "RuntimeError", "Tensor.item() cannot be called on meta tensors")
    assert done.verdict.concept == "device-placement"
    assert "meta tensors have no values" in str(done.verdict.message)

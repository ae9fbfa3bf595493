"""The call plan: which requests each case sends to a worker, learned once per batch by grading the
trusted reference in a real worker (``Engine.learn_calls``). Public cases then go in one write and
hidden cases one at a time; a submission that deviates from the plan falls back to round trips.

Learning it doubles as the environment's proof: the reference must score 100 % in this machine's
jail, or nothing is graded.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from grader.errors import GraderError
from grader.grading.reference_run import reference_submission
from grader.results import Outcome
from grader.sandbox import SandboxError
from grader.submission.load import load_submission

if TYPE_CHECKING:
    from grader.assignment.spec import Assignment
    from grader.grading.engine import Engine


def learn_calls(engine: Engine, a: Assignment) -> None:
    """Grade the trusted reference once, in a worker like any other, to learn the requests each case
    makes (``Engine.learn_calls``), and to prove the environment: the reference must score 100 % in
    this machine's real jail, or nothing is graded (`GraderError`). Where the reference does not
    implement the assignment's entry points (an instructor's own assignment), nothing is learned
    and every call is its own round trip."""
    with tempfile.TemporaryDirectory(prefix="grader-plan-") as tmp:
        try:
            path = reference_submission(a, Path(tmp))
        except (GraderError, OSError):
            return
        try:
            results = engine.learn_calls(load_submission(path, main_module=a.main_module, cell_tag=a.cell_tag))
        except SandboxError as e:
            raise GraderError(f"the trusted reference could not run in this machine's sandbox ({e}); "
                              "nothing was graded") from e
    failed = [r for r in results if r.outcome is not Outcome.PASSED]
    if failed:
        listed = "; ".join(f"{r.id}: {r.message}" for r in failed[:3]) + (" ..." if len(failed) > 3 else "")
        raise GraderError(f"the trusted reference fails {len(failed)} of {len(results)} cases in this "
                          f"machine's sandbox ({engine.sandbox.isolation}), so correct code would lose "
                          f"points here; nothing was graded. {listed}")

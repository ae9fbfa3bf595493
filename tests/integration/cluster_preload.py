"""Test-only `dask worker --preload`: grading a file named kills_worker* SIGKILLs the Dask worker process,
and one named forges_* returns its report under another student's id ("additive").

The first stands in for a submission the sandbox cannot contain (the sandbox does contain memory bombs,
so no real one kills its grader): the worker dies mid-task every time it grades that file. The second
is a worker that lies: the instructor must refuse its result and grade that submission again itself.
"""

import dataclasses
import os
import signal

from grader.grading.engine import Engine


def _grade_or_die(self, sub, _grade=Engine.grade, **options):
    if os.path.basename(sub.path).startswith("kills_worker"):
        os.kill(os.getpid(), signal.SIGKILL)
    report = _grade(self, sub, **options)
    if os.path.basename(sub.path).startswith("forges_"):
        forged = dataclasses.replace(report.submission, id="additive")
        report = dataclasses.replace(report, submission=forged, score=dataclasses.replace(report.score, earned=0.0))
    return report


# Dask may run a preload twice in one process: wrap only once.
if not getattr(Engine.grade, "kills_workers", False):
    _grade_or_die.kills_workers = True
    Engine.grade = _grade_or_die

"""Test-only `dask worker --preload`: grading a file named kills_worker* SIGKILLs the Dask worker process.

It stands in for a submission the sandbox cannot contain (the sandbox does contain memory bombs, so no
real one kills its grader): the worker dies mid-task every time it grades that file.
"""

import os
import signal

from grader.grading.engine import Engine


def _grade_or_die(self, sub, *, student_id=None, _grade=Engine.grade):
    if os.path.basename(sub.path).startswith("kills_worker"):
        os.kill(os.getpid(), signal.SIGKILL)
    return _grade(self, sub, student_id=student_id)


# Dask may run a preload twice in one process: wrap only once.
if not getattr(Engine.grade, "kills_workers", False):
    _grade_or_die.kills_workers = True
    Engine.grade = _grade_or_die

"""The self-check from inside Jupyter: ``from grader import notebook``, then ``notebook.check()``.

The public names live in :mod:`grader.notebook.selfcheck`; how the running notebook is found and
its unsaved code noticed lives in :mod:`grader.notebook.locate`.
"""

from grader.notebook.selfcheck import CheckError, CheckResult, check, close, warm

__all__ = ["CheckError", "CheckResult", "check", "close", "warm"]

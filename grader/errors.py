"""Operator-facing errors: plain exceptions that the CLI (``grader.cli.common.operator_errors``)
shows as one ``Error:`` line with exit status 2, without a traceback.

Student mistakes are never raised as these; they become `CaseResult`s with an outcome.
"""

from __future__ import annotations

import difflib


class GraderError(Exception):
    """A problem with how the grader was asked to run (bad spec, missing file, busy gradebook)."""

    @property
    def message(self) -> str:
        """The sentence the operator reads."""
        return str(self)


class UnknownAssignment(GraderError):
    """A name that is no assignment here: the known ones (each once), and the closest as a guess."""

    def __init__(self, name: str, known: list[str]):
        names = sorted(set(known))
        close = difflib.get_close_matches(name, names, n=1, cutoff=0.85)
        guess = f"did you mean {close[0]!r}? " if close else ""
        if not names:
            super().__init__(f"unknown assignment {name!r}: this grader knows no assignment here. Run the "
                             "command in your kit's folder (the one holding assignments/), or pass -a with "
                             "the path of the assignment folder")
            return
        super().__init__(f"unknown assignment {name!r}; {guess}known assignments: {', '.join(names)}")


class NoSubmissions(GraderError):
    pass


class AssignmentSpecError(GraderError):
    pass


class GradebookBusy(GraderError):
    pass


class OutputNotWritable(GraderError):
    pass

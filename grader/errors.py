"""Operator-facing errors: shown as one clear line by the CLI, without a traceback.

Student mistakes are never raised as these; they become `CaseResult`s with an outcome.
"""

from __future__ import annotations

import click


class GraderError(click.ClickException):
    """A problem with how the grader was asked to run (bad spec, missing file, busy gradebook)."""

    exit_code = 2


class UnknownAssignment(GraderError):
    def __init__(self, name: str, known: list[str]):
        listing = ", ".join(sorted(known)) or "none"
        super().__init__(f"unknown assignment {name!r}; known assignments: {listing}")


class NoSubmissions(GraderError):
    pass


class AssignmentSpecError(GraderError):
    pass


class GradebookBusy(GraderError):
    pass


class OutputNotWritable(GraderError):
    pass

"""Operator-facing errors: plain exceptions that the CLI (``grader.cli.common.operator_errors``)
shows as one ``Error:`` line with exit status 2, without a traceback.

Student mistakes are never raised as these; they become `CaseResult`s with an outcome.

An error a student can meet (``grader check``, the notebook, the kit's pytest) is raised with a
translatable message (``tr(...)``): ``str(e)`` stays English, ``e.render(lang)`` is what the student
reads.
"""

from __future__ import annotations

import difflib

from grader.i18n import Msg, as_msg, tr


class GraderError(Exception):
    """A problem with how the grader was asked to run (bad spec, missing file, busy gradebook)."""

    def __init__(self, message: Msg | str = "", *args: object):
        super().__init__(str(message), *args)
        self.msg: Msg = as_msg(message) if isinstance(message, Msg) else as_msg(str(message))
        """The sentence as a message: translatable where it was raised with ``tr(...)``."""

    @property
    def message(self) -> str:
        """The sentence the operator reads."""
        return str(self)

    def render(self, lang: str) -> str:
        """The sentence in `lang` (English where it was raised as plain text)."""
        return self.msg.render(lang) if self.msg else str(self)


class UnknownAssignment(GraderError):
    """A name that is no assignment here: the known ones (each once), and the closest as a guess."""

    def __init__(self, name: str, known: list[str]):
        names = sorted(set(known))
        close = difflib.get_close_matches(name, names, n=1, cutoff=0.85)
        if not names:
            super().__init__(tr("unknown assignment {name}: this grader knows no assignment here. Run the "
                                "command in your kit's folder (the one holding assignments/), or pass -a with "
                                "the path of the assignment folder", name=repr(name)))
            return
        listed = ", ".join(names)
        if close:
            super().__init__(tr("unknown assignment {name}; did you mean {guess}? known assignments: {known}",
                                name=repr(name), guess=repr(close[0]), known=listed))
            return
        super().__init__(tr("unknown assignment {name}; known assignments: {known}", name=repr(name), known=listed))


class NoSubmissions(GraderError):
    pass


class AssignmentSpecError(GraderError):
    pass


class GradebookBusy(GraderError):
    pass


class OutputNotWritable(GraderError):
    pass

"""GitHub Actions workflow commands (``::error title=...::message``) that student text cannot hijack.

The runner reads a line as a command when it starts (after leading blanks) with ``::``, and, for
the legacy syntax, when it contains ``##[`` anywhere. Case messages can quote the student's
exception text, so everything that reaches a command is escaped as GitHub documents
(``toolkit/packages/core/src/command.ts``): data escapes ``%``, ``\\r``, ``\\n``; properties also
``:`` and ``,``. On top of that, ``::`` and ``##[`` inside text are broken up, and free-form output is
printed between ``::stop-commands::TOKEN`` and ``::TOKEN::`` with a fresh random token.

Everything here is pure: functions return lines, the CLI prints them.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable

from grader.report.text import clean
from grader.results import GradeReport, Outcome
from grader.assignment.concepts import vocabulary
from grader.i18n import N_, tr, translate

MESSAGE_LIMIT = 1000
"""Characters of one annotation's message (GitHub shows the first few lines anyway)."""
MAX_ANNOTATIONS = 10
"""GitHub keeps at most 10 error annotations per step; the rest go to the summary."""


def neutralise(text: str) -> str:
    """Remove terminal escapes and control characters, and break up ``::`` and ``##[`` so that no
    part of ``text`` can start or resume a workflow command."""
    text = clean(text)
    while "::" in text:
        text = text.replace("::", ": :")
    return text.replace("##[", "# #[")


def escape_data(text: str) -> str:
    """A command's message (after the second ``::``)."""
    return neutralise(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A command property value (``title=...``, ``file=...``)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(name: str, message: str, **properties: str | int | None) -> str:
    """One workflow command line; ``name`` and property names are ours, never student text."""
    props = ",".join(f"{k}={escape_property(str(v))}" for k, v in properties.items() if v not in (None, ""))
    return f"::{name}{' ' + props if props else ''}::{escape_data(message)}"


def _short(text: str, limit: int = MESSAGE_LIMIT) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def failure_annotations(report: GradeReport, *, file: str | None = None,
                        limit: int = MAX_ANNOTATIONS) -> list[str]:
    """``::error`` lines for the cases that did not pass, in the report's language. Hidden cases
    give their title and concept only."""
    from grader.report.view import case_message, load_message

    lang = report.lang
    lines: list[str] = []
    if not report.load.ok:
        lines.append(command("error", _short(tr("Your submission could not be loaded: {reason}",
                                                reason=load_message(report, lang)).render(lang)),
                             title=translate(N_("Submission did not load"), lang), file=file))
    failing = [c for c in report.cases if c.outcome is not Outcome.PASSED]
    vocab = vocabulary(report.concepts)
    for c in failing:
        if len(lines) >= limit:
            break
        known = vocab.get(c.concept or "")
        concept = translate(known.title, lang) if known else (c.concept or c.outcome.value)
        if c.hidden:
            text = tr("Hidden case {outcome}: {concept}.", outcome=c.outcome.value, concept=concept).render(lang)
        else:
            message = case_message(c, lang)
            text = message if concept in message else tr("{concept}. {message}", concept=concept,
                                                          message=message).render(lang)
        lines.append(command("error", _short(text), title=f"{translate(c.title, lang)} ({c.id})", file=file))
    shown = len(lines) - (0 if report.load.ok else 1)
    if len(failing) > shown and lines:
        lines.append(command("warning", tr("{n} more failing cases are listed in the job summary.",
                                           n=len(failing) - shown).render(lang),
                             title=translate(N_("More failing cases"), lang)))
    return lines


def fenced(lines: Iterable[str]) -> list[str]:
    """``lines`` wrapped so the runner ignores any command in them (for text that holds student output)."""
    token = secrets.token_hex(16)
    return [f"::stop-commands::{token}", *lines, f"::{token}::"]

"""Self-check from inside Jupyter: ``from grader import notebook``, then ``notebook.check()``.

::

    from grader import notebook
    notebook.check("causal_mask")      # the public cases that call causal_mask
    notebook.check()                   # every public case
    notebook.check(path="attention.ipynb")

Grades the notebook **as saved on disk**, in the sandbox, exactly as ``grader check`` does (the
same ``grade_one``, so the same cases, expected outputs and isolation), never the kernel's live
state. The result shows inline (``_repr_html_``: score line, failing cases with concept,
evidence and heatmaps, the hidden-case count) and as text in a console (``__repr__``).

A student's mistakes are results, never exceptions. An operator problem (no notebook found, no
assignment, no sandbox) raises ``CheckError``, which IPython shows as its one-line message.

The sandbox (its zygote, which has imported torch) stays up between checks in one kernel: each
check forks a fresh jailed worker from it, as a batch does for every submission, so nothing a
notebook's code did in one check reaches the next. It is closed at exit (and the zygote exits on
its own when the kernel dies).
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader.errors import GraderError
from grader.i18n import DEFAULT, choose, render, tr
from grader.i18n.formats import listing
from grader.notebook.locate import Located, find_notebook, install_hook, unsaved_warning

if TYPE_CHECKING:
    from grader.sandbox import Sandbox
    from grader.sandbox.host.portable import PortableSandbox

__all__ = ["CheckError", "CheckResult", "check", "close", "warm"]


class CheckError(GraderError):
    """The self-check could not run (an operator problem, not the student's code); `lang`: the
    language its message was rendered in, which its ``Error:`` label follows."""

    def __init__(self, message: str, lang: str = DEFAULT):
        super().__init__(message)
        self.lang = lang

    def _render_traceback_(self) -> list[str]:  # IPython: show this line instead of a traceback
        label, _, rest = tr("Error: {message}", message="\0").render(self.lang).partition("\0")
        return [f"\x1b[31m{label.rstrip()}\x1b[0m{label[len(label.rstrip()):]}{self}{rest}"]


# --- the warm sandbox ------------------------------------------------------------------------

class _Kept:
    """A sandbox started once (on a thread, like ``grader check``'s) and kept for later checks.
    ``grade_one`` takes it as its ``early`` sandbox; its ``close()`` keeps it running."""

    def __init__(self, folder: Path, device: str):
        from grader.grading.single import start_early

        self.pid = os.getpid()
        self._early = start_early(folder, device)

    def get(self) -> Sandbox | PortableSandbox:
        return self._early.get()

    def close(self) -> None:
        """Called by grade_one after each check: kept warm for the next one."""

    def shutdown(self) -> None:
        self._early.close()


_WARM: dict[tuple[str, str], _Kept] = {}
_LOCK = threading.Lock()


def close() -> None:
    """Stop the sandbox kept for later checks (done at exit; call it to free the memory sooner)."""
    with _LOCK:
        kept = list(_WARM.values())
        _WARM.clear()
    for k in kept:
        if k.pid == os.getpid():
            k.shutdown()


def warm() -> list[tuple[str, str]]:
    """The (assignment folder, device) pairs whose sandbox this kernel keeps for its next check."""
    with _LOCK:
        return list(_WARM)


atexit.register(close)
install_hook()  # on import (the starter's second cell): every later cell's start time is seen


def _kept(folder: Path, device: str) -> _Kept:
    key = (str(folder), device)
    with _LOCK:
        k = _WARM.get(key)
        if k is None or k.pid != os.getpid():  # a forked kernel does not share its parent's zygote
            k = _WARM[key] = _Kept(folder, device)
        return k


def _drop(folder: Path, device: str) -> None:
    with _LOCK:
        k = _WARM.pop((str(folder), device), None)
    if k is not None and k.pid == os.getpid():
        k.shutdown()


# --- check -----------------------------------------------------------------------------------

def _case_ids(folder: Path, function: str, lang: str) -> list[str]:
    """Public case instances whose case calls ``function``."""
    from grader.assignment.spec import load_assignment

    a = load_assignment(folder)
    public = a.instances(public_only=True)
    ids = [i.id for i in public if function in i.case.uses]
    if not ids:
        names = sorted({n for i in public for n in i.case.uses})
        raise CheckError(tr("no public case checks {function}; functions with public cases: {names}. Or check the "
                            "whole notebook: notebook.check()", function=repr(function),
                            names=listing(names, lang)).render(lang), lang)
    return ids


def _language(folder: Path | None) -> str:
    """What the check speaks before a report exists: the kit's language (its spec.toml ``lang``;
    without a folder yet, the one kit in the working directory), else the locale."""
    from grader.assignment.kit import find_kit
    from grader.assignment.spec import read_spec

    if folder is None:
        kits = list(find_kit(Path.cwd()).values())
        folder = kits[0] if len(kits) == 1 else None
    try:
        wanted = read_spec(folder).lang if folder is not None else None
    except Exception:  # noqa: BLE001 - a broken spec is reported by the check itself
        wanted = None
    return choose(None, wanted)


def _grade(folder: Path, nb: Path, device: str, only: list[str] | None) -> Any:
    from grader.grading.single import grade_one
    from grader.sandbox import SandboxError

    for attempt in (1, 2):
        try:
            return grade_one(folder, nb, public_only=True, device=device, only=only, early=_kept(folder, device))
        except SandboxError:
            _drop(folder, device)  # a dead zygote (the machine killed it, say): start afresh once
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def check(function: str | None = None, *, path: str | os.PathLike | None = None,
          device: str = "cpu") -> CheckResult:
    """Grade the saved notebook on the public cases (only those that call ``function``, if given).

    Args:
        function: an entry point, e.g. "causal_mask"; None checks every public case.
        path: the notebook file; default: the notebook this kernel runs (see
            ``grader.notebook.locate``).
        device: "cpu" or "cuda".

    Raises:
        CheckError: no notebook or assignment found, an unknown function, or no sandbox.
    """
    install_hook()
    start = time.perf_counter()
    lang = _language(None)
    try:
        from grader.assignment.kit import locate_assignment

        where = find_notebook(path)
        nb = where.path.resolve()
        folder = locate_assignment(None, nb)
        lang = _language(folder)
        only = _case_ids(folder, function, lang) if function else None
        graded = _grade(folder, nb, device, only)
    except CheckError:
        raise
    except GraderError as e:  # NotebookNotFound too: each says it in the student's language
        raise CheckError(e.render(lang), lang) from None
    except Exception as e:  # noqa: BLE001 - a sandbox that cannot start, a broken kit: one line
        raise CheckError(tr("the self-check could not run: {error}",
                            error=f"{type(e).__name__}: {e}").render(lang), lang) from e
    return CheckResult(graded=graded, function=function or "", located=Located(nb, where.how),
                       saved_at=_mtime(nb), warning=unsaved_warning(nb),
                       seconds=time.perf_counter() - start)


def _mtime(p: Path) -> float:
    try:
        return p.stat().st_mtime
    except OSError:
        return 0.0


# --- the result ------------------------------------------------------------------------------

@dataclass(frozen=True, repr=False)
class CheckResult:
    """One self-check: the grade_one result and what the notebook output says around it."""

    graded: Any
    """``grader.grading.single.Graded``: the GradeReport, the assignment, hidden counts."""
    function: str
    """The function checked, "" for the whole notebook."""
    located: Located
    saved_at: float
    """The graded file's modification time (seconds since the epoch)."""
    warning: Any
    """Why the student should save first, a ``Msg`` ("" when the file holds the code the kernel ran)."""
    seconds: float
    """How long the check took."""

    @property
    def report(self) -> Any:
        return self.graded.report

    @property
    def passed(self) -> bool:
        """Every public case checked here passed (and the notebook loaded)."""
        from grader.grading.single import all_passed

        return all_passed(self.report)

    @property
    def failed(self) -> list[str]:
        """Ids of the cases that did not pass."""
        return [c.id for c in self.report.cases if c.outcome.value != "passed"]

    def inline_view(self) -> Any:
        from grader.report.check_text import hidden_sentence
        from grader.report.inline import InlineView
        from grader.report.text import fmt_points

        from grader.i18n import ntr

        r, g = self.report, self.graded
        lang = r.lang
        public_total = sum(i.points for i in g.assignment.instances(public_only=True))
        total = public_total + g.hidden_points
        n = g.hidden_cases
        hidden_part = ntr("{n} hidden case at grading time", "{n} hidden cases at grading time", n) if n \
            else tr("no hidden cases")
        which = tr("Public cases for {function}", function=self.function) if self.function else tr("Public cases")
        passed = sum(c.outcome.value == "passed" for c in r.cases)
        name = self.located.path.name
        saved = time.strftime("%H:%M:%S", time.localtime(self.saved_at))
        return InlineView(
            title=(tr("Self-check of {function} in {file}", function=self.function, file=name) if self.function
                   else tr("Self-check of {file}", file=name)).render(lang),
            graded_file=tr("Graded {path} as saved at {saved} (found: {how}), in a sandbox, in {seconds} s; not what "
                           "this kernel holds.", path=str(self.located.path), saved=saved,
                           how=render(self.located.how, lang),
                           seconds=format(self.seconds, ".1f")).render(lang),
            warning=render(self.warning, lang) if self.warning else self.warning, note=render(g.note, lang),
            lead=tr("{which}: {public} of {total} points checked, {hidden}", which=which,
                    public=fmt_points(r.score.possible), total=fmt_points(total), hidden=hidden_part).render(lang),
            passed=ntr("Passed {passed} of {n} public case ({earned} / {possible} points)",
                       "Passed {passed} of {n} public cases ({earned} / {possible} points)", len(r.cases),
                       passed=passed, earned=fmt_points(r.score.earned),
                       possible=fmt_points(r.score.possible)).render(lang),
            hidden=hidden_sentence(n, g.hidden_points, lang) if n else tr("There are no hidden cases.").render(lang),
            function=self.function)

    def _repr_html_(self) -> str:
        from grader.report.inline import render_inline
        from grader.report.view import build_view

        uid = f"gc{id(self):x}{int(time.time() * 1000) % 100000}-"
        return render_inline(self.inline_view(), build_view(self.report, uid_prefix=uid), self.report.lang)

    def __repr__(self) -> str:
        """The console's text: what the inline view says, in the report's language."""
        from grader.report.check_text import case_lines, load_lines

        n, r = self.inline_view(), self.report
        lines = [n.title, n.graded_file]
        if n.warning:
            lines.append(tr("Save the notebook. {warning}", warning=n.warning).render(r.lang))
        if n.note:
            lines.append(n.note)
        lines += load_lines(r, r.lang) + case_lines(r, r.lang)
        ends = [tr("{sentence}.", sentence=part).render(r.lang) for part in (n.lead, n.passed)]
        return "\n".join(lines + ends + [n.hidden])

"""pytest plugin for the student kit: one test item per public case instance.

Activated only by a kit's own ``conftest.py`` (``pytest_plugins = ["grader.pytest_plugin"]``),
never through an entry point, so installing the grader changes no other project's pytest.

The kit's ``assignments/<id>/spec.toml`` (the one with a ``[kit]`` table) is collected as a file
whose items are the public case instances. The first item that runs grades the submission once,
through the same sandboxed engine as ``grader check`` (one sandbox, one worker for the session,
only the selected cases); each item then reports its own case: passed, or failed with the concept
and the message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from grader.assignment.concepts import vocabulary
from grader.i18n import EMPTY, Msg

SESSION_KEY = pytest.StashKey["_KitSession"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("grader", "attention-grader student kit")
    group.addoption("--submission", metavar="PATH", default=None,
                    help="File (or folder) to check [default: the kit folder, where the one of attention.py "
                         "and attention.ipynb that you changed is checked].")
    group.addoption("--grader-device", metavar="DEVICE", default="cpu",
                    help="Device to run the cases on: cpu, cuda or auto [default: cpu].")


def pytest_configure(config: pytest.Config) -> None:
    config.stash[SESSION_KEY] = _KitSession(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(SESSION_KEY, None)
    if session is not None:
        session.close()


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.name != "spec.toml" or file_path.parent.parent.name != "assignments":
        return None
    from grader.assignment.kit import kit_info

    try:
        if kit_info(file_path.parent) is None:
            return None  # a full (instructor) assignment: not ours to run as tests
    except Exception:
        return None
    return KitSpec.from_parent(parent, path=file_path)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    session = config.stash.get(SESSION_KEY, None)
    if session is None or session.hidden is None:
        return
    from grader.i18n import render, tr
    from grader.report.check_text import hidden_sentence

    n, points = session.hidden
    terminalreporter.write_sep("-", "attention-grader")
    if session.note:
        terminalreporter.write_line(render(session.note, session.lang))
    lang = session.lang
    if n:
        terminalreporter.write_line(hidden_sentence(n, points, lang))
    if session.isolation:
        terminalreporter.write_line(tr("Your code ran in a sandboxed process (isolation: {isolation}).",
                                       isolation=session.isolation).render(lang))


class _KitSession:
    """Grades the submission once per pytest session, on first use, and keeps the results."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.results: dict[str, Any] | None = None
        self.error: str | None = None
        self.hidden: tuple[int, float] | None = None
        self.isolation = ""
        self.note: Msg = EMPTY
        self.lang = "en"
        """The graded report's language (its pages' and this output's)."""

    def submission(self, folder: Path) -> Path:
        opt = self.config.getoption("--submission")
        if opt:
            return Path(opt).resolve()
        # The kit folder: grade_one grades whichever of the starter .py and .ipynb was changed.
        return folder.parent.parent.resolve()

    def result(self, folder: Path, case_id: str, selected: list[str]) -> Any:
        if self.results is None and self.error is None:
            self._grade(folder, selected)
        if self.error is not None:
            raise CaseFailure(self.error)
        return (self.results or {}).get(case_id)

    def _grade(self, folder: Path, selected: list[str]) -> None:
        from grader.grading.single import grade_one

        from grader.assignment.spec import read_spec
        from grader.i18n import choose, tr

        try:  # the language of this output; a broken spec.toml is reported by grade_one below
            lang = choose(None, read_spec(folder).lang)
        except Exception:  # noqa: BLE001
            lang = choose(None)
        path = self.submission(folder)
        if not path.exists():
            self.error = tr("no submission at {path}; write your solution there or pass --submission PATH",
                            path=str(path)).render(lang)
            return
        try:
            g = grade_one(folder, path, public_only=True, device=self.config.getoption("--grader-device"),
                          only=selected)
        except Exception as e:  # an operator problem (bad kit, no sandbox): fail every item with it
            from grader.errors import GraderError

            said = e.render(lang) if isinstance(e, GraderError) else str(e)
            self.error = tr("the grader could not run: {error}", error=said).render(lang)
            return
        self.results = {c.id: (c, g.report, vocabulary(g.report.concepts)) for c in g.report.cases}
        self.hidden = (g.hidden_cases, g.hidden_points)
        self.lang = g.report.lang
        self.isolation = g.isolation
        self.note = g.note

    def close(self) -> None:
        self.results = None


class CaseFailure(Exception):
    """A public case that did not pass; its text is what pytest shows."""


class KitSpec(pytest.File):
    """The kit's spec.toml: yields one item per public case instance (loaded without running any)."""

    def collect(self):
        from grader.assignment.spec import load_assignment

        from grader.i18n import choose, translate

        a = load_assignment(self.path.parent)
        lang = choose(None, a.lang)
        for inst in a.instances(public_only=True):
            yield CaseItem.from_parent(self, name=inst.id, title=translate(inst.case.title, lang),
                                       concept=inst.case.concept)


class CaseItem(pytest.Item):
    def __init__(self, *, title: str, concept: str, **kwargs: Any):
        super().__init__(**kwargs)
        self.title = title
        self.concept = concept

    def runtest(self) -> None:
        session: _KitSession = self.config.stash[SESSION_KEY]
        selected = [i.name for i in self.session.items if isinstance(i, CaseItem) and i.parent is self.parent]
        found = session.result(self.path.parent, self.name, selected)
        if found is None:
            from grader.i18n import tr

            raise CaseFailure(tr("case {id} was not run", id=self.name).render(session.lang))
        case, report, vocab = found
        if case.outcome.value == "passed":
            return
        raise CaseFailure(_failure_text(case, report, vocab))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        """Our failure's text alone; anything else as pytest shows it (its TerminalRepr)."""
        if isinstance(excinfo.value, CaseFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.name}: {self.title}"


def _failure_text(case: Any, report: Any, vocab: dict) -> str:
    """A failing case as pytest shows it, in the report's language."""
    from grader.i18n import tr, translate
    from grader.report.text import clean_block
    from grader.report.view import OUTCOME_LABELS, case_message, concept_title, evidence_facts, load_message

    lang = report.lang
    title = translate(case.title, lang)
    message = clean_block(case_message(case, lang), 2000, lang)
    if case.not_implemented:
        return tr("{title} [{id}]: not implemented yet", title=title, id=case.id).render(lang) + "\n" + message
    concept = case.concept or case.outcome.value
    outcome = translate(OUTCOME_LABELS[case.outcome][1], lang)
    lines = [tr("{title} [{id}]: {outcome}", title=title, id=case.id, outcome=outcome).render(lang),
             tr("concept: {concept} ({title})", concept=concept,
                title=concept_title(vocab, concept, lang) or concept).render(lang), message]
    lines += [tr("{label}: {value}", label=f.label, value=f.value).render(lang)
              for f in evidence_facts(case.evidence, lang)]
    if case.evidence.traceback:
        lines += ["", clean_block(case.evidence.traceback, 4000, lang)]
    reason = clean_block(load_message(report, lang), 2000, lang) if not report.load.ok else ""
    if reason and reason != message:  # the first case's message is the reason itself
        lines += ["", tr("Your submission could not be loaded: {reason}", reason=reason).render(lang)]
    return "\n".join(lines)

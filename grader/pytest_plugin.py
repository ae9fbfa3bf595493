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
    from grader.report.selfcheck_text import hidden_sentence

    n, points = session.hidden
    terminalreporter.write_sep("-", "attention-grader")
    if session.note:
        terminalreporter.write_line(session.note)
    if n:
        terminalreporter.write_line(hidden_sentence(n, points))
    if session.isolation:
        terminalreporter.write_line(f"Your code ran in a sandboxed process (isolation: {session.isolation}).")


class _KitSession:
    """Grades the submission once per pytest session, on first use, and keeps the results."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.results: dict[str, Any] | None = None
        self.error: str | None = None
        self.hidden: tuple[int, float] | None = None
        self.isolation = ""
        self.note = ""

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
        return self.results.get(case_id)

    def _grade(self, folder: Path, selected: list[str]) -> None:
        from grader.grading.single import grade_one

        path = self.submission(folder)
        if not path.exists():
            self.error = (f"no submission at {path}; write your solution there or pass "
                          "--submission PATH")
            return
        try:
            g = grade_one(folder, path, public_only=True, device=self.config.getoption("--grader-device"),
                          only=selected)
        except Exception as e:  # an operator problem (bad kit, no sandbox): fail every item with it
            self.error = f"the grader could not run: {e}"
            return
        self.results = {c.id: (c, g.report.load, vocabulary(g.report.concepts)) for c in g.report.cases}
        self.hidden = (g.hidden_cases, g.hidden_points)
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

        a = load_assignment(self.path.parent)
        for inst in a.instances(public_only=True):
            yield CaseItem.from_parent(self, name=inst.id, title=inst.case.title, concept=inst.case.concept)


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
            raise CaseFailure(f"case {self.name} was not run")
        case, load, vocab = found
        if case.outcome.value == "passed":
            return
        raise CaseFailure(_failure_text(case, load, vocab))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, CaseFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.name}: {self.title}"


def _failure_text(case: Any, load: Any, vocab: dict) -> str:
    from grader.report.text import clean_block
    from grader.report.view import evidence_facts
    if case.not_implemented:
        return f"{case.title} [{case.id}]: not implemented yet\n{clean_block(case.message, 2000)}"
    concept = case.concept or case.outcome.value
    lines = [f"{case.title} [{case.id}]: {case.outcome.value}",
             f"concept: {concept} ({vocab[concept].title if concept in vocab else concept})",
             clean_block(case.message, 2000)]
    lines += [f"{f.label}: {f.value}" for f in evidence_facts(case.evidence)]
    if case.evidence.traceback:
        lines += ["", clean_block(case.evidence.traceback, 4000)]
    if not load.ok and load.message:
        lines += ["", f"Your submission could not be loaded: {clean_block(load.message, 2000)}"]
    return "\n".join(lines)

"""Session-wide fixtures of the integration tests: shared sandboxes, student kits released once,
and the check that none of the sandboxes' processes outlives the session."""

import gc
import os
from pathlib import Path

import pytest
from procs import process_table

from grader.assignment.spec import load_assignment
from grader.grading.engine import Engine, limits_for
from grader.results import GradeReport
from grader.sandbox import Limits, Sandbox
from grader.sandbox.host.sandbox import open_sandboxes


@pytest.fixture(scope="session")
def sandbox_for():
    """``sandbox_for(limits, **options)``: an open Sandbox, one per distinct limits and options for
    the whole session (a zygote start costs seconds), closed at the end.

    Use it wherever a test needs a sandbox to grade in. Tests that count the session's processes
    or change the machine before the sandbox starts (test_sandbox.py, test_jail.py, ...) open
    their own."""
    opened: dict[tuple, Sandbox] = {}

    def get(limits: Limits = Limits(), **options) -> Sandbox:
        key = (limits, tuple(sorted(options.items())))
        if key not in opened:
            opened[key] = Sandbox(limits, **options).__enter__()
        return opened[key]

    yield get
    for sb in opened.values():
        sb.__exit__(None, None, None)


class SampleGrades:
    """The sample submissions graded at the default level, each once per session: one engine per
    assignment on the session's sandbox, its reference setups computed once."""

    def __init__(self, sandbox_for):
        self._sandbox_for = sandbox_for
        self._engines: dict[str, Engine] = {}
        self._reports: dict[Path, GradeReport] = {}

    def engine(self, slug: str) -> Engine:
        if slug not in self._engines:
            a = load_assignment(slug)
            self._engines[slug] = Engine(a, self._sandbox_for(limits_for(a)))
        return self._engines[slug]

    def report(self, sample) -> GradeReport:
        """`sample`: an entry of submissions/expected.toml (``read_expectations``)."""
        if sample.path not in self._reports:
            self._reports[sample.path] = self.engine(sample.assignment).grade_path(sample.path)
        return self._reports[sample.path]


@pytest.fixture(scope="session")
def sample_grades(sandbox_for) -> SampleGrades:
    """Every sample's report at the default level, graded on first use and kept: test_samples.py
    checks each against expected.toml, test_portable_parity.py compares the portable level with it."""
    return SampleGrades(sandbox_for)


@pytest.fixture(scope="session")
def released_kit(tmp_path_factory):
    """``released_kit(slug)``: (the folder, the command's output) of ``grader release SLUG``, run
    once per assignment for the whole session (a release proves the reference in a fresh sandbox
    and builds a wheel: seconds each). The exit code is asserted here.

    Treat the folder as read-only: a test that changes a kit copies it first."""
    from click.testing import CliRunner

    from grader.cli.app import main

    made: dict[str, tuple[Path, str]] = {}

    def get(slug: str) -> tuple[Path, str]:
        if slug not in made:
            folder = tmp_path_factory.mktemp("kits") / slug
            r = CliRunner().invoke(main, ["release", slug, "-o", str(folder)], catch_exceptions=False)
            assert r.exit_code == 0, r.output  # e.g. a public title equal to a hidden one is refused
            made[slug] = (folder, r.output)
        return made[slug]

    return get


@pytest.fixture(scope="session", autouse=True)
def no_stray_sandbox_processes():
    """After the last test, whichever it was: no worker, zygote or grandchild of ours is left running.

    Autouse and session-scoped, so it is set up before and torn down after every other fixture."""
    yield
    gc.collect()
    table = process_table()
    me = os.getpid()
    my_start = table[me][1]
    live_zygotes = {sb.zygote_pid for sb in open_sandboxes() if sb.zygote_pid is not None}
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        kids.setdefault(ppid, []).append(pid)
    ours, todo = set(), [me]
    while todo:
        for c in kids.get(todo.pop(), []):
            ours.add(c)
            todo.append(c)
    # Sandboxes still open (held by a module, closed at exit) keep their zygote and workers.
    held = set(live_zygotes)
    todo = list(live_zygotes)
    while todo:
        for c in kids.get(todo.pop(), []):
            held.add(c)
            todo.append(c)
    # Under pytest-xdist another worker's sandboxes may be orphaned for a moment (a test that kills a
    # grader on purpose): re-parented processes are then checked once, after every worker has ended
    # (tests/conftest.py, pytest_sessionfinish).
    orphans_are_ours = "PYTEST_XDIST_WORKER" not in os.environ
    strays = {
        pid: cmd for pid, (ppid, start, cmd) in table.items()
        if "grader.sandbox" in cmd and pid not in held
        and (pid in ours or (orphans_are_ours and ppid == 1 and start >= my_start))
    }
    assert strays == {}

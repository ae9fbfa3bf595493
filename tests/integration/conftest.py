"""Session-wide fixtures of the integration tests: shared sandboxes, and the check that none of
their processes outlives the session."""

import gc
import os

import pytest
from procs import process_table

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
    strays = {
        pid: cmd for pid, (ppid, start, cmd) in table.items()
        if "grader.sandbox" in cmd and pid not in held
        and (pid in ours or (ppid == 1 and start >= my_start))
    }
    assert strays == {}

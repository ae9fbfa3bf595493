"""`grader.batch.outputs.Aside`: the end of a batch runs the similarity report in a forked child
beside the dashboard; whatever happens to the child, the caller gets `fn`'s result or its error."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from grader.batch.outputs import Aside



def forks() -> bool:
    """Aside forks now (other tests may have left threads running in this process)."""
    return sys.platform.startswith("linux") and threading.active_count() == 1


def test_the_result_comes_back_from_the_child():
    here, forked = os.getpid(), forks()
    pid = Aside(os.getpid).result()
    assert isinstance(pid, int)
    if forked:
        assert pid != here  # computed beside this process, not in it


def test_a_child_that_dies_is_done_again_here():
    here = os.getpid()

    def work():
        if os.getpid() != here:
            os._exit(9)  # the child dies before it answers
        return "done here"

    assert Aside(work).result() == "done here"


def test_an_error_reaches_the_caller():
    def work():
        raise ValueError("no similarity today")

    with pytest.raises(ValueError, match="no similarity today"):
        Aside(work).result()


def test_the_child_is_reaped_by_result():
    if not forks():
        pytest.skip("no fork here (other threads are running): nothing to reap")
    aside = Aside(lambda: 42)
    pid = aside._pid
    assert pid > 0
    assert aside.result() == 42
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # already reaped: no zombie left behind


def test_cancel_stops_and_reaps_the_child():
    if not forks():
        pytest.skip("no fork here (other threads are running): nothing to stop")
    import time

    aside = Aside(lambda: time.sleep(60))
    pid = aside._pid
    started = time.monotonic()
    aside.cancel()
    assert time.monotonic() - started < 10  # killed, not waited for
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)

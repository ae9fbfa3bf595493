"""The sandbox's view of a process tree (grader.sandbox.host.process, through psutil): what it finds,
measures (PSS on Linux, RSS elsewhere: both tried here) and kills, so that the memory limit and the
final kill hold on every platform."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest

from grader.sandbox.host import process

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the tree is started with sh")

WAYS = ["pss", "rss"] if sys.platform.startswith("linux") else ["rss"]


@pytest.fixture(params=WAYS)
def way(request, monkeypatch):
    monkeypatch.setattr(process, "PSS", request.param == "pss")
    return request.param


@pytest.fixture
def tree():
    """A shell (child) that starts a sleep (grandchild) and waits for it; both killed at the end."""
    sh = subprocess.Popen(["sh", "-c", "sleep 60 & echo $!; wait"], stdout=subprocess.PIPE, text=True)
    grandchild = int(sh.stdout.readline())
    yield sh.pid, grandchild
    for pid in (grandchild, sh.pid):
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    sh.wait()


def test_descendants_are_children_and_their_children(way, tree):
    child, grandchild = tree
    assert {child, grandchild} <= set(process.descendants(os.getpid()))
    assert process.descendants(child) == [grandchild]
    assert process.descendants(grandchild) == []


def test_tree_memory_counts_every_process_of_the_tree(way, tree):
    child, grandchild = tree
    alone = process.tree_rss(grandchild)
    assert alone > 0
    assert process.tree_rss(child) > alone  # the shell's memory as well
    assert process.tree_rss(os.getpid()) >= psutil.Process().memory_full_info().uss
    assert process.tree_rss(None) == 0


def test_kill_tree_kills_every_descendant_and_spares_the_root(way, tree):
    child, grandchild = tree
    process.kill_tree(child)
    deadline = time.monotonic() + 10
    while process.alive(grandchild) and psutil.Process(grandchild).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the grandchild survived kill_tree"
        time.sleep(0.01)
    assert process.alive(child)


def test_dead_names_only_pids_with_no_process(way):
    p = subprocess.Popen(["true"])
    p.wait()
    assert process.dead(str(p.pid))
    assert not process.dead(str(os.getpid()))
    assert not process.dead("not-a-pid")  # not a pid: nothing to clean up after

"""Runs last among the sandbox tests: no worker, zygote or grandchild of ours is left running."""

import gc
import os

from procs import process_table

from grader.sandbox import host



def test_no_stray_sandbox_processes():
    gc.collect()
    table = process_table()
    me = os.getpid()
    my_start = table[me][1]
    live_zygotes = {sb._zygote.pid for sb in list(host._LIVE) if sb._zygote is not None}
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        kids.setdefault(ppid, []).append(pid)
    ours, todo = set(), [me]
    while todo:
        for c in kids.get(todo.pop(), []):
            ours.add(c)
            todo.append(c)
    # Sandboxes other tests still hold open (session fixtures) keep their zygote and workers.
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

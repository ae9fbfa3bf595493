"""Phase timestamps of one command, for the start-up breakdown (`bench/start.py`).

With ``GRADER_TIMINGS=FILE`` in the environment, ``mark("phase")`` appends one JSON line
``{"phase": ..., "t": <wall clock, s>, "pid": ...}`` to FILE; without it, nothing happens and
nothing is imported. Any process of the command may mark (the grader, its forked slots): each line
is one ``write`` to a file opened for appending. Standard library only, so that the command line
can mark before it imports anything heavy.
"""

from __future__ import annotations

import os

ENV = "GRADER_TIMINGS"


def enabled() -> bool:
    return bool(os.environ.get(ENV))


def mark(phase: str, **extra: object) -> None:
    """Record that `phase` is reached now (`extra`: a few plain values to keep beside it)."""
    path = os.environ.get(ENV)
    if not path:
        return
    import json
    import time

    line = json.dumps({"phase": phase, "t": time.time(), "pid": os.getpid(), **extra}, default=str) + "\n"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError:
        return
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)

"""The line ``grader check`` shows while one step runs long, on a terminal only.

After `DELAY_S` on one step (loading the code, or a case), ``running <case title> … 3 s (limit
10 s)`` appears on stderr and is rewritten in place every quarter second, then erased when the
step ends: code stuck in a loop is seen to run, against its limit, instead of a silent terminal.
Written in the kit's language. Nothing at all when stderr is not a terminal (a pipe, a CI log).
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

from grader.i18n import Msg, tr, translate

DELAY_S = 1.0
"""How long a step runs before its line appears (most cases take milliseconds)."""
TICK_S = 0.25


class CaseProgress:
    """Give `step` to ``Engine.on_step``; `close` when grading is done."""

    def __init__(self, stream: TextIO | None = None):
        self.lang = "en"
        self._stream = stream if stream is not None else sys.stderr
        self._tty = bool(getattr(self._stream, "isatty", lambda: False)())
        self._lock = threading.Lock()
        self._step: tuple[str, float, float] | None = None  # (what, started, limit)
        self._shown = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if self._tty:
            self._thread = threading.Thread(target=self._run, name="grader-case-progress", daemon=True)
            self._thread.start()

    def step(self, what: str | Msg | None, limit_s: float, lang: str) -> None:
        """Now running `what` (a case title, or a message) under `limit_s`; None: nothing runs.
        `lang`: the language of the feedback (the case titles' and this line's)."""
        if not self._tty:
            return
        self.lang = lang
        text = None if what is None else (what.render(self.lang) if isinstance(what, Msg)
                                          else translate(what, self.lang))
        with self._lock:
            self._erase()
            self._step = None if text is None else (text, time.monotonic(), limit_s)

    def line(self, now: float) -> str | None:
        """The line for the step running at `now` (None: none, or not long enough yet)."""
        step = self._step
        if step is None or now - step[1] < DELAY_S:
            return None
        what, started, limit = step
        return tr("running {case} … {seconds} s (limit {limit} s)", case=what[:80],
                  seconds=int(now - started), limit=format(limit, "g")).render(self.lang)

    def _run(self) -> None:
        while not self._stop.wait(TICK_S):
            with self._lock:
                text = self.line(time.monotonic())
                if text is not None:
                    self._write("\r\x1b[2K" + text)
                    self._shown = True

    def _erase(self) -> None:
        if self._shown:
            self._write("\r\x1b[2K")
            self._shown = False

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):
            pass

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            self._erase()
            self._step = None

"""The batch's progress on the terminal: a line rewritten on stderr on a terminal, plain lines
otherwise, and the warnings a run says once.

Why not ``click.progressbar`` or rich's ``Progress``: the line carries what neither bar has a
field for (how many are below 100 %, which student was graded last), and warnings, errors and the
"Stopping ..." line must print between two redraws: click's bar has no way to clear its line for
another message, and rich (not a dependency today) would add its import to every ``grader grade``
for one line. The only escape written is "erase the line" (``\r`` + ``ESC [K``), on a terminal.
"""

from __future__ import annotations

import sys
import time

import click


class Progress:
    """A progress line rewritten on stderr on a terminal; plain lines `[3/40] alice 85% (2.1 s)` otherwise."""

    def __init__(self, *, verbose: bool, stream=None):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() and not verbose
        self.verbose = verbose
        self.t0 = time.monotonic()
        self._drawn = False

    def on_event(self, e) -> None:
        from grader.batch.config import EventKind  # here: batch.config's imports would slow every command's start

        if e.kind is EventKind.WAITING:
            click.echo(f"Waiting for the other run writing to this folder ({e.message}) to finish...", err=True)
        elif e.kind is EventKind.PLAN:
            self.t0 = time.monotonic()
            if e.message:  # why files graded before are graded again
                click.echo(e.message, err=True)
            if e.total == 0:
                click.echo(f"Nothing to grade: all {e.reused} submission(s) are unchanged since they were graded "
                           "(--force grades them again).", err=True)
            else:
                reused = f"; {e.reused} unchanged since graded, reused" if e.reused else ""
                click.echo(f"Grading {e.total} submission(s){reused}.", err=True)
        elif e.kind is EventKind.READY:
            self.t0 = time.monotonic()
            if self.verbose:
                click.echo(f"{e.reused} sandbox(es) ready in {e.seconds:.1f} s (isolation: {e.message})", err=True)
            self._draw(e)
        elif e.kind is EventKind.WARNING:
            self._clear()
            click.echo(f"Warning: {shown(e.message, 4000)}", err=True)
        elif e.kind is EventKind.STOPPING:
            self._clear()
            click.echo("Stopping after the submissions in progress (Ctrl-C again to stop now)...", err=True)
        elif e.kind is EventKind.ERROR:
            self._clear()
            click.echo(f"[{e.done}/{e.total}] {shown(e.student_id)}: NOT GRADED ({shown(e.message, 2000)})", err=True)
            self._draw(e)
        elif e.kind is EventKind.GRADED:
            if self.tty:
                self._draw(e)
            else:
                r = e.report
                load = "" if r.load.ok else " (failed to load)"
                click.echo(f"[{e.done}/{e.total}] {shown(e.student_id)} {r.score.display_percent()}{load} "
                           f"({e.seconds:.1f} s)")

    def _draw(self, e) -> None:
        if not self.tty:
            return
        width = 24
        filled = int(width * e.done / e.total) if e.total else width
        elapsed = time.monotonic() - self.t0
        if e.done:
            left = int(elapsed / e.done * (e.total - e.done) + 0.5)
            eta = f"{left // 60}:{left % 60:02d}"
        else:
            eta = "--"
        line = (f"[{e.done}/{e.total}] {'#' * filled}{'.' * (width - filled)} {e.failing} below 100%  "
                f"ETA {eta}  {shown(e.student_id)}")
        self.stream.write("\r\x1b[K" + line[:150])
        self.stream.flush()
        self._drawn = True

    def _clear(self) -> None:
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False


def shown(text: str, limit: int = 300) -> str:
    """Text from a gradebook, a result or an exception as one terminal line: control characters and
    escape sequences shown escaped (``\\x1b``), never sent to the terminal (`grader.untrusted.name`)."""
    from grader.untrusted import name

    return name(" ".join(str(text).split()), limit)


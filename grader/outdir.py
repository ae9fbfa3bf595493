"""Output folders: create one and prove it writable before any work is done (torch-free)."""

from __future__ import annotations

import os
from pathlib import Path

from grader.errors import OutputNotWritable

OUTPUT_NAMES = frozenset({
    "index", "grades", "results", "gradescope", "junit", "summary", "gradebook", "ledger",
    # names Windows reserves for devices: a report called con.html cannot be opened there
    "con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10)),
})
"""Stems of what a batch writes in its output folder (index.html, grades.csv, results/, gradescope/,
junit.xml, summary.md, gradebook.sqlite, ledger.sqlite) and device names: never a student's report
name (`grader.load.student_id`, `grader.report.dashboard.report_filename` add a hash to them)."""


def writable_dir(path: Path, *, what: str = "", hint: str = "") -> Path:
    """Create ``path`` and write a probe file in it; OutputNotWritable with one clear line otherwise.

    ``what`` names the folder in the message ("the output folder "), ``hint`` says what to do.
    """
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".grader-write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise OutputNotWritable(f"cannot write to {what}{path}: {e.strerror or e}" + (f"; {hint}" if hint else "")) from e
    return path

"""Output folders: create one and prove it writable before any work is done (torch-free)."""

from __future__ import annotations

import os
from pathlib import Path

from grader.errors import OutputNotWritable



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

"""Output folders and files: create a folder and prove it writable before any work is done, and
write a file so that readers never see half of it (torch-free)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from grader.errors import OutputNotWritable
from grader.i18n import tr


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
        said = tr("cannot write to {path}: {reason}", path=f"{what}{path}", reason=str(e.strerror or e))
        raise OutputNotWritable(said + (f"; {hint}" if hint else "")) from e
    return path


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Write UTF-8 text via a temporary file and rename, so readers never see half a file."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        # errors="replace": a lone surrogate that reached this far becomes "?", never a crash
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace", newline="") as f:
            f.write(text)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target

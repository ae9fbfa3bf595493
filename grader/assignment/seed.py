"""The assignment's seed: every case's inputs are drawn from it and the instance's id, so it must
not be guessable. With it and the hidden instance ids (in every student's report), anyone can
draw every hidden case's inputs; a seed of a few digits is found by trying them all against the
inputs of one public case a report shows.

``seed = N`` in spec.toml is the instructor's; where spec.toml sets none, the grader draws 128
random bits once and keeps them in ``seed.secret`` beside it (never shipped in a kit: a kit has
its own seed, drawn at random at release). Keep that file with the assignment (grading stays the
same on every machine that has it); deleting it changes every case's inputs.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from grader.errors import AssignmentSpecError

SEED_FILE = "seed.secret"
SEED_BITS = 128


def assignment_seed(seed: int | None, folder: Path) -> int:
    """spec.toml's ``seed`` (`SpecFile.seed`, checked there), else the one kept in ``seed.secret``
    (drawn and written on first use)."""
    if seed is not None:
        return seed
    path = folder / SEED_FILE
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    value = secrets.randbits(SEED_BITS)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another command drew it a moment ago: use that one
        return _read(path)
    except OSError as e:
        raise AssignmentSpecError(
            f"{folder / 'spec.toml'} sets no seed and {path} cannot be written ({e.strerror}): add "
            f"seed = {secrets.randbits(SEED_BITS)} (a fresh random number) to spec.toml") from e
    with os.fdopen(fd, "w") as f:
        f.write(f"{value}\n")
    return value


def _read(path: Path) -> int:
    text = path.read_text(encoding="ascii", errors="replace").strip()
    if not text.isdigit():
        raise AssignmentSpecError(f"{path}: expected the assignment's seed (one integer), found {text[:40]!r}")
    return int(text)


def kit_seed() -> int:
    """A kit's own seed for its public inputs: drawn at random at each release, so nothing in a
    kit is derived from the assignment's seed."""
    return secrets.randbits(63)

"""Plumbing shared by the commands: which assignment, and an engine with its sandbox."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Iterator

import click

from grader.assignments import Assignment, available, load_assignment
from grader.errors import GraderError


def infer_assignment(submission: Path) -> Assignment:
    """The one assignment whose entry points the submission's text defines (read as text, never run)."""
    try:
        if submission.is_dir():
            text = " ".join(p.read_text("utf-8", "replace") for p in sorted(submission.rglob("*.py"))[:50])
        else:
            text = submission.read_bytes()[: 20 << 20].decode("utf-8", "replace")
    except OSError as e:
        raise GraderError(f"cannot read {submission}: {e.strerror or e}") from e
    matches = []
    for name, folder in sorted(available().items()):
        a = load_assignment(folder)
        if a.entry_points and all(re.search(rf"\b(def|class)\s+{re.escape(e.name)}\b", text) for e in a.entry_points):
            matches.append(a)
    if len(matches) == 1:
        return matches[0]
    known = ", ".join(sorted(available())) or "none"
    if not matches:
        raise GraderError(f"could not tell which assignment {submission.name} is for; pass -a/--assignment "
                          f"(known: {known})")
    raise GraderError(f"{submission.name} matches several assignments ({', '.join(a.id for a in matches)}); "
                      "pass -a/--assignment")


def resolve_assignment(name: str | None, submission: Path | None = None) -> Assignment:
    if name:
        return load_assignment(name)
    if submission is None:
        raise click.UsageError("missing -a/--assignment")
    return infer_assignment(submission)


@contextlib.contextmanager
def open_engine(assignment: Assignment, *, device: str = "auto", public_only: bool = False,
                use_zygote: bool = True) -> Iterator["Engine"]:
    """A sandbox (its warm zygote, the strongest isolation available) and an engine on it."""
    import reference
    from grader.engine import Engine, limits_for
    from grader.sandbox import Sandbox

    dev = reference.resolve_device(device)
    with Sandbox(limits_for(assignment), device=str(dev), use_zygote=use_zygote) as sandbox:
        yield Engine(assignment, sandbox, public_only=public_only, device=dev)

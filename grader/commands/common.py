"""Plumbing shared by the commands: which assignment, and an engine with its sandbox."""

from __future__ import annotations

import contextlib
import gc
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import click

from grader.assignments import Assignment, available, infer, load_assignment

if TYPE_CHECKING:
    from grader.engine import Engine


def infer_assignment(submission: Path) -> Assignment:
    """The one assignment whose entry points the submission's text defines (read as text, never run)."""
    return load_assignment(infer(submission, available()))


def resolve_assignment(name: str | None, submission: Path | None = None) -> Assignment:
    if name:
        return load_assignment(name)
    if submission is None:
        raise click.UsageError("missing -a/--assignment")
    return infer_assignment(submission)


@contextlib.contextmanager
def quiet_gc() -> Iterator[None]:
    """Cyclic garbage collection off while importing torch and the grader: the imports create
    about a million objects and almost no garbage, and the collector would walk the growing heap
    again and again (~0.3 s of the ~1.5 s import here). Back on afterwards."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def prestart_sandbox(device: str, *, warm_meta: bool = False) -> None:
    """Start the sandbox's zygote now, before this process imports torch, so the two imports run
    side by side; the Sandbox made later adopts it, and when the command ends first (a usage
    error) it is stopped with the command."""
    from grader.sandbox.early import discard, prestart

    p = prestart(device, warm_meta=warm_meta)
    click.get_current_context().call_on_close(lambda: discard(p))


@contextlib.contextmanager
def open_engine(assignment: Assignment, *, device: str = "auto", public_only: bool = False,
                use_zygote: bool = True) -> Iterator["Engine"]:
    """A sandbox (its warm zygote, the strongest isolation available) and an engine on it."""
    from grader.device import resolve_device
    from grader.engine import Engine, limits_for
    from grader.sandbox import Sandbox

    dev = resolve_device(device)
    with Sandbox(limits_for(assignment), device=str(dev), use_zygote=use_zygote) as sandbox:
        yield Engine(assignment, sandbox, public_only=public_only, device=dev)

"""What ``grader release`` adds to a kit with the reference: the public setups it precomputes, the
student's grader wheel, and the proof that the kit alone gives the reference 100 %.

``grader.assignment.kit`` writes the text files (torch-free); this runs the trusted reference, here, once.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from grader.assignment.spec import Assignment, load_assignment
from grader.errors import AssignmentSpecError

if TYPE_CHECKING:
    from grader.sandbox import Limits
    from grader.submission.load import LoadedSubmission


def store_setups(kit_assignment_dir: Path, reference_file: Path | None = None) -> Path:
    """Compute every public case's setup of the kit (its own seed) and write ``expected.safetensors``.
    ``reference_file``: the assignment's own reference, copied in for the computation and removed."""
    import shutil

    borrowed = None
    if reference_file is not None:
        borrowed = kit_assignment_dir / reference_file.name
        shutil.copyfile(reference_file, borrowed)
    try:
        return _store(kit_assignment_dir)
    finally:
        if borrowed is not None:
            borrowed.unlink()


def _store(kit_assignment_dir: Path) -> Path:
    from grader.grading import stored
    from grader.grading.engine import Engine

    a = load_assignment(kit_assignment_dir)  # no stored file yet: loads with the real reference
    engine = Engine(a, _NoSandbox(), public_only=True)
    setups, runs = {}, {}
    for inst in engine.instances:
        try:
            setups[inst.id] = engine.setup(inst)
            if inst.case.concept == "device-placement":
                runs[inst.id] = engine.reference_runs(inst)
        except AssignmentSpecError:
            raise
        except Exception as e:  # an author's mistake: name the case and where it is
            raise AssignmentSpecError(f"{inst.case.where()}: case {inst.id!r}: setup raised "
                                      f"{type(e).__name__}: {e}") from e
    path = kit_assignment_dir / stored.FILE
    stored.write(path, setups, runs)
    return path


class _NoSandbox:
    """The sandbox of an engine that only computes setups in this process: it opens no worker."""

    isolation = "none"
    limits_note = "none: only the trusted reference runs, in the grader's process"

    @property
    def limits(self) -> Limits:
        from grader.sandbox import Limits

        return Limits()

    def open(self, sub: LoadedSubmission, *, started: object = None) -> NoReturn:
        raise RuntimeError("computing a kit's setups opens no worker")

    def start(self, sub: LoadedSubmission) -> NoReturn:
        raise RuntimeError("computing a kit's setups starts no worker")


def self_check_reference(full: Assignment, kit_assignment_dir: Path):
    """Grade the trusted reference with the kit alone (stored setups, no reference import):
    the report, which must be 100 %."""
    from grader.device import resolve_device
    from grader.grading.engine import limits_for
    from grader.grading.factory import engine_for, sandbox_for
    from grader.grading.reference_run import reference_submission

    kit = load_assignment(kit_assignment_dir)
    if kit.stored is None:
        raise AssignmentSpecError(f"{kit_assignment_dir}: the kit has no stored setups")
    dev = resolve_device("cpu")
    with tempfile.TemporaryDirectory(prefix="grader-release-") as tmp, \
            sandbox_for(limits_for(kit), str(dev)) as sandbox:
        ref = reference_submission(full, Path(tmp))
        return engine_for(kit, sandbox, public_only=True, device=dev).grade_path(ref, student_id="reference")

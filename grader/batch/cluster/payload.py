"""What travels with a Dask task, as plain data: a submission's bytes (`pack`, `unpack`) and the
assignment's files (`assignment_files`, `write_tree`) out to a worker, and the check a report that
comes back must pass (`job_mismatch`). Never pickled objects of ours."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader.errors import GraderError

if TYPE_CHECKING:
    from grader.assignment.spec import Assignment
    from grader.records.ledger import LedgerKey
    from grader.results import GradeReport
    from grader.submission.intake import Intake
    from grader.submission.load import LoadedSubmission

MAX_ASSIGNMENT_BYTES = 20 << 20
"""The assignment folder is sent to every worker: refused beyond this."""


def pack(sub: LoadedSubmission, student_id: str) -> dict:
    """A loaded submission as plain data: its file's bytes (a folder: relative path -> bytes)."""
    from grader.submission.load import read_folder

    payload: dict[str, Any] = {"student_id": student_id, "name": Path(sub.path).name, "kind": sub.kind, "sha256": sub.sha256,
               "data": None, "files": None, "error": None if sub.error is None else sub.error.to_list()}
    if sub.error is None:
        if sub.kind == "folder":
            payload["files"] = read_folder(sub.path)
        else:
            payload["data"] = Path(sub.path).read_bytes()
    return payload


def unpack(payload: dict, *, main_module: str, cell_tag: str | None,
           intake: Intake | None = None) -> LoadedSubmission:
    """The payload written into a private temp dir and read there behind the intake's boundary
    (`grader.submission.intake`; `intake`: a reader kept for the worker's tasks)."""
    from grader.i18n import Msg
    from grader.submission.intake import load_bounded
    from grader.submission.load import LoadedSubmission

    name = payload["name"]
    if payload["error"] is not None:
        return LoadedSubmission(id=payload["student_id"], path=name, kind=payload["kind"],
                                sha256=payload["sha256"], error=Msg.from_list(payload["error"]))
    if "/" in name or name in ("", ".", ".."):
        raise ValueError(f"bad submission name {name!r}")
    tmp = tempfile.mkdtemp(prefix="grader-task-")
    try:
        path = os.path.join(tmp, name)
        if payload["files"] is not None:
            write_tree(path, payload["files"])
        else:
            with open(path, "wb") as f:
                f.write(payload["data"])
        sub = load_bounded(path, main_module=main_module, cell_tag=cell_tag, intake=intake)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if sub.error is None and sub.sha256 != payload["sha256"]:
        raise ValueError(f"{name} arrived with sha256 {sub.sha256[:12]}, expected {payload['sha256'][:12]}")
    return sub


def write_tree(root: str, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        parts = rel.split("/")
        if rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"bad path in submission: {rel!r}")
        path = os.path.join(root, *parts)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)


def assignment_files(folder: Path) -> dict[str, bytes]:
    files, total = {}, 0
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        if p.is_file() and not any(part.startswith((".", "__pycache__")) for part in rel.split("/")):
            files[rel] = p.read_bytes()
            total += len(files[rel])
    if total > MAX_ASSIGNMENT_BYTES:
        raise GraderError(f"the assignment folder {folder} is larger than {MAX_ASSIGNMENT_BYTES >> 20} MB; "
                          "it is sent to every worker")
    return files


def job_mismatch(report: GradeReport, key: LedgerKey, sub: LoadedSubmission, assignment: Assignment) -> str:
    """Why `report` is not the result of the job sent for `key` ("" when it is): the student id and
    submission hash the grader sent (never the report's own word), the assignment and its cases."""
    info = report.submission
    if info.id != key.student_id:
        return f"it is filed under another student's id, {info.id!r}"
    if info.sha256 != sub.sha256:
        return "it is for other submitted bytes (sha256 differs)"
    if (report.assignment.id, report.assignment.version) != (assignment.id, assignment.version):
        return f"it is for {report.assignment.id} v{report.assignment.version}"
    if [c.id for c in report.cases] != [i.id for i in assignment.instances()]:
        return "its cases are not the assignment's"
    worth = {i.id: i.points for i in assignment.instances()}
    if any(abs(c.points.possible - worth[c.id]) > 1e-9 or not 0 <= c.points.earned <= c.points.possible
           for c in report.cases):
        return "its cases' points are not the assignment's"
    if abs(sum(c.points.earned for c in report.cases) - report.score.earned) > 1e-6:
        return "its score is not the sum of its cases"
    return ""

"""Finding the submissions of a batch: files and folders on the command line -> one `Found` per student.

The operator decides the layout, never a name a student chose: a folder argument is a folder of
submissions, in which each `.py`, `.ipynb` or `.zip` file and each sub-folder is one student's
submission, whatever the files are called (a student's ``attention.py`` or ``expected.toml``
changes nothing). With ``folders_are_submissions`` each folder argument is ONE student's folder
submission instead. Sample trees (``expected.toml``) are read by ``grader validate``, never here.

Hidden entries, ``__pycache__``, other file types, symbolic links and the grader's own output
folders are skipped. Nothing here reads a submission's content.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from grader.errors import GraderError, NoSubmissions
from grader import untrusted
from grader.submission.ids import id_and_lms, name_hash

SUBMISSION_SUFFIXES = (".py", ".ipynb", ".zip")
OUTPUT_MARKERS = (".grader.lock", "gradebook.sqlite", "ledger.sqlite")
"""Files that mark a folder as one of our output folders (never a student's submission)."""
SKIPPED_DIRS = {"__pycache__", "node_modules", ".ipynb_checkpoints", "__MACOSX"}


@dataclass(frozen=True)
class Found:
    """One student's submission."""

    id: str
    """Stable student id (`grader.submission.ids.student_id` of the file or folder name, made unique in the batch)."""
    path: Path


@dataclass(frozen=True)
class Discovery:
    submissions: list[Found]
    """Sorted by id; ids are unique."""
    skipped: list[Path]
    """Entries of the given folders that are not submissions (other file types, output folders)."""
    warnings: list[str] = field(default_factory=list)
    """For the operator: submissions that gave one student id, and what was done about them."""


def discover(paths: list[Path], *, exclude: Path | None = None, folders_are_submissions: bool = False,
             newest: bool = False) -> Discovery:
    """The submissions named by `paths` (files or folders).

    Args:
        exclude: a folder never to look into (the batch's own output folder).
        folders_are_submissions: each folder in `paths` is one student's submission, not a folder
            of submissions.
        newest: of several submissions giving one LMS student id, grade only the newest (by
            modification time); otherwise each is graded under an id of its own.

    Raises:
        NoSubmissions: nothing to grade was found.
        GraderError: a path is missing or unreadable.
    """
    found: list[Path] = []
    skipped: list[Path] = []
    for p in paths:
        if not p.exists():
            raise GraderError(f"{p} does not exist")
        if p.is_dir() and not folders_are_submissions:
            _collect_folder(p, exclude, found, skipped)
        elif p.is_dir() or p.name.lower().endswith(SUBMISSION_SUFFIXES):
            found.append(p)
        else:
            raise GraderError(f"{p} is not a submission: expected a .py, .ipynb or .zip file or a folder")
    if not found:
        where = ", ".join(str(p) for p in paths)
        extra = f" (skipped {len(skipped)} other entries: {_names(skipped)})" if skipped else ""
        raise NoSubmissions(f"no submissions found in {where}{extra}; expected .py, .ipynb or .zip files "
                            "or one sub-folder per student")
    warnings: list[str] = []
    return Discovery(_unique_ids(found, newest, warnings), skipped, warnings)


def _collect_folder(folder: Path, exclude: Path | None, found: list[Path], skipped: list[Path]) -> None:
    try:
        entries = sorted(folder.iterdir())
    except OSError as e:
        raise GraderError(f"cannot read folder {folder}: {e.strerror or e}") from e
    for entry in entries:
        if entry.name.startswith(".") or entry.name in SKIPPED_DIRS or entry.is_symlink():
            continue
        if entry.is_dir():
            if _is_output(entry, exclude):
                skipped.append(entry)
            else:
                found.append(entry)
        elif entry.is_file() and entry.name.lower().endswith(SUBMISSION_SUFFIXES):
            found.append(entry)
        else:
            skipped.append(entry)


def _is_output(folder: Path, exclude: Path | None) -> bool:
    if exclude is not None and (_same(folder, exclude) or exclude.resolve().is_relative_to(folder.resolve())):
        return True  # the output folder itself, or one holding it (reports/ of reports/<assignment>)
    if any((folder / m).exists() for m in OUTPUT_MARKERS):
        return True
    return (folder / "results").is_dir() and (folder / "index.html").is_file()


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a.resolve() == b.resolve()


def _unique_ids(paths: list[Path], newest: bool, warnings: list[str]) -> list[Found]:
    """One id per submission, unique also without case (`student_id`); never an error.

    Names that meet (``Alice.py`` and ``alice.py``, a name spelled like another's hashed id) get a
    hash of their exact name. The same student twice (two files with one LMS student number, or
    one file name in two folders) is graded under one id per file (the id and a hash of the file's
    name, or of its path when the names are equal), or with `newest` only the newest file; either
    way `warnings` names them all."""
    groups: dict[str, list[tuple[str, bool, Path]]] = {}
    for p in paths:
        sid, lms = id_and_lms(p)
        group = groups.setdefault(sid.casefold(), [])
        if not any(_same(q, p) for _, _, q in group):
            group.append((sid, lms, p))
    out: dict[str, Path] = {}
    taken: set[str] = set()  # casefolded ids given
    for members in groups.values():
        if len(members) > 1:
            members = _one_student_twice(members, newest, warnings)
        for sid, _, p in members:
            if sid.casefold() in taken:  # a name spelled like another's hashed id: hash its path too
                sid = f"{sid}-{name_hash(str(p))}"
            out[sid] = p
            taken.add(sid.casefold())
    return [Found(sid, out[sid]) for sid in sorted(out)]


def _one_student_twice(members: list[tuple[str, bool, Path]], newest: bool,
                       warnings: list[str]) -> list[tuple[str, bool, Path]]:
    sid0, lms0, _ = members[0]
    names = [p.name for _, _, p in members]
    same_student = lms0 or len(set(names)) < len(names)
    if not same_student:  # different names that meet without case: each keeps a hash of its name
        return [(f"{sid}-{name_hash(p.name)}", lms, p) for sid, lms, p in members]
    shown = ", ".join(_shown(p) for _, _, p in members)
    if newest:
        keep = max(members, key=lambda m: (_mtime(m[2]), str(m[2])))
        warnings.append(f"{shown} all give student id {sid0!r}; grading only the newest, {_shown(keep[2])} "
                        "(--newest)")
        return [keep]
    unique = len(set(names)) == len(names)
    renamed = [(f"{sid}-{name_hash(p.name if unique else str(p))}", lms, p) for sid, lms, p in members]
    warnings.append(f"{shown} all give student id {sid0!r}; each is graded under an id of its own ("
                    + ", ".join(sid for sid, _, _ in renamed) + "); --newest grades only the newest")
    return renamed


def _mtime(p: Path) -> float:
    try:
        return p.stat().st_mtime
    except OSError:
        return 0.0


def _shown(p: Path) -> str:
    return untrusted.name(str(p), 1000)


def _names(paths: list[Path], limit: int = 5) -> str:
    names = [untrusted.name(p.name) for p in paths[:limit]]
    return ", ".join(names) + (", ..." if len(paths) > limit else "")

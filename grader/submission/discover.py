"""Finding the submissions of a batch: files and folders on the command line -> one `Found` per student.

A folder argument is a folder of submissions: each `.py`, `.ipynb` or `.zip` file and each
sub-folder in it is one student's submission. Two exceptions keep the common layouts working:

* a folder that itself holds the assignment's main module (``submission.py``) is ONE student's
  folder submission;
* a folder holding ``expected.toml`` is the bundled sample tree: the samples it declares for the
  assignment are graded.

Hidden entries, ``__pycache__``, other file types and the grader's own output folders are skipped.
Nothing here reads a submission's content.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
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


def discover(paths: list[Path], *, assignment_id: str, main_module: str = "submission.py",
             exclude: Path | None = None) -> Discovery:
    """The submissions named by `paths` (files or folders).

    Args:
        exclude: a folder never to look into (the batch's own output folder).

    Raises:
        NoSubmissions: nothing to grade was found.
        GraderError: a path is missing or unreadable, or two submissions give the same student id.
    """
    found: list[Path] = []
    skipped: list[Path] = []
    for p in paths:
        if not p.exists():
            raise GraderError(f"{p} does not exist")
        if p.is_dir() and not (p / main_module).is_file():
            _collect_folder(p, assignment_id, exclude, found, skipped)
        elif p.is_dir() or p.name.lower().endswith(SUBMISSION_SUFFIXES):
            found.append(p)
        else:
            raise GraderError(f"{p} is not a submission: expected a .py, .ipynb or .zip file or a folder")
    if not found:
        where = ", ".join(str(p) for p in paths)
        extra = f" (skipped {len(skipped)} other entries: {_names(skipped)})" if skipped else ""
        raise NoSubmissions(f"no submissions found in {where}{extra}; expected .py, .ipynb or .zip files "
                            "or one sub-folder per student")
    return Discovery(_unique_ids(found), skipped)


def _collect_folder(folder: Path, assignment_id: str, exclude: Path | None,
                    found: list[Path], skipped: list[Path]) -> None:
    if (folder / "expected.toml").is_file():
        found.extend(_declared_samples(folder, assignment_id))
        return
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


def _declared_samples(folder: Path, assignment_id: str) -> list[Path]:
    """The sample submissions expected.toml declares for `assignment_id`."""
    try:
        declared = tomllib.loads((folder / "expected.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise GraderError(f"{folder / 'expected.toml'}: {e}") from e
    return [folder / rel for rel, entry in sorted(declared.items())
            if isinstance(entry, dict) and entry.get("assignment") == assignment_id and (folder / rel).exists()]


def _unique_ids(paths: list[Path]) -> list[Found]:
    """One id per submission, unique also without case (`student_id`). Two different names that
    still meet (a name spelled like another's hashed id) both get a hash of their exact name; the
    same student twice (one file name given twice, or two files with the same LMS student number)
    is an error naming both."""
    groups: dict[str, list[tuple[str, bool, Path]]] = {}
    for p in paths:
        sid, lms = id_and_lms(p)
        group = groups.setdefault(sid.casefold(), [])
        if not any(_same(q, p) for _, _, q in group):
            group.append((sid, lms, p))
    out: dict[str, Path] = {}
    taken: dict[str, Path] = {}  # casefolded id -> its submission
    for members in groups.values():
        if len(members) > 1:
            (sid0, lms0, p0), (_, _, p1) = members[0], members[1]
            if lms0 or p0.name == p1.name:
                raise GraderError(f"{_shown(p0)} and {_shown(p1)} both give student id {sid0!r}; "
                                  "remove the older one or rename one of them")
            members = [(f"{sid}-{name_hash(p.name)}", lms, p) for sid, lms, p in members]
        for sid, _, p in members:
            if sid.casefold() in taken:
                raise GraderError(f"{_shown(taken[sid.casefold()])} and {_shown(p)} both give student id {sid!r}; "
                                  "rename one of them")
            out[sid] = taken[sid.casefold()] = p
    return [Found(sid, out[sid]) for sid in sorted(out)]


def _shown(p: Path) -> str:
    return untrusted.name(str(p), 1000)


def _names(paths: list[Path], limit: int = 5) -> str:
    names = [untrusted.name(p.name) for p in paths[:limit]]
    return ", ".join(names) + (", ..." if len(paths) > limit else "")

"""The student kit: what ``grader release`` writes, and how ``grader check`` and pytest find it again.

Layout of a kit (``grader release masked-attention -o kit/``)::

    kit/
      README.md                          the assignment's README, plus "Checking your work"
      attention.py, attention.ipynb      the starter files
      conftest.py                        turns on grader.pytest_plugin for this folder only
      explore.html                       the masking experiment (grader.authoring.explore_page)
      assignments/masked-attention/
        spec.toml                        allowlisted keys, concepts, a kit seed, [kit] with the hidden COUNT
        cases_public.py, _common.py
        expected.safetensors             every public setup, computed by the reference at release
      wheel/attention_grader-*.whl       the grader without reference/ (what the student installs)

``assignments/`` is on the grader's default search path when the kit is the working directory;
``find_kit`` also finds it next to the submission, so ``grader check kit/attention.py`` works from
anywhere. Writing a kit, and proving it leaks nothing, is :mod:`grader.authoring.release`.

``locate_assignment`` is how every command of ``grader/cli/student.py`` finds the assignment
folder (kits first). Torch-free on purpose: ``grader check`` calls it before anything imports
torch, so that the sandbox can start first.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from grader.assignment.spec import available, infer
from grader.assignment.spec_file import KitInfo, read_spec
from grader.errors import AssignmentSpecError, GraderError, UnknownAssignment
from grader.i18n import EMPTY, Msg, tr

SHIPPED_CASE_FILES = ("cases_public.py", "_common.py")
SPEC_KEYS = ("id", "title", "version", "main_module", "cell_tag", "reference", "lang")
"""Top-level spec keys copied into a kit (an allowlist: anything else an instructor wrote stays home)."""

CONFTEST = '''\
# Lets `pytest` in this folder run the public cases of the assignment through the grader's
# sandbox: one test per case. Choose the file with `pytest --submission my_attention.py`.
pytest_plugins = ["grader.pytest_plugin"]
'''


@dataclass(frozen=True)
class Kit:
    dir: Path
    assignment_dir: Path
    files: list[Path]
    public_cases: int
    hidden_cases: int
    self_check: str = ""
    """The kit's self-check of the reference ("100%"), when release verified it."""


# --- reading -------------------------------------------------------------------------------

def kit_info(folder: Path) -> KitInfo | None:
    """The ``[kit]`` table of an assignment folder, or None for a full (instructor) assignment."""
    return read_spec(folder).kit


# --- untouched starters (torch-free) ---------------------------------------------------------

def code_fingerprint(data: bytes, name: str) -> str | None:
    """A hash of the code in a .py or .ipynb file: a notebook's code cells only (running it
    changes outputs and counts, not the code); trailing whitespace and line endings ignored.
    None for a notebook that is not valid JSON (it is not the starter either)."""
    text = data.decode("utf-8", "replace").removeprefix("\ufeff")
    if name.endswith(".ipynb"):
        try:
            doc = json.loads(text)
            cells = [c for c in doc.get("cells", []) if isinstance(c, dict) and c.get("cell_type") == "code"]
            sources = ["".join(c.get("source", "")) if isinstance(c.get("source"), list) else str(c.get("source", ""))
                       for c in cells]
        except (ValueError, AttributeError, TypeError):
            return None
        text = "\n\0\n".join(sources)
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    return hashlib.sha256("\n".join(lines).strip().encode("utf-8")).hexdigest()


def starter_files(folder: Path) -> list[Path]:
    """The starter files (.py and .ipynb) in an assignment folder's ``starter/``, sorted."""
    starter = folder / "starter"
    return [p for p in (sorted(starter.glob("*")) if starter.is_dir() else []) if p.suffix in (".py", ".ipynb")]


def starter_fingerprints(folder: Path) -> dict[str, str]:
    """Starter name -> fingerprint for an assignment folder: a kit's recorded ones, else the
    instructor's ``starter/`` files."""
    try:
        info = kit_info(folder)
    except AssignmentSpecError:
        return {}
    if info is not None:
        return info.starters
    out = {}
    for p in starter_files(folder):
        if p.is_file():
            fp = code_fingerprint(p.read_bytes(), p.name)
            if fp:
                out[p.name] = fp
    return out


def is_untouched(path: Path, starters: dict[str, str]) -> bool:
    """``path`` holds exactly the code of the starter of the same name."""
    want = starters.get(path.name)
    try:
        return bool(want) and code_fingerprint(path.read_bytes(), path.name) == want
    except OSError:
        return False


@dataclass(frozen=True)
class Choice:
    """Which file of a submission folder is graded, and the sentence that says why (or "")."""

    main: str | None
    """The file to grade, relative to the folder (None: leave it to the loader's rules)."""
    note: Msg = EMPTY


def choose_main(folder: Path, main_module: str, starters: dict[str, str]) -> Choice:
    """In a folder holding both ``attention.py`` and ``attention.ipynb`` (a kit, where the student
    worked in one of them), grade the one changed from the starter, and say so."""
    stem = Path(main_module).stem
    both = [f"{stem}.py", f"{stem}.ipynb"]
    present = [n for n in both if (folder / n).is_file()]
    if len(present) < 2:
        return Choice(None)
    changed = [n for n in present if not is_untouched(folder / n, starters)]
    py, nb = present
    if changed == [nb]:
        return Choice(nb, tr("Graded {graded}: {other} next to it is the starter as released (unchanged).",
                             graded=nb, other=py))
    if changed == [py]:
        return Choice(py, tr("Graded {graded}: {other} next to it is the starter as released (unchanged).",
                             graded=py, other=nb))
    if changed:
        return Choice(main_module, tr("Graded {graded}: {py} and {nb} both differ from the starter (grader check "
                                      "{nb} grades the notebook).", graded=main_module, py=py, nb=nb))
    return Choice(main_module, tr("Graded {graded}: {py} and {nb} are both the starter as released.",
                                  graded=main_module, py=py, nb=nb))


def untouched_note(path: Path, starters: dict[str, str]) -> Msg:
    """For a single file that is the untouched starter while its .py/.ipynb twin was changed:
    the command for the file the student works in (empty otherwise)."""
    if path.is_dir() or not is_untouched(path, starters):
        return EMPTY
    twin = path.with_suffix(".ipynb" if path.suffix == ".py" else ".py")
    if twin.is_file() and not is_untouched(twin, starters):
        return tr("{file} is the starter as released (unchanged); your work seems to be in {twin}: grader check "
                  "{twin}", file=path.name, twin=twin.name)
    return tr("{file} is the starter as released (unchanged).", file=path.name)


INSTALLED_KITS = "kits"
"""Folder of the ``grader`` package where a kit's wheel carries the kit's own assignment
(``kits/assignments/<id>/``), so that a file copied out of the kit folder still finds it
(``grader.authoring.slim``)."""


def installed_kits() -> dict[str, Path]:
    """The kit assignments the installed grader carries (empty outside a kit's wheel)."""
    return find_kit(Path(__file__).resolve().parents[1] / INSTALLED_KITS)


def find_kit(*starts: Path) -> dict[str, Path]:
    """Kit assignments (id -> folder) in ``<start>/assignments/*/`` for each start folder."""
    found: dict[str, Path] = {}
    for start in starts:
        root = start / "assignments"
        if not root.is_dir():
            continue
        for spec in sorted(root.glob("*/spec.toml")):
            try:
                if kit_info(spec.parent) is not None:
                    found.setdefault(spec.parent.name, spec.parent.resolve())
            except AssignmentSpecError:
                continue
    return found


# --- which assignment (torch-free) -----------------------------------------------------

def locate_assignment(name: str | None, submission: Path | None, *, kits: bool = True) -> Path:
    """The assignment's folder: ``-a`` as a folder path or a name, else inferred from the submission.

    A student kit next to the submission (or in the working directory) comes first, so that a
    kit's public-only copy is used inside it even where the full assignment is installed too.
    ``kits=False`` ignores kits (``grader ci`` grades hidden cases, which a kit does not have).
    """
    if name and (Path(name) / "spec.toml").is_file():
        return Path(name).resolve()
    starts: list[Path] = []
    if submission is not None:
        sub = submission.resolve()
        starts = [sub, sub.parent] if sub.is_dir() else [sub.parent]  # `grader check kit/` finds kit/assignments
    near = find_kit(*starts, Path.cwd()) if kits else {}
    if kits and not near:
        # A file copied out of its kit folder: the kit installed with this grader still knows it.
        near = installed_kits()
    if name:
        if name in near:
            return near[name]
        known = available()
        if name not in known:
            raise UnknownAssignment(name, list(known) + list(near))
        return known[name]
    if submission is None:
        raise GraderError(tr("missing -a/--assignment"))
    if len(near) == 1:
        # Inside a kit there is one assignment: grade against it even when the file lacks an entry
        # point, so that the student reads "defines no 'combine_masks'" rather than a guess failing.
        return next(iter(near.values()))
    return infer(submission, near or available())


def language_near(submission: Path | None, assignment: str | None = None) -> str | None:
    """The ``lang`` a student's command speaks before anything is graded, from spec.toml files
    alone: the assignment it locates, else the kits beside the submission, in the working directory
    or installed with the grader when they agree on one; None when none says (or on any error)."""
    try:
        folders = [locate_assignment(assignment, submission)]
    except (GraderError, OSError):
        starts = [submission.resolve().parent] if submission is not None else []
        folders = list((find_kit(*starts, Path.cwd()) or installed_kits()).values())
    langs = set()
    for folder in folders:
        try:
            langs.add(read_spec(folder).lang)
        except GraderError:
            continue
    return langs.pop() if len(langs) == 1 and None not in langs else None

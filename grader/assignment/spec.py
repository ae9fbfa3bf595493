"""``assignments/<slug>/`` -> ``Assignment``: the spec, public cases and (when present) hidden cases.

Layout of an assignment folder::

    spec.toml          title, version, seed (else seed.secret), entry points, points policy, limits
    cases_public.py    cases students may see (shipped in the release kit)
    cases_hidden.py    cases run only at grading time (never shipped)
    _common.py         optional helpers shared by both (shipped; must hold nothing secret)
    starter/           starter files for students (.py and .ipynb)
    README.md          the student-facing instructions

Case modules are imported as submodules of a synthetic package, so ``from . import _common``
works inside them. Nothing about a particular assignment is known to ``grader/``.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from grader.errors import AssignmentSpecError, GraderError, UnknownAssignment
from grader.assignment.seed import assignment_seed
from grader.assignment.spec_file import EntryPoint, SpecFile, read_spec
from grader.i18n import add_assignment_locales, tr

if TYPE_CHECKING:  # finding and reading specs stays torch-free: `grader check` starts faster
    from grader.cases import Case, CaseInstance
    from grader.results import Concept

CASE_FILES = ("cases_public.py", "cases_hidden.py")


@dataclass(frozen=True)
class Assignment:
    id: str
    title: str
    version: str
    seed: int
    dir: Path
    main_module: str
    """For folder/zip submissions: the module that holds the entry points."""
    cell_tag: str | None
    """When set, only notebook cells carrying this tag are graded."""
    entry_points: tuple[EntryPoint, ...]
    cases: tuple[Case, ...]
    limits: dict[str, int | float] = field(default_factory=dict)
    """spec.toml's ``[limits]`` (`SpecFile.limits`)."""
    concepts: dict[str, Concept] = field(default_factory=dict)
    """Diagnosis vocabulary: the grader's core concepts and those spec.toml declares (by id)."""
    reference: str = "reference"
    """The import name of the trusted reference: a top-level module (``reference = "reference"``
    in spec.toml, the default) or, for ``reference = "solution.py"``, that file of the folder,
    which the case files import as ``from . import solution`` (never shipped in a kit)."""
    reference_file: Path | None = None
    """The folder's reference file, when the reference lives in the assignment."""
    stored: Path | None = None
    """A student kit's precomputed public setups (``grader.grading.stored``): used instead of running
    the reference, which the kit does not have."""
    lang: str | None = None
    """The language students' feedback is in unless ``--lang`` says otherwise (spec.toml ``lang``,
    "en" or "zh-CN"); None: the grader's locale decides."""

    def instances(self, *, public_only: bool = False) -> list[CaseInstance]:
        return [inst for c in self.cases if not (public_only and c.hidden) for inst in c.instances()]

    def possible(self, *, public_only: bool = False) -> float:
        return sum(i.points for i in self.instances(public_only=public_only))


def search_path() -> list[Path]:
    """Where assignments are looked up: $GRADER_ASSIGNMENTS (os.pathsep-separated), ./assignments,
    then the folder shipped beside the package."""
    paths = [Path(p) for p in os.environ.get("GRADER_ASSIGNMENTS", "").split(os.pathsep) if p]
    paths.append(Path.cwd() / "assignments")
    paths.append(Path(__file__).resolve().parents[2] / "assignments")
    seen, out = set(), []
    for p in paths:
        r = p.resolve()
        if r not in seen and r.is_dir():
            seen.add(r)
            out.append(r)
    return out


def available() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for root in search_path():
        for spec in sorted(root.glob("*/spec.toml")):
            found.setdefault(spec.parent.name, spec.parent)
    return found


def infer(submission: Path, candidates: dict[str, Path]) -> Path:
    """The one candidate folder whose entry points the submission defines (read as text, never run)."""
    try:
        if submission.is_dir():
            text = " ".join(p.read_text("utf-8", "replace") for p in sorted(submission.rglob("*.py"))[:50])
        else:
            text = submission.read_bytes()[: 20 << 20].decode("utf-8", "replace")
    except OSError as e:
        raise GraderError(tr("cannot read {path}: {reason}", path=str(submission), reason=str(e.strerror or e))) from e
    matches, partial = [], []
    for name, folder in sorted(candidates.items()):
        eps = [e.name for e in read_spec(folder).entry_points]
        found = sum(bool(re.search(rf"\b(def|class)\s+{re.escape(e)}\b", text)) for e in eps)
        if eps and found == len(eps):
            matches.append((name, folder))
        elif eps and 2 * found >= len(eps):
            partial.append((name, folder))
    if len(matches) == 1:
        return matches[0][1]
    if not matches and len(partial) == 1:
        # Most entry points are there (one renamed or missing): grading says which one is absent.
        return partial[0][1]
    if not candidates:
        raise GraderError(tr("could not tell which assignment {file} is for: this grader knows no assignment "
                             "here. Run grader check in your kit's folder (the one holding assignments/), or "
                             "pass -a with the path of an assignment folder", file=submission.name))
    known = ", ".join(sorted(candidates))
    if not matches:
        raise GraderError(tr("could not tell which assignment {file} is for; pass -a/--assignment (known: {known})",
                             file=submission.name, known=known))
    raise GraderError(tr("{file} matches several assignments ({names}); pass -a/--assignment",
                         file=submission.name, names=", ".join(n for n, _ in matches)))


class _NoReference(types.ModuleType):
    """What a student kit's case files get for ``import reference``: the kit has no reference, and
    its public setups come precomputed (``grader.grading.stored``), so nothing may use it."""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        raise AssignmentSpecError(f"the student kit has no reference ({self.__name__}.{name} was used); "
                                  "its public cases read their setups from the kit: release it again")


def _import_cases(folder: Path, package: str, *, kit_reference: str | None = None) -> list[Case]:
    """``kit_reference``: in a student kit, the reference module's name, bound to a stand-in
    while the case files import (and restored after: this process may grade for real too)."""
    saved = {}
    if kit_reference:
        saved = {n: sys.modules.get(n) for n in (kit_reference,)}
        sys.modules[kit_reference] = _NoReference(kit_reference)
    try:
        return _import_case_files(folder, package)
    finally:
        for n, m in saved.items():
            if m is None:
                sys.modules.pop(n, None)
            else:
                sys.modules[n] = m


def _import_case_files(folder: Path, package: str) -> list[Case]:
    from grader.cases import Case

    pkg = types.ModuleType(package)
    pkg.__path__ = [str(folder)]  # lets case files do `from . import _common`
    sys.modules[package] = pkg
    cases: list[Case] = []
    for fname in CASE_FILES:
        path = folder / fname
        if not path.exists():
            continue
        name = f"{package}.{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as e:  # an instructor's mistake: say where
            raise AssignmentSpecError(f"{path}: {type(e).__name__}: {e}") from e
        found = [v for v in vars(module).values() if isinstance(v, Case)]
        for c in found:
            if c.check_fn is None:
                raise AssignmentSpecError(f"{path}: case {c.id!r} has no @{c.id}.check function")
            if (fname == "cases_hidden.py") != c.hidden:
                where = "hidden" if c.hidden else "public"
                raise AssignmentSpecError(f"{path}: case {c.id!r} is marked {where} but lives in {fname}")
        cases.extend(found)
    return cases


def load_assignment(name_or_path: str | Path) -> Assignment:
    """Load by slug (searched on ``search_path()``) or by folder path."""
    folder = Path(name_or_path)
    if not (folder / "spec.toml").is_file():
        known = available()
        if str(name_or_path) not in known:
            raise UnknownAssignment(str(name_or_path), list(known))
        folder = known[str(name_or_path)]
    spec = read_spec(folder)
    for key in ("id", "version"):
        if getattr(spec, key) is None:
            raise AssignmentSpecError(f"{spec.path}: missing required key {key!r} in the top table")
    return _assignment(folder, spec)


def _assignment(folder: Path, spec: SpecFile) -> Assignment:
    aid, version = str(spec.id), str(spec.version)
    package = "grader_assignment_" + "".join(ch if ch.isalnum() else "_" for ch in f"{aid}_{version}")
    from grader.assignment import concepts as vocab

    concepts = vocab.vocabulary_of(spec.concepts, str(spec.path))
    ref = spec.reference or "reference"
    ref_file = None
    if ref.endswith(".py"):  # the assignment's own reference, imported as a submodule of its package
        ref_file = folder / ref
        ref = f"{package}.{Path(ref).stem}"
    stored = folder / "expected.safetensors"
    kit = spec.kit is not None and stored.is_file()
    if ref_file is not None and not kit and not ref_file.is_file():
        raise AssignmentSpecError(f"{spec.path}: reference = {ref_file.name!r}, but there is no {ref_file}")
    cases = _import_cases(folder, package, kit_reference=ref if kit else None)
    for c in cases:
        for cid in (c.concept, *c.on_error.values()):
            if cid not in concepts:
                raise AssignmentSpecError(vocab.unknown(cid, concepts, f"{c.where()}: case {c.id!r}"))
    ids = [i.id for c in cases for i in c.instances()]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise AssignmentSpecError(f"{folder}: duplicate case ids: {', '.join(dupes)}")
    add_assignment_locales(folder / "locales")  # its case titles and messages, in other languages
    return Assignment(
        id=aid, title=spec.title or aid, version=version, seed=assignment_seed(spec.seed, folder),
        dir=folder, main_module=spec.main_module or "submission.py", cell_tag=spec.cell_tag or None,
        entry_points=spec.entry_points, cases=tuple(cases), limits=dict(spec.limits), concepts=concepts,
        reference=ref, reference_file=ref_file if not kit else None, stored=stored if kit else None,
        lang=spec.lang,
    )

"""What grades a submission of an assignment, as a fingerprint: its case code, its trusted
reference, its spec.toml and the grader's version. Two runs with equal fingerprints give equal
results for the same file on the same device; anything that tells them apart (a fixed hidden case,
a corrected reference, a new tolerance, a new grader) changes it, version bump or not.

The ledger keys on it, and any other cache of results per assignment should too. Torch-free: it
reads files and never imports the cases or the reference.
"""

from __future__ import annotations

import hashlib
import importlib.util
from dataclasses import asdict, dataclass
from pathlib import Path

from grader.assignment.seed import SEED_FILE
from grader.assignment.spec import Assignment

PARTS = ("cases", "reference", "spec", "grader")
"""The parts, in the order a change is reported."""


@dataclass(frozen=True)
class Fingerprint:
    cases: str
    """sha256 over the assignment's Python files (cases, shared helpers), starter and reference excluded."""
    reference: str
    """sha256 over the trusted reference's source files ("" when it cannot be found, as in a kit)."""
    spec: str
    """sha256 of spec.toml (version, limits, tolerances, concepts) and of seed.secret, where the
    seed is kept there."""
    grader: str
    """The grader's version."""

    def changed(self, before: Fingerprint) -> tuple[str, ...]:
        """The parts (of `PARTS`) that differ from `before`."""
        return tuple(p for p in PARTS if getattr(self, p) != getattr(before, p))

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict) -> Fingerprint:
        return Fingerprint(**{p: str(d.get(p, "")) for p in PARTS})


def _digest(root: Path, files: list[Path]) -> str:
    h = hashlib.sha256()
    for f in sorted(files):
        h.update(f.relative_to(root).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


def _case_files(a: Assignment) -> list[Path]:
    skip = {"starter", "locales", "__pycache__"}
    return [p for p in a.dir.rglob("*.py")
            if not skip & set(p.relative_to(a.dir).parts) and p != a.reference_file]


def _reference_files(a: Assignment) -> tuple[Path, list[Path]] | None:
    if a.reference_file is not None:
        return a.reference_file.parent, [a.reference_file]
    try:
        spec = importlib.util.find_spec(a.reference)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    if spec.submodule_search_locations:  # a package: every .py file in it
        root = Path(next(iter(spec.submodule_search_locations)))
        return root, [p for p in root.rglob("*.py") if "__pycache__" not in p.parts]
    origin = Path(spec.origin)
    return origin.parent, [origin]


def fingerprint(a: Assignment) -> Fingerprint:
    """The fingerprint of `a` as it is on disk now, with this grader's version."""
    from grader import __version__

    ref = _reference_files(a)
    return Fingerprint(
        cases=_digest(a.dir, _case_files(a)),
        reference=_digest(*ref) if ref else "",
        spec=hashlib.sha256(b"".join(p.read_bytes() for p in (a.dir / "spec.toml", a.dir / SEED_FILE)
                                     if p.is_file())).hexdigest(),
        grader=__version__,
    )

"""The grader as a student installs it: a wheel of the ``grader`` package alone, never ``reference``.

``grader release`` puts it in the kit (``wheel/``), so the student's install is what the kit
carries: the public cases' expected results come precomputed (``grader.grading.stored``) and no solution
is installed. Built from the running grader's own files with the standard library (a wheel is a
zip with METADATA, WHEEL, entry_points.txt and RECORD). The instructor's Gradescope autograder
(`grader.authoring.gradescope`) builds the same wheel with the reference inside.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from importlib import metadata
from pathlib import Path

import grader
from grader.assignment.kit import INSTALLED_KITS

DIST = "attention-grader"
WHEEL_TAG = "py3-none-any"


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                  and p.suffix not in (".pyc", ".pyo"))


def _requires() -> list[str]:
    """The grader's own requirements: its installed metadata, or (run from a checkout that was never
    installed) the pyproject.toml beside the package, so the list has one home."""
    try:
        return list(metadata.requires(DIST) or [])
    except metadata.PackageNotFoundError:
        import tomllib

        project = tomllib.loads((Path(grader.__file__).resolve().parents[1] / "pyproject.toml")
                                .read_text(encoding="utf-8"))["project"]
        kit = project.get("optional-dependencies", {}).get("kit", [])
        return list(project["dependencies"]) + [f'{r}; extra == "kit"' for r in kit]


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(out_dir: Path, kit: Path | None = None, *, with_reference: bool = False) -> Path:
    """Write ``attention_grader-<version>-py3-none-any.whl`` (the grader package only) into ``out_dir``.

    ``kit``: a kit's assignment folder (public cases, stored setups, spec), carried inside the package
    as ``grader/kits/assignments/<id>/`` so that the installed grader knows its kit wherever the
    student's file is (``grader.assignment.kit.installed_kits``). ``with_reference``: the trusted
    ``reference`` package too, for the instructor's autograder (never for a student)."""
    version = grader.__version__
    name = f"attention_grader-{version}-{WHEEL_TAG}.whl"
    info = f"attention_grader-{version}.dist-info"
    root = Path(grader.__file__).resolve().parent
    extras = sorted({r.split("extra ==")[1].strip().strip("'\"") for r in _requires() if "extra ==" in r})
    meta = "\n".join(["Metadata-Version: 2.1", f"Name: {DIST}", f"Version: {version}",
                      ("Summary: attention-grader for the instructor's autograder, with the reference solution"
                       if with_reference else
                       "Summary: attention-grader for students: checks public cases; carries no reference solution"),
                      "Requires-Python: >=3.11", *(f"Provides-Extra: {e}" for e in extras),
                      *(f"Requires-Dist: {r}" for r in _requires())]) + "\n"
    entries = {f"{info}/METADATA": meta.encode(),
               f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: grader.authoring.slim\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
               f"{info}/entry_points.txt": b"[console_scripts]\ngrader = grader.cli.app:main\n"}
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / name
    record = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        members = [(p, "grader/" + p.relative_to(root).as_posix()) for p in _files(root)
                   if p.relative_to(root).parts[0] != INSTALLED_KITS]
        if kit is not None:
            members += [(p, f"grader/{INSTALLED_KITS}/assignments/{kit.name}/{p.relative_to(kit).as_posix()}")
                        for p in _files(kit)]
        if with_reference:
            import reference

            ref = Path(reference.__file__).resolve().parent
            members += [(p, "reference/" + p.relative_to(ref).as_posix()) for p in _files(ref)]
        for p, arc in members:
            data = p.read_bytes()
            z.writestr(arc, data)
            record.append(f"{arc},{_digest(data)},{len(data)}")
        for arc, data in entries.items():
            z.writestr(arc, data)
            record.append(f"{arc},{_digest(data)},{len(data)}")
        record.append(f"{info}/RECORD,,")
        z.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return path

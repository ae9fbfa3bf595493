"""The student kit: what ``grader release`` writes, and how ``grader check`` and pytest find it again.

Layout of a kit (``grader release masked-attention -o kit/``)::

    kit/
      README.md                          the assignment's README, plus "Checking your work"
      attention.py, attention.ipynb      the starter files
      conftest.py                        turns on grader.pytest_plugin for this folder only
      assignments/masked-attention/
        spec.toml                        allowlisted keys, a kit seed, and [kit] with the hidden COUNT
        cases_public.py, _common.py

``assignments/`` is on the grader's default search path when the kit is the working directory;
``find_kit`` also finds it next to the submission, so ``grader check kit/attention.py`` works from
anywhere. Nothing of the hidden cases is copied: not their file, ids, titles or the assignment's
seed (hidden inputs are drawn from it). ``release`` scans what it wrote and refuses to leave a kit
that mentions any of them.

``locate_assignment`` is how every command of ``grader/commands/student.py`` finds the assignment
folder (kits first). Torch-free on purpose: ``grader check`` calls it before anything imports
torch, so that the sandbox can start first.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.assignments import available, infer, read_spec
from grader.errors import AssignmentSpecError, GraderError, OutputNotWritable, UnknownAssignment

KIT_TABLE = "kit"
SHIPPED_CASE_FILES = ("cases_public.py", "_common.py")
SPEC_KEYS = ("id", "title", "version", "main_module", "cell_tag")
"""Top-level spec keys copied into a kit (an allowlist: anything else an instructor wrote stays home)."""

CONFTEST = '''\
# Lets `pytest` in this folder run the public cases of the assignment through the grader's
# sandbox: one test per case. Choose the file with `pytest --submission my_attention.py`.
pytest_plugins = ["grader.pytest_plugin"]
'''


@dataclass(frozen=True)
class KitInfo:
    """What a kit's spec.toml says about the cases that are not in it."""

    hidden_cases: int
    hidden_points: float
    submission: str
    """The starter .py file name: what ``pytest`` grades in the kit by default."""


@dataclass(frozen=True)
class Kit:
    dir: Path
    assignment_dir: Path
    files: list[Path]
    public_cases: int
    hidden_cases: int


# --- reading -------------------------------------------------------------------------------

def kit_info(folder: Path) -> KitInfo | None:
    """The ``[kit]`` table of an assignment folder, or None for a full (instructor) assignment."""
    table = read_spec(folder).get(KIT_TABLE)
    if not isinstance(table, dict):
        return None
    return KitInfo(hidden_cases=int(table.get("hidden_cases", 0)),
                   hidden_points=float(table.get("hidden_points", 0.0)),
                   submission=str(table.get("submission", "")))


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
    starts = [submission.resolve().parent] if submission is not None else []
    near = find_kit(*starts, Path.cwd()) if kits else {}
    if name:
        if name in near:
            return near[name]
        known = available()
        if name not in known:
            raise UnknownAssignment(name, list(known) + list(near))
        return known[name]
    if submission is None:
        raise GraderError("missing -a/--assignment")
    return infer(submission, near or available())


# --- writing -------------------------------------------------------------------------------

def kit_seed(seed: int, aid: str, version: str) -> int:
    """The kit's own seed for public inputs: reproducible per release, and reveals nothing of ``seed``."""
    digest = hashlib.sha256(f"student-kit:{aid}:{version}:{seed}".encode()).digest()
    return int.from_bytes(digest[:6], "little")


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        escaped = v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
        return f'"{escaped}"'
    raise AssignmentSpecError(f"spec.toml: cannot copy value {v!r} into the kit")


def kit_spec_text(spec: dict[str, Any], *, seed: int, info: KitInfo) -> str:
    """spec.toml for the kit: the allowlisted keys, its own seed, limits, entry points, and [kit]."""
    lines = ["# Student kit: public cases only. The hidden cases run at grading time."]
    for key in SPEC_KEYS:
        if spec.get(key) not in (None, ""):
            lines.append(f"{key} = {_toml_value(spec[key])}")
    lines.append(f"seed = {seed}")
    if spec.get("fully_masked_rows", "zeros") != "zeros":
        lines.append(f"fully_masked_rows = {_toml_value(spec['fully_masked_rows'])}")
    limits = spec.get("limits") or {}
    if limits:
        lines += ["", "[limits]"] + [f"{k} = {_toml_value(v)}" for k, v in limits.items()]
    for ep in spec.get("entry_points", []):
        lines += ["", "[[entry_points]]"] + [f"{k} = {_toml_value(ep[k])}" for k in ("name", "kind", "signature")]
    lines += ["", f"[{KIT_TABLE}]", f"hidden_cases = {info.hidden_cases}",
              f"hidden_points = {_toml_value(float(info.hidden_points))}",
              f"submission = {_toml_value(info.submission)}"]
    return "\n".join(lines) + "\n"


def readme_text(original: str | None, *, title: str, aid: str, submission: str, info: KitInfo) -> str:
    hidden = (f"{info.hidden_cases} hidden cases will run at grading time, so a full pass here is not "
              "a full grade." if info.hidden_cases else "There are no hidden cases for this assignment.")
    section = f"""
## Checking your work

Install the grader once (your course tells you how), then, in this folder:

```bash
grader check {submission}          # public cases, a hint for each failure, an HTML report
pytest                           # the same public cases as pytest tests
pytest --submission other.py     # another file
```

`grader check` finds the assignment in `assignments/{aid}/` next to your file. It runs your
code in a sandboxed process; {hidden}
"""
    head = original.rstrip() + "\n" if original else f"# {title}\n"
    return head + section


def _secrets_of(assignment) -> list[str]:
    """Strings that must never appear in a kit: hidden case ids and titles, and the seed."""
    out = [str(assignment.seed)]
    for c in assignment.cases:
        if c.hidden:
            out += [c.id, c.title] + [i.id for i in c.instances()]
    return out


def leaks(folder: Path, secret_strings: list[str]) -> list[tuple[str, str]]:
    """(file, secret) pairs where a secret appears in a file under ``folder`` as a whole word."""
    patterns = [(s, re.compile(rf"(?<![\w]){re.escape(s)}(?![\w])")) for s in set(secret_strings) if s]
    found = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        text = path.read_bytes().decode("utf-8", "replace")
        found += [(str(path.relative_to(folder)), s) for s, rx in patterns if rx.search(text)]
    return found


def _prepare_out(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise GraderError(f"{out} already exists and is not an empty folder; choose a new output folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".grader-write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise OutputNotWritable(f"cannot write to {out}: {e.strerror or e}") from e


def release(assignment, out: Path) -> Kit:
    """Write the student kit of a (full) ``Assignment`` into the new or empty folder ``out``."""
    src = assignment.dir
    spec = read_spec(src)
    if KIT_TABLE in spec:
        raise GraderError(f"{src} is already a student kit; release from the instructor's assignment folder")
    starters = sorted(p for p in (src / "starter").glob("*") if p.is_file()) if (src / "starter").is_dir() else []
    py = [p.name for p in starters if p.suffix == ".py"]
    hidden = [i for i in assignment.instances() if i.case.hidden]
    info = KitInfo(hidden_cases=len(hidden), hidden_points=round(sum(i.points for i in hidden), 6),
                   submission=py[0] if py else assignment.main_module)
    _prepare_out(out)
    adir = out / "assignments" / assignment.id
    adir.mkdir(parents=True)
    written: list[Path] = []

    def put(path: Path, text: str) -> None:
        path.write_text(text, encoding="utf-8")
        written.append(path)

    for p in starters:
        written.append(Path(shutil.copyfile(p, out / p.name)))
    for name in SHIPPED_CASE_FILES:
        if (src / name).is_file():
            written.append(Path(shutil.copyfile(src / name, adir / name)))
    put(adir / "spec.toml", kit_spec_text(spec, seed=kit_seed(assignment.seed, assignment.id, assignment.version),
                                          info=info))
    readme = (src / "README.md").read_text(encoding="utf-8") if (src / "README.md").is_file() else None
    put(out / "README.md", readme_text(readme, title=assignment.title, aid=assignment.id,
                                       submission=info.submission, info=info))
    put(out / "conftest.py", CONFTEST)

    found = leaks(out, _secrets_of(assignment))
    if found:
        shutil.rmtree(out)
        where = "; ".join(f"{f} mentions {s!r}" for f, s in found[:5])
        raise AssignmentSpecError(f"refusing to release {assignment.id}: {where}. Remove hidden case names "
                                  "and the seed from the shipped files (README.md, starter/, cases_public.py, "
                                  "_common.py)")
    return Kit(dir=out, assignment_dir=adir, files=written,
               public_cases=len(assignment.instances(public_only=True)), hidden_cases=info.hidden_cases)

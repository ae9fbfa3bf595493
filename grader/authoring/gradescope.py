"""``grader release A --gradescope``: the instructor's ``autograder.zip`` for a Gradescope
programming assignment.

Gradescope unpacks the zip into ``/autograder/source``, runs ``setup.sh`` once to build its image,
then ``run_autograder`` for every upload. The zip holds::

    setup.sh          a Python >= 3.11 virtualenv in /autograder/venv: the CPU build of torch, then the grader
    run_autograder    grades /autograder/submission/, writes /autograder/results/results.json
    autograder.json   which assignment, the hidden cases' visibility, the feedback's language
    wheel/            the grader with its trusted reference (never a student's install)
    assignment/<id>/  the whole assignment folder: hidden cases included

This zip is the instructor's: it carries the hidden cases and the reference. It is uploaded to
Gradescope and never given to students (the student kit is ``grader release`` without the flag).
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass
from pathlib import Path

from grader.assignment.spec import Assignment
from grader.errors import GraderError
from grader.report.gradescope import VISIBILITIES
from grader.report.outdir import writable_dir

ZIP_NAME = "autograder.zip"
CONFIG_NAME = "autograder.json"
CPU_TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
_SKIPPED_PARTS = {"__pycache__", ".ipynb_checkpoints", ".pytest_cache"}

SETUP_SH = """\
#!/usr/bin/env bash
# Gradescope runs this once, in /autograder/source, when it builds the autograder's image.
# It makes a virtualenv in /autograder/venv with the CPU build of torch (never the multi-GB CUDA
# one: Gradescope has no GPU) and the grader with this assignment's reference.
set -euo pipefail
cd "$(dirname "$0")"
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"

export DEBIAN_FRONTEND=noninteractive
pick_python() {{
    for py in python3.13 python3.12 python3.11 python3; do
        if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
            echo "$py"; return 0
        fi
    done
    return 1
}}
PYTHON="$(pick_python || true)"
if [ -z "$PYTHON" ]; then
    apt-get update
    apt-get install -y --no-install-recommends python3.11 python3.11-venv
    PYTHON=python3.11
fi
# The sandbox's system-call filter loads libseccomp; without it the grader still runs, less isolated.
apt-get install -y --no-install-recommends libseccomp2 >/dev/null 2>&1 || true
"$PYTHON" -m venv "$ROOT/venv" || {{
    apt-get update && apt-get install -y --no-install-recommends "$(basename "$PYTHON")-venv"
    "$PYTHON" -m venv "$ROOT/venv"
}}
"$ROOT/venv/bin/python" -m pip install --upgrade pip
"$ROOT/venv/bin/python" -m pip install "torch=={torch}" --index-url {index}
"$ROOT/venv/bin/python" -m pip install wheel/{wheel}
"$ROOT/venv/bin/python" -c 'import grader, reference, torch; print("grader", grader.__version__, "torch", torch.__version__)'
"""

RUN_AUTOGRADER = """\
#!/usr/bin/env bash
# Gradescope runs this for every upload. It grades /autograder/submission/ (a .py, a notebook,
# a folder or a zip) and writes /autograder/results/results.json; if the grader itself fails, a
# result saying so is written all the same. AUTOGRADER_ROOT replaces /autograder (tests),
# AUTOGRADER_PYTHON the virtualenv's interpreter.
ROOT="${AUTOGRADER_ROOT:-/autograder}"
PYTHON="${AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}"
RESULTS="$ROOT/results/results.json"
mkdir -p "$ROOT/results"
rm -f "$RESULTS"
"$PYTHON" -m grader.authoring.autograder --root "$ROOT"
status=$?
if [ ! -s "$RESULTS" ]; then
    cat > "$RESULTS" <<'JSON'
{"score": 0.0, "output": "The autograder could not grade this submission because of a fault in the grader, not in your code. Your instructor will grade it again; you do not need to resubmit.", "output_format": "text", "visibility": "visible", "stdout_visibility": "hidden", "tests": []}
JSON
fi
exit "$status"
"""


@dataclass(frozen=True)
class AutograderZip:
    path: Path
    files: list[str]
    """Names inside the zip."""
    hidden_cases: int


def _torch_version() -> str:
    import torch

    return torch.__version__.split("+")[0]


def _add(z: zipfile.ZipFile, name: str, data: bytes, *, executable: bool = False) -> None:
    info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = (0o100755 if executable else 0o100644) << 16
    z.writestr(info, data)


def config_text(assignment: Assignment, *, hidden_visibility: str, lang: str | None) -> str:
    """autograder.json: what run_autograder grades against, and how its results are shown."""
    return json.dumps({"assignment": f"assignment/{assignment.id}", "hidden_visibility": hidden_visibility,
                       "lang": lang, "assignment_version": assignment.version}, indent=2) + "\n"


def build_autograder_zip(assignment: Assignment, out_dir: Path, *, hidden_visibility: str = "after_published",
                         lang: str | None = None, torch_version: str | None = None) -> AutograderZip:
    """Write ``out_dir/autograder.zip`` for `assignment` (see the module docstring)."""
    from grader.authoring import slim

    if hidden_visibility not in VISIBILITIES:
        raise GraderError(f"hidden cases' visibility must be one of {', '.join(VISIBILITIES)}, "
                          f"not {hidden_visibility!r}")
    out = writable_dir(Path(out_dir), what="the output folder ")
    target = out / ZIP_NAME
    staging = out / ".autograder-wheel"
    wheel = slim.build_wheel(staging, with_reference=True)
    names: list[str] = []
    tmp = target.with_name(f".{ZIP_NAME}.partial")
    try:
        with zipfile.ZipFile(tmp, "w") as z:
            def put(name: str, data: bytes, executable: bool = False) -> None:
                _add(z, name, data, executable=executable)
                names.append(name)

            put("setup.sh", SETUP_SH.format(torch=torch_version or _torch_version(), index=CPU_TORCH_INDEX,
                                            wheel=wheel.name).encode(), executable=True)
            put("run_autograder", RUN_AUTOGRADER.encode(), executable=True)
            put(CONFIG_NAME, config_text(assignment, hidden_visibility=hidden_visibility, lang=lang).encode())
            put(f"wheel/{wheel.name}", wheel.read_bytes())
            src = assignment.dir.resolve()
            for p in sorted(src.rglob("*")):
                rel = p.relative_to(src)
                if p.is_file() and not (_SKIPPED_PARTS & set(rel.parts)) and p.suffix not in (".pyc", ".pyo"):
                    put(f"assignment/{assignment.id}/{rel.as_posix()}", p.read_bytes())
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)
        wheel.unlink(missing_ok=True)
        try:
            staging.rmdir()
        except OSError:
            pass
    return AutograderZip(path=target, files=names,
                         hidden_cases=sum(1 for i in assignment.instances() if i.case.hidden))

"""What ``run_autograder`` runs inside Gradescope: grade one upload, write results.json.

    python -m grader.authoring.autograder [--root /autograder]

``ROOT/source/autograder.json`` (written by `grader.authoring.gradescope`) names the assignment
folder, the hidden cases' visibility and the feedback's language. ``ROOT/submission/`` holds what
the student uploaded: one .py, .ipynb or .zip file is graded as that file; anything else (several
files, a folder) is graded as a folder. A result is written whatever happens: a submission that
cannot be loaded gets its report (score 0 and the reason), and a fault of the grader itself gets
`grader.report.gradescope.failure_results`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

from grader.authoring.gradescope import CONFIG_NAME
from grader.report.gradescope import autograder_results, failure_results
from grader.report.outdir import write_text_atomic
from grader.untrusted import json_text

SUBMISSION_SUFFIXES = (".py", ".ipynb", ".zip")
_IGNORED = {"__MACOSX", ".DS_Store"}


@dataclass(frozen=True)
class AutograderConfig:
    assignment: Path
    hidden_visibility: str
    lang: str | None


def read_config(source: Path) -> AutograderConfig:
    data = json.loads((source / CONFIG_NAME).read_text(encoding="utf-8"))
    return AutograderConfig(assignment=source / data["assignment"],
                            hidden_visibility=str(data.get("hidden_visibility", "after_published")),
                            lang=data.get("lang"))


def submission_path(folder: Path) -> Path:
    """The one uploaded .py/.ipynb/.zip file, or the folder itself (several files, a sub-folder)."""
    entries = [p for p in folder.iterdir() if p.name not in _IGNORED and not p.name.startswith(".")] \
        if folder.is_dir() else []
    if len(entries) == 1 and entries[0].is_file() and entries[0].suffix.lower() in SUBMISSION_SUFFIXES:
        return entries[0]
    if len(entries) == 1 and entries[0].is_dir():
        return entries[0]
    return folder


def grade_upload(root: Path) -> dict:
    """results.json for the upload under `root` (raises only for faults of the grader)."""
    from grader.grading.single import grade_one

    cfg = read_config(root / "source")
    graded = grade_one(cfg.assignment, submission_path(root / "submission"), public_only=False, device="cpu",
                       lang=cfg.lang)
    return autograder_results(graded.report, hidden_visibility=cfg.hidden_visibility)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.authoring.autograder")
    parser.add_argument("--root", type=Path, default=Path(os.environ.get("AUTOGRADER_ROOT", "/autograder")))
    args = parser.parse_args(argv)
    out = args.root / "results" / "results.json"
    try:
        results, status = grade_upload(args.root), 0
    except BaseException as e:  # noqa: BLE001 - the student still gets a result, the log the traceback
        traceback.print_exc()
        results, status = failure_results(f"{type(e).__name__}: {e}"), 0
    write_text_atomic(out, json_text(results, indent=2) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())

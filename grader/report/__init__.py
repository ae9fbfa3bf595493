"""Reports from GradeReports: the student's HTML page, the class dashboard, exports, re-rendering.

Importing this package imports none of its modules: the names below are loaded on first use, so
that a command importing one small module of it (``grader.report.outdir``, ``grader.report.text``)
does not pay for Jinja2 and every page's templates before it has started its sandbox.
(``rerender`` is not among them: once the module of that name is imported, the package's
attribute is the module; import the function from ``grader.report.rerender``.)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grader.report.dashboard import RunInfo, render_dashboard, write_dashboard
    from grader.report.exports import (
        gradescope_results, grades_csv, junit_xml, markdown_summary, write_gradescope, write_grades_csv,
        write_junit, write_markdown,
    )
    from grader.report.html import render_submission, write_submission
    from grader.report.rerender import Written, load_results, write_all, write_result_json

_LAZY = {
    "RunInfo": "dashboard", "render_dashboard": "dashboard", "write_dashboard": "dashboard",
    "gradescope_results": "exports", "grades_csv": "exports", "junit_xml": "exports", "markdown_summary": "exports",
    "write_gradescope": "exports", "write_grades_csv": "exports", "write_junit": "exports", "write_markdown": "exports",
    "render_submission": "html", "write_submission": "html",
    "Written": "rerender", "load_results": "rerender", "write_all": "rerender",
    "write_result_json": "rerender",
}

__all__ = [
    "RunInfo", "Written", "gradescope_results", "grades_csv", "junit_xml", "load_results", "markdown_summary",
    "render_dashboard", "render_submission", "write_all", "write_dashboard", "write_gradescope",
    "write_grades_csv", "write_junit", "write_markdown", "write_result_json", "write_submission",
]


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'grader.report' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"grader.report.{mod}"), name)
    globals()[name] = value
    return value

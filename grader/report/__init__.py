"""Reports from GradeReports: the student's HTML page, the class dashboard, exports, re-rendering."""

from grader.report.dashboard import RunInfo, render_dashboard, write_dashboard
from grader.report.exports import (
    gradescope_results, grades_csv, junit_xml, markdown_summary, write_gradescope, write_grades_csv,
    write_junit, write_markdown,
)
from grader.report.html import render_submission, write_submission
from grader.report.rerender import Written, load_results, rerender, write_all, write_result_json

__all__ = [
    "RunInfo", "Written", "gradescope_results", "grades_csv", "junit_xml", "load_results", "markdown_summary",
    "render_dashboard", "render_submission", "rerender", "write_all", "write_dashboard", "write_gradescope",
    "write_grades_csv", "write_junit", "write_markdown", "write_result_json", "write_submission",
]

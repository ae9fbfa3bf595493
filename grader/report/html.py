"""The per-submission HTML report: GradeReport -> view model -> one self-contained page.

The Jinja environment is built once per process, with autoescaping for every template.
The page carries a Content-Security-Policy that allows only its own inline script (by hash),
inline styles and nothing from the network.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import os
from pathlib import Path

import jinja2
from markupsafe import Markup

from grader import __version__
from grader.report.outdir import write_text_atomic
from grader.report.view import build_view
from grader.results import GradeReport
from grader.assignment.concepts import vocabulary


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The shared Jinja environment (templates in grader/report/templates, autoescape everywhere)."""
    return jinja2.Environment(
        loader=jinja2.PackageLoader("grader.report", "templates"),
        autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


@functools.lru_cache(maxsize=None)
def asset_script(name: str) -> tuple[Markup, str]:
    """Our own JS file (never student text) as markup, and its CSP hash source."""
    env = environment()
    source, _, _ = env.loader.get_source(env, name)  # type: ignore[union-attr]
    if "</script" in source.lower():
        raise ValueError(f"{name} must not contain a closing script tag")
    digest = base64.b64encode(hashlib.sha256(source.encode("utf-8")).digest()).decode("ascii")
    return Markup(source), f"'sha256-{digest}'"


def content_security_policy(script_hash: str) -> str:
    return (f"default-src 'none'; script-src {script_hash}; style-src 'unsafe-inline'; "
            "img-src data:; base-uri 'none'; form-action 'none'")


def render_page(template: str, script: str, **context: object) -> str:
    """Render one of our page templates with its inline script and matching CSP."""
    code, digest = asset_script(script)
    return environment().get_template(template).render(
        script=code, csp=content_security_policy(digest), grader_version=__version__, **context)


def render_submission(report: GradeReport, *, release_hidden: bool = False) -> str:
    """The student's feedback page for one graded submission."""
    view = build_view(report, release_hidden=release_hidden)
    return render_page("report.html", "report.js", v=view, load_explanation=vocabulary(report.concepts)["load-error"].explanation)


def write_submission(report: GradeReport, path: str | os.PathLike[str], *, release_hidden: bool = False) -> Path:
    """Render and write one report; returns the path written."""
    return write_text_atomic(path, render_submission(report, release_hidden=release_hidden))

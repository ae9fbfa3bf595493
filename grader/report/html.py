"""The per-submission HTML report: GradeReport -> view model -> one self-contained page.

One Jinja environment per language is built once per process, with autoescaping for every
template and that language's gettext catalog installed (``jinja2.ext.i18n``).
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
import jinja2.meta
from markupsafe import Markup

from grader import __version__
from grader.i18n import DEFAULT, normalise, translations
from grader.report.heatmap import cell_layers
from grader.report.outdir import write_text_atomic
from grader.report.view import build_view, concept_explanation
from grader.results import GradeReport
from grader.assignment.concepts import vocabulary


@functools.cache
def environment(lang: str = DEFAULT) -> jinja2.Environment:
    """The shared Jinja environment of `lang` (templates in grader/report/templates, autoescape
    everywhere, ``_``/``gettext``/``ngettext`` translating into `lang`)."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("grader.report", "templates"),
        autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=["jinja2.ext.i18n"],
    )
    env.install_gettext_translations(translations(lang), newstyle=True)  # type: ignore[attr-defined]
    env.globals["cell_layers"] = cell_layers
    return env


@functools.cache
def asset_script(name: str | tuple[str, ...]) -> tuple[Markup, str]:
    """Our own JS file (never student text), or several joined into one script, as markup, and
    its CSP hash source."""
    env = environment()
    names = (name,) if isinstance(name, str) else name
    source = "\n".join(env.loader.get_source(env, n)[0] for n in names)  # type: ignore[union-attr]
    if "</script" in source.lower():
        raise ValueError(f"{name} must not contain a closing script tag")
    digest = base64.b64encode(hashlib.sha256(source.encode("utf-8")).digest()).decode("ascii")
    return Markup(source), f"'sha256-{digest}'"


def content_security_policy(script_hash: str) -> str:
    return (f"default-src 'none'; script-src {script_hash}; style-src 'unsafe-inline'; "
            "img-src data:; base-uri 'none'; form-action 'none'")


def render_page(template: str, script: str | tuple[str, ...], lang: str = DEFAULT, **context: object) -> str:
    """Render one of our page templates in `lang` with its inline script and matching CSP."""
    lang = normalise(lang) or DEFAULT
    code, digest = asset_script(script)
    return environment(lang).get_template(template).render(
        script=code, csp=content_security_policy(digest), grader_version=__version__, lang=lang, **context)


def render_submission(report: GradeReport, *, release_hidden: bool = False, lang: str | None = None) -> str:
    """The student's feedback page for one graded submission, in `lang` (default: the report's)."""
    lang = normalise(lang or report.lang) or DEFAULT
    view = build_view(report, release_hidden=release_hidden, lang=lang)
    # The explorer's script travels only in pages that have an explorer: most pages stay small.
    script = ("report.js", "explorer.js") if any(c.explorer for c in view.cases) else "report.js"
    return render_page("report.html", script, lang, v=view,
                       load_explanation=concept_explanation(vocabulary(report.concepts), "load-error", lang))


def prepare_submission_page(lang: str = DEFAULT) -> None:
    """Compile the submission page's templates (report.html and every template it imports or
    includes, found in their source) and scripts for `lang` now, so that the first
    `write_submission` only renders (`grader check` calls it while the sandbox is still starting)."""
    env = environment(normalise(lang) or DEFAULT)
    todo, seen = ["report.html"], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        source = env.loader.get_source(env, name)[0]  # type: ignore[union-attr]
        todo += [n for n in jinja2.meta.find_referenced_templates(env.parse(source)) if n is not None]
        env.get_template(name)
    asset_script("report.js")
    asset_script(("report.js", "explorer.js"))


def write_submission(report: GradeReport, path: str | os.PathLike[str], *, release_hidden: bool = False,
                     lang: str | None = None) -> Path:
    """Render and write one report (in `lang`, default the report's); returns the path written."""
    return write_text_atomic(path, render_submission(report, release_hidden=release_hidden, lang=lang))

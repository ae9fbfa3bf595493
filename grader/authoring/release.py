"""``grader release``: write the student kit of an assignment and prove that it leaks nothing.

What a kit holds and how commands find it again is :mod:`grader.assignment.kit`. Nothing of the
hidden cases is copied: not their file, ids, titles or the assignment's seed (hidden inputs are
drawn from it). ``release`` scans what it wrote and refuses to leave a kit that mentions any of
them, imports what it does not ship, or carries a line of the reference's code.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grader.assignment.kit import CONFTEST, SHIPPED_CASE_FILES, SPEC_KEYS, Kit, starter_fingerprints
from grader.assignment.seed import kit_seed
from grader.assignment.spec_file import KIT_TABLE, KitInfo, SpecFile, read_spec
from grader.errors import AssignmentSpecError, GraderError
from grader.i18n import DEFAULT, N_, Msg, normalise, ntr, tr, translate
from grader.i18n.documents import translate_markdown, translate_notebook
from grader.report.outdir import writable_dir


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        escaped = v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
        return f'"{escaped}"'
    raise AssignmentSpecError(f"spec.toml: cannot copy value {v!r} into the kit")


def kit_spec_text(spec: SpecFile, *, seed: int, info: KitInfo) -> str:
    """spec.toml for the kit: the allowlisted keys, its own seed, limits, entry points, and [kit]."""
    lines = ["# Student kit: public cases only. The hidden cases run at grading time."]
    for key in SPEC_KEYS:
        value = getattr(spec, key)
        if value not in (None, ""):
            lines.append(f"{key} = {_toml_value(value)}")
    lines.append(f"seed = {seed}")
    if spec.limits:
        lines += ["", "[limits]"] + [f"{k} = {_toml_value(v)}" for k, v in spec.limits.items()]
    for ep in spec.entry_points:
        lines += ["", "[[entry_points]]"] + [f"{k} = {_toml_value(getattr(ep, k))}" for k in ("name", "kind", "signature")]
    for c in spec.concepts or ():
        lines += ["", "[[concepts]]"] + [f"{k} = {_toml_value(getattr(c, k))}" for k in ("id", "title", "explanation", "dashboard")
                                         if k != "dashboard" or c.dashboard]
    lines += ["", f"[{KIT_TABLE}]", f"hidden_cases = {info.hidden_cases}",
              f"hidden_points = {_toml_value(float(info.hidden_points))}",
              f"submission = {_toml_value(info.submission)}"]
    if info.starters:
        lines += ["", f"[{KIT_TABLE}.starters]  # code fingerprints as released: an untouched starter is not graded "
                      "when its twin was changed"]
        lines += [f"{_toml_value(name)} = {_toml_value(fp)}" for name, fp in sorted(info.starters.items())]
    return "\n".join(lines) + "\n"


def readme_text(original: str | None, *, title: str, aid: str, submission: str, info: KitInfo,
                wheel: str | None = None, lang: str = DEFAULT) -> str:
    """The kit's README: the assignment's own (in `lang` where it has one), then how to check, in `lang`."""
    def say(m: Msg) -> str:
        return m.render(lang)

    hidden = say(ntr("{n} hidden case will run at grading time, so a full pass here is not a full grade.",
                     "{n} hidden cases will run at grading time, so a full pass here is not a full grade.",
                     info.hidden_cases)) if info.hidden_cases else say(tr("There are no hidden cases for this "
                                                                            "assignment."))
    install = say(tr('`pip install "./wheel/{wheel}[kit]"` (the grader this kit carries, with pytest: no solution '
                     'in it).', wheel=wheel)) if wheel else say(tr('`pip install "attention-grader[kit]"` (your '
                                                                   'course tells you where it comes from).'))
    stem = Path(submission).stem
    notebook = f"{stem}.ipynb" if f"{stem}.ipynb" in info.starters else None
    if notebook:
        rows = [(f"grader check {notebook}", N_("if you work in the notebook (save it first)")),
                (f"grader check {submission}", N_("if you work in the .py file")),
                ("grader check .", N_("this folder: grades whichever of the two you changed")),
                ("pytest", N_("the same public cases as pytest tests (this folder, as above)")),
                (f"pytest --submission {notebook}", "")]
    else:
        rows = [(f"grader check {submission}", N_("public cases, a hint for each failure, an HTML report")),
                ("pytest", N_("the same public cases as pytest tests")),
                ("pytest --submission other.py", N_("another file"))]
    commands = "\n".join(f"{command:<31} # {translate(comment, lang)}" if comment else command
                          for command, comment in rows)
    section = setup_section(install, notebook, say) + "\n## " + say(tr("Checking your work")) + "\n\n" + say(tr(
            "Then, in this folder:")) + f"\n\n```bash\n{commands}\n```\n\n" + say(tr(
                "`grader check` finds the assignment in `assignments/{aid}/` next to your file and prints a hint for "
                "each failure (an HTML report too). It runs your code in a sandboxed process; {hidden}", aid=aid,
                hidden=hidden)) + "\n"
    head = original.rstrip() + "\n" if original else f"# {title}\n"
    return head + section


def setup_section(install: str, notebook: str | None, say) -> str:
    """The kit README's first hour: Python, a virtualenv, the CPU build of PyTorch before anything
    pulls the GPU one, the grader, Jupyter for the notebook; for each operating system."""
    steps = [
        say(tr("Python 3.11 or newer (`python3 --version`): older versions cannot install the grader.")),
        say(tr("A virtual environment in this folder, activated in every new terminal:")) + """

   ```bash
   python3 -m venv .venv && source .venv/bin/activate
   ```""",
        say(tr("PyTorch's CPU build, before the grader (on Linux a plain `pip install torch` downloads several "
               "GB of GPU libraries that the assignment does not need):")) + """

   ```bash
   pip install torch --index-url https://download.pytorch.org/whl/cpu      # Linux
   pip install torch                                                       # macOS
   ```""",
        say(tr("Install the grader and pytest once, from this folder: {install}", install=install)),
    ]
    if notebook:
        steps.append(say(tr("For the notebook: `pip install jupyterlab`, then `jupyter lab {notebook}` (VS Code "
                            "with its Jupyter extension opens it too).", notebook=notebook)))
    body = "\n".join(f"{n}. {text}" for n, text in enumerate(steps, 1))
    windows = say(tr("On Windows, `grader check` runs inside WSL (Windows Subsystem for Linux: `wsl --install` "
                     "in an administrator PowerShell, then every step above in its Ubuntu terminal, Linux lines); "
                     "the self-check does not start in a plain Windows Python yet."))
    return "\n## " + say(tr("Setting up (once)")) + "\n\n" + body + "\n\n" + windows + "\n"


def ship_catalogs(locales: Path, adir: Path) -> list[Path]:
    """The assignment's translations for the kit: each ``locales/<ll_CC>/LC_MESSAGES/assignment.po``
    cut down to the messages the kit's own files use (public cases, _common.py, spec.toml), so that
    no hidden case's title or message travels with it."""
    from babel.messages.catalog import Catalog
    from babel.messages.extract import extract_from_dir
    from babel.messages.pofile import read_po, write_po

    if not locales.is_dir():
        return []
    method_map = [("cases_*.py", "grader-cases"), ("_common.py", "grader-cases"), ("spec.toml", "grader-spec")]
    used = {m[2] for m in extract_from_dir(str(adir), method_map, keywords={"tr": None, "ntr": (1, 2), "N_": None})}
    out = []
    for po in sorted(locales.glob("*/LC_MESSAGES/assignment.po")):
        with po.open("rb") as f:
            full = read_po(f)
        kept = Catalog(locale=full.locale, domain=full.domain, project=full.project)
        for m in full:
            if m.id and m.id in used:
                kept.add(m.id, m.string, flags=m.flags)
        target = adir / po.relative_to(locales.parent)
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("wb") as f:
            write_po(f, kept, no_location=True)
        out.append(target)
    return out


def _secrets_of(assignment) -> list[str]:
    """Strings that must never appear in a kit: hidden case ids and titles, and the seed."""
    out = [str(assignment.seed)]
    for c in assignment.cases:
        if c.hidden:
            out += [c.id, c.title] + [i.id for i in c.instances()]
    return out


def shipped_texts(folder: Path) -> list[tuple[str, str]]:
    """(name, text) of everything under ``folder`` a student receives, wheels opened member by member."""
    import zipfile

    out = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = str(path.relative_to(folder))
        if path.suffix == ".whl":
            with zipfile.ZipFile(path) as z:
                out += [(f"{rel}!{n}", z.read(n).decode("utf-8", "replace")) for n in z.namelist()]
        else:
            out.append((rel, path.read_bytes().decode("utf-8", "replace")))
    return out


def leaks(folder: Path, secret_strings: list[str], code_lines: Sequence[str] = ()) -> list[tuple[str, str]]:
    """(file, secret) pairs where a secret appears in a file under ``folder`` (wheels included) as a
    whole word, or one of ``code_lines`` (the reference's source) appears at all."""
    patterns = [(s, re.compile(rf"(?<![\w]){re.escape(s)}(?![\w])")) for s in set(secret_strings) if s]
    found = []
    for name, text in shipped_texts(folder):
        # The plain substring test first: the word-bounded regex alone scans every position of
        # every file once per secret, the longest step of a release.
        found += [(name, s) for s, rx in patterns if s in text and rx.search(text)]
        hit = next((line for line in code_lines if line in text), None)
        if hit:
            found.append((name, f"reference source: {hit}"))
    return found


def reference_lines(module: str, file: Path | None = None) -> list[str]:
    """Distinctive lines of the reference's source (40+ characters once stripped): what no kit file
    may contain, the grader's wheel included. The reference's diagnosis models (what each classic
    mistake gives) are part of it: a line of them copied into the grader makes the kit fail."""
    import importlib.util

    try:
        spec = None if file is not None else importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return []
    if file is not None:
        files = [file]
    elif spec is None:
        return []
    elif spec.submodule_search_locations:
        files = [p for loc in spec.submodule_search_locations for p in sorted(Path(loc).glob("*.py"))]
    else:
        files = [Path(spec.origin)] if spec.origin else []
    lines = {line.strip() for p in files for line in p.read_text("utf-8", "replace").splitlines()}
    return sorted(s for s in lines if len(s) >= 40)


def unshipped_imports(folder: Path, reference: str = "") -> list[str]:
    """``file:line: ...`` for each relative import in a shipped case file of a module the kit does
    not ship (``from .cases_hidden import ...`` would break every student's ``grader check``)."""
    import ast

    shipped = {Path(n).stem for n in SHIPPED_CASE_FILES}
    if reference.endswith(".py"):  # the assignment's own reference: the kit binds it to a stand-in
        shipped.add(Path(reference).stem)
    problems = []
    for name in SHIPPED_CASE_FILES:
        path = folder / name
        if not path.is_file():
            continue
        try:
            tree = ast.parse(path.read_text("utf-8"), str(path))
        except SyntaxError as e:
            problems.append(f"{path}:{e.lineno}: {e.msg}")
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or node.level == 0:
                continue
            wanted = [node.module.split(".")[0]] if node.module else [a.name for a in node.names]
            for mod in wanted:
                if mod not in shipped:
                    problems.append(f"{path}:{node.lineno}: {name} imports {mod}, which the kit does not ship "
                                    f"(it ships {', '.join(SHIPPED_CASE_FILES)})")
    return problems


def _prepare_out(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise GraderError(f"{out} already exists and is not an empty folder; choose a new output folder")
    writable_dir(out)


def release(assignment, out: Path, *, verify: bool = True, lang: str | None = None) -> Kit:
    """Write the student kit of a (full) ``Assignment`` into the new or empty folder ``out``:
    starters, README, public cases with their setups precomputed by the reference
    (``expected.safetensors``) and the grader's wheel without the reference (``wheel/``). Refused,
    and removed, when a file names a hidden case or the seed, holds the reference's source, or
    (``verify``) the kit's self-check of the reference is not 100 %. ``lang``: the students' language
    (the kit's spec.toml ``lang``, and its README: the assignment's ``README.<lang>.md`` where it has one)."""
    src = assignment.dir
    spec = read_spec(src)
    if lang is not None:
        spec = dataclasses.replace(spec, lang=normalise(lang) or lang)
    kit_lang = normalise(spec.lang) or DEFAULT
    if spec.kit is not None:
        raise GraderError(f"{src} is already a student kit; release from the instructor's assignment folder")
    bad_imports = unshipped_imports(src, spec.reference or "")
    if bad_imports:
        raise AssignmentSpecError(f"refusing to release {assignment.id}: " + "; ".join(bad_imports))
    starters = sorted(p for p in (src / "starter").glob("*") if p.is_file()) if (src / "starter").is_dir() else []
    py = [p.name for p in starters if p.suffix == ".py"]
    hidden = [i for i in assignment.instances() if i.case.hidden]
    info = KitInfo(hidden_cases=len(hidden), hidden_points=round(sum(i.points for i in hidden), 6),
                   submission=py[0] if py else assignment.main_module, starters=starter_fingerprints(src))
    _prepare_out(out)
    adir = out / "assignments" / assignment.id
    adir.mkdir(parents=True)
    written: list[Path] = []

    def put(path: Path, text: str) -> None:
        path.write_text(text, encoding="utf-8")
        written.append(path)

    for p in starters:
        if p.suffix == ".ipynb" and kit_lang != DEFAULT:  # its markdown cells in the students' language
            nb = translate_notebook(json.loads(p.read_text(encoding="utf-8")), kit_lang)
            put(out / p.name, json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
        else:
            written.append(Path(shutil.copyfile(p, out / p.name)))
    for name in SHIPPED_CASE_FILES:
        if (src / name).is_file():
            written.append(Path(shutil.copyfile(src / name, adir / name)))
    put(adir / "spec.toml", kit_spec_text(spec, seed=kit_seed(),
                                          info=info))
    written += ship_catalogs(src / "locales", adir)
    from grader.authoring import publish, slim

    try:
        written.append(publish.store_setups(adir, assignment.reference_file))
        wheel = slim.build_wheel(out / "wheel", kit=adir)
    except BaseException:
        shutil.rmtree(out)
        raise
    written.append(wheel)
    own = next((p for p in (src / f"README.{kit_lang}.md", src / "README.md") if p.is_file()), None)
    readme = None
    if own is not None:
        readme = own.read_text(encoding="utf-8")
        if own.name == "README.md":
            readme = translate_markdown(readme, kit_lang)  # block by block, from the assignment's catalog
    put(out / "README.md", readme_text(readme, title=translate(assignment.title, kit_lang), aid=assignment.id,
                                       submission=info.submission, info=info, wheel=wheel.name, lang=kit_lang))
    put(out / "conftest.py", CONFTEST)
    from grader.authoring import explore_page

    written.append(explore_page.write(out, kit_lang))  # the masking experiment, on the reference's numbers

    found = leaks(out, _secrets_of(assignment), reference_lines(assignment.reference, assignment.reference_file))
    if found:
        shutil.rmtree(out)
        where = "; ".join(f"{f} mentions {s!r}" for f, s in found[:5])
        if any(".whl!" in f for f, _ in found):  # the grader itself carries the reference's code
            raise AssignmentSpecError(f"refusing to release {assignment.id}: {where}. The grader a student installs "
                                      "may hold no reference code: keep solutions and diagnosis models (what each "
                                      "mistake gives) with the reference, computed in the cases' setups")
        raise AssignmentSpecError(f"refusing to release {assignment.id}: {where}. Remove hidden case names, "
                                  "the seed and the reference's code from the shipped files (README.md, starter/, "
                                  "cases_public.py, _common.py)")
    checked = ""
    if verify:
        report = publish.self_check_reference(assignment, adir)
        checked = report.score.display_percent()
        if report.score.earned != report.score.possible:
            shutil.rmtree(out)
            bad = "; ".join(f"{c.id} ({c.outcome.value}: {str(c.message)[:200]})" for c in report.cases
                            if c.outcome.value != "passed")
            raise AssignmentSpecError(f"refusing to release {assignment.id}: the kit's self-check gives the "
                                      f"reference {report.score.display_percent()}: {bad}")
    return Kit(dir=out, assignment_dir=adir, files=written,
               public_cases=len(assignment.instances(public_only=True)), hidden_cases=info.hidden_cases,
               self_check=checked)

"""No English sentence reaches a student untranslated: every string literal that reads as English
prose in the modules whose text a student reads is a msgid (``tr``/``ntr``/``N_``), a case title
(extracted), a docstring, or listed below with the reason it never reaches a student.

test_catalogs.py checks that each *marked* string has a translation; this test finds the strings
nobody marked: a ``raise GraderError(f"...")`` on the self-check's path, an English ``what=``
fragment passed into a translated sentence, a plain ``lines.append("...")``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

STUDENT_FACING = [
    "grader/checks", "grader/cases.py", "grader/errors.py",
    "grader/grading/outcomes.py", "grader/grading/engine.py", "grader/grading/setups.py",
    "grader/grading/single.py",
    "grader/sandbox/errors.py", "grader/sandbox/host/reports.py",
    "grader/submission/load.py", "grader/submission/neutralise.py",
    "grader/assignment/kit.py", "grader/assignment/spec.py",
    "grader/notebook", "grader/pytest_plugin.py",
    "grader/report/check_text.py", "grader/report/view.py", "grader/report/inline.py",
    "grader/report/text.py", "grader/report/outdir.py", "grader/report/heatmap.py", "grader/report/explorer_view.py",
    "grader/cli/common.py", "grader/cli/student.py",
    "assignments",
]
"""What ``grader check``, ``notebook.check()`` and the kit's pytest say, and the report they write.
The sandbox's protocol (wire, host/worker, child/server) is not here: its faults reach a student only inside
"the sandbox could not run: …", whose frame is translated and whose detail is a diagnostic."""

MARKED = {"tr": (0,), "ntr": (0, 1), "N_": (0,), "_": (0,), "verbatim": (0,)}
"""Calls whose positional argument at these places is a msgid (or text kept as it is on purpose)."""
NOT_SHOWN = {"ValueError", "TypeError", "AssertionError", "RuntimeError", "KeyError", "AttributeError",
             "NotImplementedError", "ImportError", "OSError", "LookupError", "IndexError", "StudentError"}
"""Exceptions raised for a programming error (or, StudentError, to stand in for the student's own in
a test double): never a sentence to a student."""
EXTRACTED_KEYWORDS = {"title", "help"}
"""``@case(title=...)`` (extracted into the assignment's catalog) and click's ``help=`` (the
command's --help, English like the rest of the command line's own text)."""

OPERATOR_ONLY = {
    "grader/checks/diagnose.py": ("Fragments of PyTorch's own error messages, matched against what the student's "
                                  "code raised; never shown"),
    "grader/grading/outcomes.py": "an assignment author's broken check: the instructor's error",
    "grader/grading/engine.py": "a broken spec.toml or a kit released before its cases changed: the instructor's",
    "grader/grading/single.py": "a broken [limits] table: the instructor's",
    "grader/grading/setups.py": "an assignment author's broken setup: the instructor's",
    "grader/submission/load.py": "the English twin kept in results beside its translatable label",
    "grader/submission/neutralise.py": "the code put in place of a magic line (a `pass` and its comment), never a message",
    "grader/pytest_plugin.py": "the option group's name in pytest --help",
    "grader/assignment/kit.py": "a comment in the kit's conftest.py",
    "grader/assignment/spec.py": "spec.toml errors: the instructor's (a released kit is proven to load)",
    "grader/cli/student.py": "`grader ci`'s fenced log summary and `grader release` (the instructor's command)",
}
"""Module -> why its remaining English prose never reaches a student. A literal is let through
only when it is listed in ALLOWED under its module."""

ALLOWED: dict[str, tuple[str, ...]] = {
    "grader/checks/diagnose.py": ("without overflow", "value cannot be converted to type", "to have the same dtype",
                                  "expected scalar type", "is not on the expected device",
                                  "expected all tensors to be on the same device", "on device meta",
                                  "unexpected keyword argument", "required positional argument",
                                  "positional argument but", "positional arguments but", "is not callable",
                                  "has no attribute"),
    "grader/grading/outcomes.py": ("{}: case {} failed with",),
    "grader/grading/engine.py": ("{}: {} in [limits] must be a whole number, got {}", "{}: no stored setup for {}; the kit is older",
                                 "case {} ({}) has no check"),
    "grader/grading/single.py": ("{}: the [limits] table could not be applied",),
    "grader/grading/setups.py": ("case {} of {} ({}): its {} raised {}: {}. This is the assignment's code",),
    "grader/submission/load.py": ("code cell {}",),
    "grader/submission/neutralise.py": (" not run", "pass  # cell magic %%", "{}pass  # magic not run",
                                        "{}{} = None  # magic not run"),
    "grader/pytest_plugin.py": ("attention-grader student kit",),
    "grader/assignment/kit.py": ("# Lets `pytest` in this folder run the public cases",),
    "grader/assignment/spec.py": ("the student kit has no reference",
                                  "{}: reference = {}, but there is no {}", "{}: duplicate case ids: {}",
                                  "{}: missing required key {}", "{}: case {} has no @{}.check function",
                                  "{}: case {} is marked {} but lives in {}"),
    "grader/cli/student.py": ("Sandbox isolation: {}", "Sandbox limits: {}", "Kit for {} v{} in {}: {} public cases",
                              "{} is a student kit (public cases only); grader ci needs", "cannot write the CI results: {}",
                              "Gradescope autograder for {} v{}: {} ({} files", "It holds the hidden cases and the reference"),
    "assignments/masked-attention/cases_hidden.py": ("'list' object has no attribute", "must match the size of tensor"),
    "assignments/masked-attention/cases_public.py": ("'list' object has no attribute",),
    "assignments/masked-loss-and-sampling/cases_hidden.py": ("out of bounds", "probability tensor contains",
                                                             "division by zero"),
    "assignments/masked-loss-and-sampling/cases_public.py": ("out of bounds", "probability tensor contains",
                                                             "division by zero"),
    "assignments/mha-kv-cache/cases_hidden.py": ("must match the size of tensor",),
    "assignments/mha-kv-cache/cases_public.py": ("must match the size of tensor",),
}
"""Each module's English literals that are not for students (see OPERATOR_ONLY for why), by how they
begin (an f-string's fields written ``{}``). The assignments' ones are PyTorch's error text that a
case matches."""

CODE = re.compile(r"\S*[_.()=\[\]`/<>@^~|&\-+*#$%'\"\\]\S*")
WORD = re.compile(r"[A-Za-z][a-z]+")


def reads_as_english(text: str) -> bool:
    """Two or more English words in a row once code (anything holding code punctuation:
    ``masked_attention(q, k)``, ``-a/--assignment``, ``{field}``) is taken out."""
    prose = CODE.sub(" | ", re.sub(r"\{\w*\}", " | ", text))
    for run in re.split(r"[|,;:.!?()\n]", prose):
        tokens = run.split()
        if any(WORD.fullmatch(a) and WORD.fullmatch(b) for a, b in zip(tokens, tokens[1:])):
            return True
    return False


def _text(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


def _called(call: ast.Call) -> str:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _exempt(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    child, p = node, parents.get(node)
    while p is not None and not isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
        if isinstance(p, ast.Call):
            name = _called(p)
            if name in MARKED and child in p.args and p.args.index(child) in MARKED[name]:
                return True
            if name in NOT_SHOWN or any(k is child and k.arg in EXTRACTED_KEYWORDS for k in p.keywords):
                return True
        if isinstance(p, (ast.Assert, ast.Compare)):
            return True  # compared with, never shown
        child, p = p, parents.get(p)
    return False


def unmarked_english(source: str) -> list[tuple[int, str]]:
    """(line, text) of each string literal in `source` that reads as English and is not exempt."""
    tree = ast.parse(source)
    parents = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
    docstrings = {n.body[0].value for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    # attribute docstrings: a bare string right after an assignment
    docstrings |= {n.value for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    found = []
    for node in ast.walk(tree):
        text = _text(node)
        if text is None or node in docstrings or isinstance(parents.get(node), ast.JoinedStr):
            continue
        if reads_as_english(text) and not _exempt(node, parents):
            found.append((node.lineno, text))
    return sorted(found)


def _files() -> list[Path]:
    out = []
    for entry in STUDENT_FACING:
        path = ROOT / entry
        out += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return [p for p in out if "starter" not in p.parts and "locales" not in p.parts]


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_english_sentence_a_student_can_read_is_translatable(path):
    rel = path.relative_to(ROOT).as_posix()
    allowed = ALLOWED.get(rel, ())
    bad = [f"{rel}:{line}: {text[:120]!r}" for line, text in unmarked_english(path.read_text(encoding="utf-8"))
           if not text.startswith(allowed)]
    assert not bad, ("English a student can read, not marked for translation (wrap it in tr(...) and add the "
                     "zh_CN entry; or, if no student can ever see it, list it in ALLOWED with the reason in "
                     "OPERATOR_ONLY):\n  " + "\n  ".join(bad))


def test_every_allowed_literal_is_still_there_and_says_why():
    """An entry whose string is gone must go too, and every module with one says why."""
    for rel, prefixes in ALLOWED.items():
        if rel.startswith("grader/"):
            assert rel in OPERATOR_ONLY, rel
        texts = [t for _, t in unmarked_english((ROOT / rel).read_text(encoding="utf-8"))]
        stale = [p for p in prefixes if not any(t.startswith(p) for t in texts)]
        assert not stale, f"{rel}: no longer holds {stale}"


def test_the_scan_catches_a_newly_added_unmarked_string():
    """The defects this test exists for, written as a developer might add them."""
    new_code = '''
from grader.errors import GraderError
from grader.i18n import tr

def located(name):
    if not name:
        raise GraderError(f"no assignment called {name} here")         # unmarked: caught
    raise GraderError(tr("no assignment called {name}", name=name))     # marked: fine

def lines(report):
    out = ["Your code printed nothing"]                                  # unmarked: caught
    out.append(tr("{what} is wrong", what="the concatenated outputs"))   # an English fragment: caught
    out.append(tr("{what} is wrong", what="causal_mask(6)"))             # code: fine
    if report == "Your code printed nothing":                             # compared, never shown: fine
        raise ValueError("report must be a GradeReport")                  # a programming error: fine
    return out
'''
    found = [text for _, text in unmarked_english(new_code)]
    assert found == ["no assignment called {} here", "Your code printed nothing", "the concatenated outputs"]


@pytest.mark.parametrize("text, english", [
    ("could not tell which assignment {file} is for", True),
    ("the concatenated decode outputs", True),
    ("forward(x), called again", True),
    ("masked_cross_entropy(logits, targets, mask)", False),
    ("causal_mask(2, 3, device='meta')", False),
    ("-a/--assignment", False),
    ("{what}: {reason}", False),
    ("softmax", False),
    ("cannot write the CI results", True),
    ("VS Code", False),
])
def test_what_reads_as_english(text, english):
    assert reads_as_english(text) is english

"""Student exceptions -> concept: many classic mistakes announce themselves in PyTorch's errors.

Also the diagnoses that need no tensor: a placeholder that still raises NotImplementedError, and
an entry point that a later statement rebound to something else (``causal_mask = causal_mask(T)``
in a demo cell), found in the submission's source without running it.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from collections.abc import Iterable

from grader.i18n import N_, Msg, tr, verbatim

# (substring of "Type: message", concept), first match wins.
_PATTERNS: tuple[tuple[str, str], ...] = (
    ("without overflow", "dtype-overflow"),
    ("value cannot be converted to type", "dtype-overflow"),
    # A float32 tensor (in practice an additive mask built with torch.zeros/torch.full and no
    # dtype=) mixed into half-precision scores promotes them; `weights @ v` then meets fp16 v.
    ("to have the same dtype", "mask-dtype-promotion"),
    ("expected scalar type", "mask-dtype-promotion"),
    ("expected m1 and m2", "mask-dtype-promotion"),
    ("is not on the expected device", "device-placement"),
    ("expected all tensors to be on the same device", "device-placement"),
    ("on device meta", "device-placement"),
    ("unexpected keyword argument", "signature"),
    ("required positional argument", "signature"),
    ("positional argument but", "signature"),
    ("positional arguments but", "signature"),
    ("is not callable", "signature"),
    ("has no attribute", "signature"),
)


def concept_of_exception(exc_type: str, message: str, default: str,
                         case_patterns: dict[str, str] | None = None) -> str:
    """The concept an exception points to: the case's own patterns first, then PyTorch's well-known errors."""
    text = f"{exc_type}: {message}".lower()
    for needle, concept in list((case_patterns or {}).items()) + list(_PATTERNS):
        if needle.lower() in text:
            return concept
    return default



# --- the student's source, read for a hint ----------------------------------------------------

MAX_ANALYSED_CHARS = 200_000
"""A code unit longer than this is not parsed for a hint (`find_rebinding`, a placeholder's class):
parsing costs up to ~500 bytes of memory per character of tiny statements, in the grader's own
process, and no honest attention submission comes near it."""
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
"""Line breaks as Python's tokenizer counts them (what ``ast`` line numbers count)."""


def _parsed(source: str) -> ast.Module | None:
    """`source` parsed, or None when it is too long to parse here or does not parse."""
    if len(source) > MAX_ANALYSED_CHARS:
        return None
    try:
        return ast.parse(source)
    except Exception:  # SyntaxError, ValueError (null bytes), MemoryError/RecursionError (nesting)
        return None


def _line(source: str, lineno: int) -> str:
    """Line `lineno` (1-based) of `source`, counted as `ast` counts."""
    lines = _LINE_BREAK.split(source)
    return lines[lineno - 1] if 0 < lineno <= len(lines) else ""


# --- placeholders ---------------------------------------------------------------------------

NOT_IMPLEMENTED = N_("Not implemented yet")
_FRAME = re.compile(r'File "<submission: ([^>]*)>", line (\d+), in (\w+)')


def _qualname(units: Iterable, label: str, line: int, name: str) -> str:
    """``Class.method`` for the def around ``line`` of the unit ``label`` (tracebacks give the bare name)."""
    for unit in units:
        if unit.label != label:
            continue
        tree = _parsed(unit.source)
        if tree is None:
            return name
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            for fn in cls.body:
                if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name == name \
                        and fn.lineno <= line <= (fn.end_lineno or fn.lineno):
                    return f"{cls.name}.{name}"
    return name


def not_implemented_message(exc_type: str, message: str, traceback: str = "", units: Iterable = ()) -> Msg | None:
    """For a NotImplementedError, what the student reads (no concept, no hint); else None.
    ``units``: the submission's code units, to name a method with its class."""
    if exc_type != "NotImplementedError":
        return None
    last = list(_FRAME.finditer(traceback or ""))[-1:]
    if last:
        rest = traceback[last[0].end():].lstrip("\n").split("\n", 1)[0].strip()
        if rest and not rest.startswith("raise"):
            return None  # raised inside a call on that line (PyTorch's "cannot ... on meta tensors"): not a stub
    frames = _FRAME.findall(traceback or "")
    if frames and frames[-1][2] != "<module>":
        label, line, name = frames[-1]
        where = tr("{name} still raises NotImplementedError", name=_qualname(units, label, int(line), name))
    else:
        where = tr("your code raised NotImplementedError")
    detail = " ".join(message.split())[:120]
    if detail:
        return tr("Not implemented yet: {where} ({detail}). Write it, then check again.", where=where, detail=detail)
    return tr("Not implemented yet: {where}. Write it, then check again.", where=where)


# --- entry points that are not what they should be ------------------------------------------

@dataclass(frozen=True)
class Rebinding:
    """The statement that last bound a name to something other than its def/class."""

    unit: str
    """The code unit's label: "code cell 7" or "attention.py"."""
    line: int
    text: str
    """That line of source, stripped."""


def _bound_names(node: ast.AST) -> Iterable[str]:
    """Names a top-level statement binds (not def/class: those are what the name should be)."""
    targets: list[ast.AST] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target] if node.value is not None or isinstance(node, ast.AugAssign) else []
    elif isinstance(node, (ast.For, ast.AsyncFor)):
        targets = [node.target]
    elif isinstance(node, (ast.With, ast.AsyncWith)):
        targets = [i.optional_vars for i in node.items if i.optional_vars is not None]
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        for alias in node.names:
            yield (alias.asname or alias.name).split(".")[0]
        return
    for t in targets:
        for n in ast.walk(t):
            if isinstance(n, ast.Name):
                yield n.id


def _statements(body: list[ast.stmt]) -> Iterable[ast.stmt]:
    """Statements that run at module level, in order (into if/for/while/with/try bodies)."""
    for node in body:
        yield node
        if isinstance(node, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try)):
            for part in ("body", "orelse", "finalbody"):
                yield from _statements(getattr(node, part, []) or [])
            for h in getattr(node, "handlers", []) or []:
                yield from _statements(h.body)


def find_rebinding(units: Iterable, name: str) -> Rebinding | None:
    """The last module-level statement that binds ``name`` when that is not a def or class.

    ``units``: the submission's code units (objects with ``label`` and ``source``), in run order.
    A unit that does not parse is skipped (it raised while loading and is reported as such), and
    so is one over `MAX_ANALYSED_CHARS`."""
    last = None  # (unit, line) of the statement binding it last, when that is not its def/class
    for unit in units:
        tree = _parsed(unit.source)
        if tree is None:
            continue
        for node in _statements(tree.body):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
                last = None
            elif name in _bound_names(node):
                last = (unit, node.lineno)
    if last is None:
        return None
    unit, line = last
    return Rebinding(unit.label, line, _line(unit.source, line).strip()[:120])


def _a(type_name: str) -> Msg:
    if type_name in ("", "NoneType"):
        return verbatim("None")
    if type_name.split(".")[-1][:1].lower() in "aeiou":
        return tr("an {type}", type=type_name)
    return tr("a {type}", type=type_name)


def wrong_kind_message(name: str, kind: str, signature: str, found_kind: str, type_name: str = "",
                       rebinding: Rebinding | None = None) -> Msg:
    """Entry point ``name`` should be a ``kind`` but is not: say what it is, and where it became that."""
    if found_kind == "function":
        what = tr("a function")
    elif found_kind == "class":
        what = tr("a class")
    else:
        what = _a(type_name) if type_name else tr("not a function or class")
    if kind == "class":
        msg = tr("'{name}' should be a class ({signature}) but is {what}", name=name, signature=signature, what=what)
    else:
        msg = tr("'{name}' should be a function ({signature}) but is {what}", name=name, signature=signature,
                 what=what)
    if rebinding is not None:
        msg += tr(": {unit}, line {line} rebinds it (`{text}`). Give the value another name.",
                  unit=rebinding.unit, line=rebinding.line, text=rebinding.text)
    else:
        msg += tr(". Define it with `{keyword} {name}` at the top level.",
                  keyword="class" if kind == "class" else "def", name=name)
    return msg

"""The package tree in CONTRIBUTING.md, from the code: each package's docstring, its modules and the
largest one. `python .ci/tree.py` prints it; `python .ci/tree.py --write` puts it into CONTRIBUTING.md
between its two markers (tests/unit/test_architecture.py checks that the two agree)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- tree: begin (python .ci/tree.py --write) -->", "<!-- tree: end -->"


def _summary(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return " ".join(doc.split("\n\n")[0].split())


def _subpackages(p: Path) -> list[Path]:
    return sorted(q for q in p.iterdir() if (q / "__init__.py").is_file())


def _package(p: Path, depth: int) -> list[str]:
    """A package's line, its modules' line, then its subpackages', each indented one step more."""
    modules = sorted(m for m in p.glob("*.py") if m.name != "__init__.py")
    files = sorted(p.glob("*.py"))
    sizes = {m: len(m.read_text(encoding="utf-8").splitlines()) for m in files}
    largest = max(sizes, key=sizes.__getitem__)
    pad = "  " * depth
    lines = [f"{pad}{p.relative_to(ROOT).as_posix()}/  {_summary(p / '__init__.py')}",
             f"{pad}  {len(files)} modules, largest {largest.name} ({sizes[largest]} lines): "
             + ", ".join(m.stem for m in modules)]
    for q in _subpackages(p):
        lines += _package(q, depth + 1)
    return lines


def tree() -> str:
    lines = ["```"]
    for top in ("grader", "reference"):
        pkg = ROOT / top
        lines.append(f"{top}/  {_summary(pkg / '__init__.py')}")
        lines.append("  " + ", ".join(m.name for m in sorted(pkg.glob("*.py")) if m.name != "__init__.py"))
        for p in _subpackages(pkg):
            lines += _package(p, 1)
    lines.append("```")
    return "\n".join(lines)


def in_contributing() -> str:
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    return text[text.index(BEGIN) + len(BEGIN):text.index(END)].strip("\n")


def main() -> None:
    if sys.argv[1:] == ["--write"]:
        path = ROOT / "CONTRIBUTING.md"
        text = path.read_text(encoding="utf-8")
        start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
        path.write_text(text[:start] + "\n" + tree() + "\n" + text[end:], encoding="utf-8")
    else:
        print(tree())


if __name__ == "__main__":
    main()

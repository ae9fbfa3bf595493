"""Generate N synthetic masked-attention submissions (deterministic with a seed).

    python bench/generate.py OUT_DIR [-n 200] [--seed 0] [--notebooks 0.5] [--correct 0.4]

Each submission is a text variant of one sample in submissions/masked-attention/{correct,buggy}/
(the bug patterns are those files' bugs): a per-student header comment, a harmless unique helper
and a unique constant make every file's hash different without changing its behaviour. About half
are Jupyter notebooks (nbformat v4): markdown cells, `!pip install torch`, `%matplotlib inline`,
one cell per function and a plot-free demo cell. File names follow the Canvas export pattern
`lastname_firstname_<5-digit id>_<6-digit id>_attention.py|ipynb` (sometimes with `_late`).

Writes OUT_DIR/manifest.json: file -> {"base": sample, "buggy": bool, "kind": "py"|"ipynb"}.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "submissions" / "masked-attention"

FIRST = ["ada", "alan", "grace", "edsger", "barbara", "donald", "frances", "john", "katherine", "leslie",
         "margaret", "niklaus", "radia", "shafi", "tim", "yoshua", "fei", "geoffrey", "jeff", "ilya"]
LAST = ["lovelace", "turing", "hopper", "dijkstra", "liskov", "knuth", "allen", "mccarthy", "johnson",
        "lamport", "hamilton", "wirth", "perlman", "goldwasser", "berners", "bengio", "li", "hinton",
        "dean", "sutskever", "nguyen", "garcia", "muller", "okafor", "tanaka", "silva", "kowalski"]


def samples() -> tuple[list[Path], list[Path]]:
    correct = sorted((SAMPLES / "correct").glob("*.py"))
    buggy = sorted((SAMPLES / "buggy").glob("*.py"))
    return correct, buggy


def with_noise(src: str, rng: random.Random, student: str, serial: int) -> str:
    """The same program plus a unique header, constant and unused helper (hash differs, behaviour not)."""
    header = (f"# HW3 masked attention -- {student}\n"
              f"# submission {serial:05d}, checksum note {rng.getrandbits(48):012x}\n")
    helper = (f"\n\n_NOTE_{serial} = {rng.randint(0, 10**9)}\n\n\n"
              f"def _scratch_{serial}(x):\n    # leftover from lab {rng.randint(1, 9)}\n    return x\n")
    return header + src.rstrip() + "\n" + helper


def split_cells(src: str) -> list[str]:
    """Top-level statements grouped into notebook-like cells: imports, then one cell per def/class."""
    tree = ast.parse(src)
    lines = src.splitlines()
    cells: list[str] = []
    current: list[str] = []
    prev_end = 0
    for node in tree.body:
        start = (node.decorator_list[0].lineno if getattr(node, "decorator_list", None) else node.lineno) - 1
        # keep comments directly above the node with it
        while start > prev_end and lines[start - 1].strip().startswith("#"):
            start -= 1
        chunk = "\n".join(lines[start:node.end_lineno]).strip("\n")
        prev_end = node.end_lineno
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            if current:
                cells.append("\n".join(current))
                current = []
            cells.append(chunk)
        else:
            current.append(chunk)
    if current:
        cells.append("\n".join(current))
    return cells


def _cell(kind: str, text: str, rng: random.Random) -> dict:
    c = {"cell_type": kind, "metadata": {}, "source": text.splitlines(True)}
    if kind == "code":
        c.update(execution_count=rng.randint(1, 60), outputs=[])
    return c


DEMO = """\
torch.manual_seed({seed})
q, k, v = (torch.randn(1, 2, 4, 8) for _ in range(3))
out, w = masked_attention(q, k, v, causal_mask(4))
print(out.shape, w.shape)
print(combine_masks(causal_mask(4), padding_mask([4, 2], 4)).shape)"""


def to_notebook(src: str, rng: random.Random, student: str) -> dict:
    code = split_cells(src)
    cells = [_cell("markdown", f"# Homework 3: masked attention\n\n{student.replace('_', ' ').title()}\n\n"
                   "Causal and padding masks, and scaled dot-product attention.", rng),
             _cell("code", "!pip install torch", rng)]
    first = True
    for c in code:
        if first:
            c = "%matplotlib inline\n" + c
            first = False
        if c.lstrip().startswith(("def masked_attention", "# ")) and rng.random() < 0.7:
            cells.append(_cell("markdown", "## Attention\n\nRows that may see no key must come out as zeros.", rng))
        cells.append(_cell("code", c, rng))
    cells.append(_cell("markdown", "## Demo", rng))
    cells.append(_cell("code", DEMO.format(seed=rng.randint(0, 99)), rng))
    return {"cells": cells, "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                                        "name": "python3"},
                                         "language_info": {"name": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


def generate(out: Path, n: int = 200, *, seed: int = 0, notebooks: float = 0.5, correct_share: float = 0.4,
             only_py: bool = False) -> dict:
    rng = random.Random(seed)
    correct, buggy = samples()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    manifest = {}
    used = set()
    for i in range(n):
        is_buggy = rng.random() >= correct_share
        base = buggy[i % len(buggy)] if is_buggy else correct[i % len(correct)]
        while True:
            student = f"{rng.choice(LAST)}_{rng.choice(FIRST)}_{rng.randint(10000, 99999)}"
            if student not in used:
                used.add(student)
                break
        late = "_late" if rng.random() < 0.1 else ""
        name = f"{student}{late}_{rng.randint(100000, 999999)}_attention"
        src = with_noise(base.read_text(), rng, student, i)
        kind = "py" if only_py or rng.random() >= notebooks else "ipynb"
        if kind == "py":
            path = out / f"{name}.py"
            path.write_text(src)
        else:
            path = out / f"{name}.ipynb"
            path.write_text(json.dumps(to_notebook(src, rng, student), indent=1) + "\n")
        manifest[path.name] = {"base": f"{base.parent.name}/{base.name}", "buggy": is_buggy, "kind": kind,
                               "student": student}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--notebooks", type=float, default=0.5, help="share of .ipynb submissions")
    ap.add_argument("--correct", type=float, default=0.4, help="share of correct submissions")
    args = ap.parse_args()
    m = generate(args.out, args.n, seed=args.seed, notebooks=args.notebooks, correct_share=args.correct)
    nb = sum(v["kind"] == "ipynb" for v in m.values())
    bad = sum(v["buggy"] for v in m.values())
    print(f"wrote {len(m)} submissions to {args.out} ({nb} notebooks, {bad} buggy)")


if __name__ == "__main__":
    main()

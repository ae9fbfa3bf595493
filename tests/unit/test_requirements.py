"""The self-check tries every requirement a kit's README states: each bullet and table row of an
assignment's README holds a requirement of its spec.toml ([[requirements]]: the README's words and
the public cases that try them), and every requirement is in the README and names public cases."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from grader.assignment.spec import load_assignment

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENTS = sorted(p.parent.name for p in (ROOT / "assignments").glob("*/spec.toml"))


def flat(text: str) -> str:
    return " ".join(text.split())


def statements(readme: str) -> list[str]:
    """The README's bullets (with their continuation lines) and table body rows, outside code
    blocks: what it states a submission must do."""
    out: list[str] = []
    fenced = False
    for line in readme.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        if re.match(r"\s*- ", line):
            out.append(line.strip()[2:])
        elif re.match(r"\| `", line):
            out.append(line)
        elif out and line.startswith("  ") and line.strip() and not re.match(r"\s*[-|]", line):
            out[-1] += " " + line.strip()
    return [flat(s) for s in out]


def requirements(slug: str) -> list[dict]:
    return tomllib.loads((ROOT / "assignments" / slug / "spec.toml").read_text())["requirements"]


@pytest.mark.parametrize("slug", ASSIGNMENTS)
def test_every_stated_requirement_has_a_public_case(slug):
    readme = flat((ROOT / "assignments" / slug / "README.md").read_text())
    reqs = requirements(slug)
    public = {c.id for c in load_assignment(slug).cases if not c.hidden}
    assert len({r["id"] for r in reqs}) == len(reqs), "requirement ids must be unique"
    for r in reqs:
        assert flat(r["readme"]) in readme, f"{slug}: requirement {r['id']!r} is not what the README says"
        assert r["cases"], f"{slug}: requirement {r['id']!r} names no case"
        assert set(r["cases"]) <= public, f"{slug}: {r['id']!r} names non-public cases {set(r['cases']) - public}"


@pytest.mark.parametrize("slug", ASSIGNMENTS)
def test_every_readme_statement_is_a_requirement(slug):
    said = statements((ROOT / "assignments" / slug / "README.md").read_text())
    phrases = [flat(r["readme"]) for r in requirements(slug)]
    assert said, f"{slug}: no bullets or table rows found in README.md"
    unclaimed = [s for s in said if not any(p in s for p in phrases)]
    assert not unclaimed, f"{slug}: README statements no requirement in spec.toml claims: {unclaimed}"


def test_a_new_readme_bullet_without_a_requirement_is_found():
    said = statements("Intro.\n\n- returns zeros\n  on empty rows\n\n```\n- not a bullet\n```\n| `f()` | x |\n")
    assert said == ["returns zeros on empty rows", "| `f()` | x |"]

"""`grader validate` fails, with a precise message, on each author mistake it claims to catch; and
an author's broken case is blamed on the case (file and line), never on the sandbox."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli.app import main

pytestmark = pytest.mark.slow  # full tier: grader validate on planted assignments

ROOT = Path(__file__).resolve().parents[2]

SPEC = '''id = "tiny"
title = "A tiny assignment"
version = "1"
seed = 77031
main_module = "attention.py"

[[entry_points]]
name = "causal_mask"
kind = "function"
signature = "causal_mask(q_len, k_len=None, device=None)"

[[concepts]]
id = "causal-diagonal"
title = "A token may attend to itself"
explanation = "The diagonal is visible. torch.tril keeps it."
dashboard = "hid the diagonal"
'''

PUBLIC = '''import reference
from grader.cases import Setup, case
from grader.checks.masks import check_mask
{extra_import}

@case("square_probe", title="causal_mask(4)", concept="causal-diagonal", hidden=False, uses=("causal_mask",))
def square_probe(ctx):
    return Setup(inputs=dict(n=4), expected=reference.causal_mask(4))


@square_probe.check
def _(student, s, param):
    {check_body}
'''

HIDDEN = '''import reference
from grader.cases import Setup, case
from grader.checks.masks import check_mask


@case("secret_probe", title="causal_mask on a long sequence", concept="causal-diagonal", uses=("causal_mask",))
def secret_probe(ctx):
    return Setup(inputs=dict(n=9), expected=reference.causal_mask(9))


@secret_probe.check
def _(student, s, param):
    return check_mask(student.causal_mask(9), s.expected, what="causal_mask(9)", concept="causal-diagonal", message="m")
'''

GOOD_CHECK = ('return check_mask(student.causal_mask(4), s.expected, what="causal_mask(4)", '
              'concept="causal-diagonal", message="m")')
SAMPLE = "from reference import causal_mask\n"


def tiny(tmp_path: Path, *, readme: str = "# Tiny\n", extra_import: str = "", check_body: str = GOOD_CHECK,
         sample: bool = True) -> tuple[Path, Path]:
    folder = tmp_path / "assignments" / "tiny"
    (folder / "starter").mkdir(parents=True)
    (folder / "spec.toml").write_text(SPEC)
    (folder / "README.md").write_text(readme)
    (folder / "cases_public.py").write_text(PUBLIC.format(extra_import=extra_import, check_body=check_body))
    (folder / "cases_hidden.py").write_text(HIDDEN)
    (folder / "starter" / "attention.py").write_text("def causal_mask(q_len, k_len=None, device=None):\n"
                                                     "    raise NotImplementedError\n")
    subs = tmp_path / "submissions"
    (subs / "tiny").mkdir(parents=True)
    if sample:
        (subs / "tiny" / "right.py").write_text("import torch\n\ndef causal_mask(q_len, k_len=None, device=None):\n"
                                                "    k_len = q_len if k_len is None else k_len\n"
                                                "    return torch.ones(q_len, k_len, dtype=torch.bool, device=device)"
                                                ".tril(k_len - q_len)\n")
    (subs / "expected.toml").write_text('["tiny/right.py"]\nassignment = "tiny"\nfails = []\n')
    return folder, subs


def validate(folder: Path, subs: Path):
    return CliRunner().invoke(main, ["validate", str(folder), "--submissions", str(subs), "--device", "cpu"])


def test_a_sound_assignment_passes(tmp_path):
    r = validate(*tiny(tmp_path))
    assert r.exit_code == 0, r.output
    assert "ok   student kit: nothing hidden, no reference source, self-check of the reference 100%" in r.output


def test_a_readme_naming_a_hidden_case_fails(tmp_path):
    r = validate(*tiny(tmp_path, readme="# Tiny\nsecret_probe checks long sequences.\n"))
    assert r.exit_code == 1
    assert "FAIL student kit" in r.output
    assert "refusing to release tiny: README.md mentions 'secret_probe'" in r.output


def test_public_cases_importing_the_hidden_file_fail_with_file_and_line(tmp_path):
    folder, subs = tiny(tmp_path, extra_import="from . import cases_hidden  # noqa: F401")
    r = validate(folder, subs)
    assert r.exit_code == 1
    assert (f"{folder / 'cases_public.py'}:4: cases_public.py imports cases_hidden, which the kit does not ship "
            "(it ships cases_public.py, _common.py)") in r.output


def test_a_shipped_helper_holding_a_mistake_model_fails(tmp_path):
    """Diagnosis models compute what a mistake gives in the setup, with the reference: copied into
    _common.py (which ships) they would hand students working attention code."""
    from reference import mistakes

    folder, subs = tiny(tmp_path)
    (folder / "_common.py").write_text("import math\n\nimport torch\n\n\n" + inspect.getsource(mistakes.forward))
    r = validate(folder, subs)
    assert r.exit_code == 1
    assert "FAIL student kit" in r.output
    assert "refusing to release tiny: assignments/tiny/_common.py mentions 'reference source: " in r.output


def test_a_declared_sample_that_is_missing_is_reported_as_missing(tmp_path):
    r = validate(*tiny(tmp_path, sample=False))
    assert r.exit_code == 1
    assert "FAIL tiny/right.py -> missing\n     declared in expected.toml, but there is no such file" in r.output
    assert "load-error" not in r.output


def test_an_unknown_concept_lists_the_declared_ones(tmp_path):
    folder, subs = tiny(tmp_path)
    (folder / "cases_public.py").write_text((folder / "cases_public.py").read_text().replace(
        'concept="causal-diagonal", hidden=False', 'concept="loss-padding", hidden=False'))
    r = validate(folder, subs)
    assert r.exit_code == 2
    assert (f"Error: {folder / 'cases_public.py'}:6: case 'square_probe': unknown concept 'loss-padding'; this "
            "assignment declares: causal-diagonal, crash, exception, load-error, not-run, signature, timeout") in r.output


def test_a_broken_check_names_the_case_file_and_line_not_the_sandbox(tmp_path):
    folder, subs = tiny(tmp_path, check_body="return s.inputs['missing']")
    r = validate(folder, subs)
    assert r.exit_code == 2
    assert r.output.startswith(f"Error: case 'square_probe' of tiny ({folder / 'cases_public.py'}, line 13): its "
                               "check raised KeyError: 'missing'. This is the assignment's code")
    assert "sandbox" not in r.output.lower() and "again" not in r.output


def test_list_shows_good_assignments_and_one_line_per_broken_one(tmp_path, monkeypatch):
    folder, _ = tiny(tmp_path)
    (folder / "cases_public.py").write_text("raise RuntimeError('half-written')\n")
    monkeypatch.setenv("GRADER_ASSIGNMENTS", str(folder.parent))
    r = CliRunner().invoke(main, ["list"])
    assert r.exit_code == 2
    lines = r.output.splitlines()
    assert any(line.startswith("masked-attention ") for line in lines)
    assert any(line.startswith("mha-kv-cache ") for line in lines)
    assert [line for line in lines if "BROKEN" in line] == [
        f"tiny                 BROKEN  {folder / 'cases_public.py'}: RuntimeError: half-written"]


def test_a_check_that_raises_on_a_students_value_fails_that_students_case(tmp_path):
    """A check reading values without looking first (torch.equal on a meta tensor raises) is the
    student's failed case, with what raised, where the reference's own results get through the
    same check: the batch goes on and the case is not blamed on the assignment."""
    raw = ('return Verdict.ok() if torch.equal(student.causal_mask(4), s.expected) '
           'else Verdict.fail("causal-diagonal", "m")')
    folder, _ = tiny(tmp_path, extra_import="import torch\nfrom grader.cases import Verdict", check_body=raw)
    meta = tmp_path / "meta_values.py"
    meta.write_text("import torch\n\ndef causal_mask(q_len, k_len=None, device=None):\n"
                    "    return torch.ones(q_len, k_len or q_len, dtype=torch.bool, device='meta').tril()\n")
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["grade", str(meta), "-a", str(folder), "-o", str(out), "--device", "cpu"])
    assert r.exit_code == 0, r.output
    assert "1 graded" in r.output and "fix the case" not in r.output
    import json

    result = json.loads((out / "results" / "meta_values.json").read_text("utf-8"))
    square = next(c for c in result["cases"] if c["id"] == "square_probe")
    assert (square["outcome"], square["concept"]) == ("error", "signature")
    assert square["message"].startswith("What your code returned could not be checked (NotImplementedError: ")


LUCKY_CASE = '''

@case("drawn_probe", title="causal_mask of a drawn size", concept="causal-diagonal", hidden=False, uses=("causal_mask",))
def drawn_probe(ctx):
    import torch

    n = int(torch.randint(2, 30, (1,), generator=ctx.gen))
    return Setup(inputs=dict(n=n), expected=reference.causal_mask(n))


@drawn_probe.check
def _(student, s, param):
    n = s.inputs["n"]
    return check_mask(student.causal_mask(n), s.expected, what=f"causal_mask({n})", concept="causal-diagonal", message="m")
'''


def test_a_verdict_that_holds_for_the_assignments_seed_only_fails_under_other_seeds(tmp_path):
    """A kit draws a seed of its own: a sample that passes only on the size its assignment's seed
    draws is a case that lets wrong code through. --seeds names the seed and the sample."""
    import torch

    from grader.assignment.spec import load_assignment

    folder, subs = tiny(tmp_path)
    (folder / "cases_public.py").write_text((folder / "cases_public.py").read_text() + LUCKY_CASE)
    inst = next(i for i in load_assignment(folder).instances() if i.id == "drawn_probe")
    lucky = int(torch.randint(2, 30, (1,), generator=inst.generator(77031)))  # what spec.toml's seed draws
    (subs / "tiny" / "right.py").write_text(
        "import torch\n\ndef causal_mask(q_len, k_len=None, device=None):\n"
        "    k_len = q_len if k_len is None else k_len\n"
        f"    return torch.ones(q_len, k_len, dtype=torch.bool, device=device).tril(0 if q_len in (4, 9, {lucky}) else -1)\n")
    assert validate(folder, subs).exit_code == 0  # the assignment's own seed: the lucky draw passes

    r = CliRunner().invoke(main, ["validate", str(folder), "--submissions", str(subs), "--device", "cpu",
                                  "--seeds", "3"])
    assert r.exit_code == 1, r.output
    failed = [line for line in r.output.splitlines() if line.startswith("FAIL seed ")]
    assert failed and all(line.endswith(": the reference and 1 sample as declared") for line in failed), r.output
    assert "     tiny/right.py: unexpected failures: drawn_probe" in r.output
    assert "reference: fails" not in r.output

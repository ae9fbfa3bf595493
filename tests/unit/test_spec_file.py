"""spec.toml is read into typed tables: an unknown key at any level, or a value of the wrong type,
is an error naming the file, the table and the key (with the known keys and a guess)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.assignment.spec_file import EntryPoint, KitInfo, Requirement, read_spec
from grader.cli.app import main
from grader.errors import AssignmentSpecError

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENTS = sorted(p.parent for p in (ROOT / "assignments").glob("*/spec.toml"))

SPEC = '''id = "toy"
version = "1"
seed = 7
main_module = "toy.py"

[limits]
call_timeout_s = 5

[[entry_points]]
name = "f"
kind = "function"
signature = "f(x)"

[[concepts]]
id = "loss-padding"
title = "Padding counts in neither the sum nor the count"
explanation = "Only real tokens are averaged."

[[requirements]]
id = "real-only"
readme = "only real tokens"
cases = ["probe"]
'''


def spec_in(tmp_path: Path, text: str) -> Path:
    (tmp_path / "spec.toml").write_text(text, encoding="utf-8")
    return tmp_path


def error_of(tmp_path: Path, text: str) -> str:
    with pytest.raises(AssignmentSpecError) as e:
        read_spec(spec_in(tmp_path, text))
    return str(e.value)


def test_every_table_is_read_into_its_fields(tmp_path):
    s = read_spec(spec_in(tmp_path, SPEC))
    assert (s.id, s.version, s.seed, s.main_module, s.title, s.lang) == ("toy", "1", 7, "toy.py", None, None)
    assert s.limits == {"call_timeout_s": 5}
    assert s.entry_points == (EntryPoint("f", "function", "f(x)"),)
    assert [(c.id, c.dashboard) for c in s.concepts or ()] == [("loss-padding", "")]
    assert s.requirements == (Requirement("real-only", "only real tokens", ("probe",)),)
    assert s.kit is None


@pytest.mark.parametrize("edit, where, key, guess", [
    (lambda t: t.replace("seed = 7", "sed = 7"), "the top table", "sed", "seed"),
    (lambda t: t.replace("[limits]", "[limts]"), "the top table", "limts", "limits"),
    (lambda t: t.replace('signature = "f(x)"', 'signatur = "f(x)"'), r"\[\[entry_points\]\] entry 1 \(f\)",
     "signatur", "signature"),
    (lambda t: t.replace("explanation =", "explanaton ="), r"\[\[concepts\]\] entry 1 \(loss-padding\)",
     "explanaton", "explanation"),
    (lambda t: t.replace("cases = [", "case = ["), r"\[\[requirements\]\] entry 1 \(real-only\)", "case", "cases"),
    (lambda t: t + "\n[kit]\nhidden_case = 3\n", r"\[kit\]", "hidden_case", "hidden_cases"),
    (lambda t: "points_policy = 1\n" + t, "the top table", "points_policy", None),
])
def test_an_unknown_key_names_the_file_the_table_the_key_and_a_guess(tmp_path, edit, where, key, guess):
    msg = error_of(tmp_path, edit(SPEC))
    assert msg.startswith(f"{tmp_path / 'spec.toml'}: unknown key {key!r} in ")
    assert re.search(rf"in {where}; ", msg), msg
    assert (f"did you mean {guess!r}? " in msg) == (guess is not None)
    assert re.search(r"known: [a-z_, ]+$", msg)


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace('version = "1"', "version = [1]"), 'version in the top table must be text, e.g. "1.0", got [1]'),
    (lambda t: t.replace("call_timeout_s = 5", 'call_timeout_s = "5"'), "call_timeout_s in [limits] must be a number, got '5'"),
    (lambda t: t.replace("call_timeout_s = 5", "call_timeout_s = true"), "call_timeout_s in [limits] must be a number, got True"),
    (lambda t: t.replace('kind = "function"', 'kind = "func"'),
     "kind in [[entry_points]] entry 1 (f) must be 'function' or 'class', got 'func'"),
    (lambda t: t.replace('cases = ["probe"]', 'cases = "probe"'),
     "cases in [[requirements]] entry 1 (real-only) must be a list of text"),
    (lambda t: t.replace('name = "f"\n', ""), "missing required key 'name' in [[entry_points]] entry 1"),
    (lambda t: t.replace('main_module = "toy.py"', "main_module = 3"), "main_module in the top table must be text"),
    (lambda t: t.replace("[limits]\ncall_timeout_s = 5", "limits = 5"), "limits in the top table must be a [limits] table"),
    (lambda t: t.replace("[[requirements]]", "[requirements]"), "requirements in the top table must be [[requirements]] tables"),
    (lambda t: t.replace('seed = 7', 'lang = "fr"'), "lang = 'fr' is not a language the grader speaks; use one of: en, zh-CN"),
])
def test_a_value_of_the_wrong_type_is_refused_with_its_table_and_key(tmp_path, edit, message):
    assert message in error_of(tmp_path, edit(SPEC))


def test_a_number_as_the_version_reads_as_its_text_and_a_locale_as_a_language(tmp_path):
    s = read_spec(spec_in(tmp_path, SPEC.replace('version = "1"', "version = 1.5\nlang = \"zh_CN\"")))
    assert (s.version, s.lang) == ("1.5", "zh-CN")


def test_a_kit_table_reads_without_the_assignments_own_keys(tmp_path):
    s = read_spec(spec_in(tmp_path, '[kit]\nhidden_cases = 3\nhidden_points = 4.5\nsubmission = "a.py"\n'
                                    '[kit.starters]\n"a.py" = "abc"\n'))
    assert s.kit == KitInfo(3, 4.5, "a.py", {"a.py": "abc"})
    assert "a.py in [kit.starters] must be text (a quoted string), got 1" in error_of(tmp_path, '[kit.starters]\n"a.py" = 1\n')


@pytest.mark.parametrize("folder", ASSIGNMENTS, ids=lambda p: p.name)
def test_the_bundled_assignments_read(folder):
    s = read_spec(folder)
    assert s.id == folder.name and s.version and s.entry_points and s.concepts and s.requirements


def test_grader_validate_prints_one_error_line_for_a_typo(tmp_path):
    folder = tmp_path / "masked-attention"
    shutil.copytree(ROOT / "assignments" / "masked-attention", folder, ignore=shutil.ignore_patterns("__pycache__"))
    spec = folder / "spec.toml"
    spec.write_text(spec.read_text(encoding="utf-8").replace("[limits]", "[limts]"), encoding="utf-8")
    r = CliRunner().invoke(main, ["validate", str(folder)])
    assert r.exit_code == 2, r.output
    assert r.output.strip() == (f"Error: {spec}: unknown key 'limts' in the top table; did you mean 'limits'? known: "
                                "cell_tag, concepts, entry_points, id, kit, lang, limits, main_module, reference, "
                                "requirements, seed, title, version")

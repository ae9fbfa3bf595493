"""The student install has no solution in it, and checks exactly as before.

A kit's public setups come from ``expected.safetensors`` (computed by the reference at release);
before, ``grader check`` ran the reference in the student's process. On every sample, both give
the same verdicts, concepts, messages and evidence: the diagnosis too, whose hypotheses (what each
classic mistake gives) the setups computed with the instructor's models. And the grader the kit
carries (its wheel) runs ``grader check`` where ``import reference`` fails, naming the mistakes
without the models: none of their code is in anything the student receives.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

import grader
from grader.assignment.spec import load_assignment
from grader.authoring.release import reference_lines, shipped_texts
from grader.grading.engine import Engine, limits_for
from grader.results import to_dict
from grader.authoring.validate import read_expectations

pytestmark = pytest.mark.slow  # full tier: every sample graded twice, from a kit and live

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = read_expectations(ROOT / "submissions")
WHEEL = f"wheel/attention_grader-{grader.__version__}-py3-none-any.whl"


@pytest.fixture(scope="module")
def kits(released_kit) -> dict[str, Path]:
    """Every assignment's kit, as `grader release` made it (once per session: test_release.py
    checks the same kits)."""
    return {slug: released_kit(slug)[0] for slug in sorted({s.assignment for s in SAMPLES})}


@pytest.fixture(scope="module")
def engines(kits, tmp_path_factory, sandbox_for):
    """Per assignment: (the kit as shipped, the same kit computing its setups with the reference)."""
    opened = {}
    for slug, kit in kits.items():
        shipped = load_assignment(kit / "assignments" / slug)
        assert shipped.stored is not None
        live_dir = tmp_path_factory.mktemp("live") / slug
        shutil.copytree(kit / "assignments" / slug, live_dir, ignore=shutil.ignore_patterns("expected.safetensors"))
        own = load_assignment(slug).reference_file  # an assignment's own reference: the live side has it
        if own is not None:
            shutil.copy(own, live_dir / own.name)
        live = load_assignment(live_dir)
        assert live.stored is None and live.seed == shipped.seed
        sb = sandbox_for(limits_for(shipped))
        opened[slug] = (Engine(shipped, sb, public_only=True), Engine(live, sb, public_only=True))
    return opened


def _seen(report) -> list[dict]:
    return [{k: v for k, v in to_dict(c).items() if k != "duration_s"} for c in report.cases]


@pytest.mark.parametrize("sample", SAMPLES, ids=[str(s.path.relative_to(ROOT / "submissions")) for s in SAMPLES])
def test_the_kit_gives_the_same_public_verdicts_and_diagnoses_as_the_live_reference(engines, sample):
    shipped, live = engines[sample.assignment]
    got, before = shipped.grade_path(sample.path), live.grade_path(sample.path)
    assert _seen(got) == _seen(before)
    assert got.score == before.score


def test_stored_setups_differ_from_live_ones_is_caught(engines, tmp_path):
    """The comparison above can fail: a kit whose stored expectations are wrong changes verdicts."""
    shipped, _ = engines["masked-attention"]
    inst = next(i for i in shipped.instances if i.id == "attention_basic")
    s = shipped.setup(inst)
    a = s.expected
    wrong = replace(s, expected=replace(a, out=replace(a.out, oracle=a.out.oracle + 1.0)))
    tampered = Engine(shipped.assignment, shipped.sandbox, public_only=True)
    tampered.setups = {**tampered.setups, inst.id: wrong}
    report = tampered.grade_path(ROOT / "submissions/masked-attention/correct/tutorial_001_fixed.py")
    assert [c.id for c in report.cases if c.outcome.value != "passed"] == ["attention_basic"]


def _emptied_hypotheses(engine: Engine, case_id: str) -> Engine:
    """A fresh engine on the same kit, with one case's stored diagnosis hypotheses removed."""
    fresh = Engine(load_assignment(engine.assignment.dir), engine.sandbox, public_only=True)
    s = fresh.setup(next(i for i in fresh.instances if i.id == case_id))  # the engine's own, read from the kit
    if isinstance(s.extra.get("mistakes"), dict):  # mha-kv-cache keeps them in extra
        s.extra["mistakes"].clear()
    else:  # masked-attention keeps them on its AttentionCase
        s.expected.mistakes.clear()
    return fresh


@pytest.mark.parametrize("slug, sample, case_id, mistake, without", [
    ("masked-attention", "buggy/softmax_dim_minus2.py", "attention_causal_small", "softmax-axis",
     "mask-after-softmax"),
    ("mha-kv-cache", "buggy/scale_dmodel.py", "mha_forward_small", "scaling", "head-split"),
])
def test_the_kits_diagnosis_comes_from_its_stored_hypotheses(engines, slug, sample, case_id, mistake, without):
    """The comparison above covers the diagnosis: without a case's stored hypotheses, the kit names
    the case's generic concept instead of the mistake."""
    shipped, _ = engines[slug]
    path = ROOT / "submissions" / slug / sample
    concept = {c.id: c.concept for c in shipped.grade_path(path).cases}
    assert concept[case_id] == mistake
    emptied = {c.id: c.concept for c in _emptied_hypotheses(shipped, case_id).grade_path(path).cases}
    assert emptied[case_id] == without
    assert {k: v for k, v in emptied.items() if k != case_id} == {k: v for k, v in concept.items() if k != case_id}


@pytest.mark.parametrize("slug", ["masked-attention", "mha-kv-cache", "masked-loss-and-sampling"])
def test_nothing_the_student_receives_holds_the_mistake_models(kits, slug):
    """The diagnosis models are the instructor's (reference/mistakes.py, solution.py's loss_mistakes):
    no line of them in the kit or its wheel, and the grader the student gets computes no attention."""
    own = load_assignment(slug).reference_file
    models = reference_lines("reference", own) if own else reference_lines("reference")
    mistakes = ROOT / "reference" / "mistakes.py" if own is None else own
    assert {line.strip() for line in mistakes.read_text("utf-8").splitlines() if len(line.strip()) >= 40} <= set(models)
    texts = shipped_texts(kits[slug])
    assert any(name.endswith("!grader/checks/hypotheses.py") for name, _ in texts)
    for name, text in texts:
        assert not [line for line in models if line in text], f"{name} holds the reference's code"
        # The mask explorer replays the student's own scores under other fills (a softmax of the
        # student's data, shown to the student): the experiment itself, not a model of a mistake.
        if "!grader/checks/" in name and not name.endswith("!grader/checks/explore.py"):
            assert not re.search(r"softmax\(", text), f"{name} computes a softmax"
    assert not [name for name, _ in texts if name.endswith(("!grader/checks/mha.py", "mistakes.py"))]


WHEEL_RUNS = {
    "masked-attention": ("buggy/mask_after_softmax.py", "masked_attention with a causal mask [attention_causal_small]",
                         "mask-after-softmax", "Passed 10 of 17 public cases (9/15 points)"),
    "mha-kv-cache": ("buggy/split_no_transpose.py", "Forward pass with copied weights (small) [mha_forward_small]",
                     "head-split", "Passed 4 of 14 public cases"),
}


@pytest.mark.parametrize("slug", sorted(WHEEL_RUNS))
def test_grader_check_from_the_kits_wheel_runs_without_the_reference(kits, tmp_path, slug):
    sample, title, concept, passed = WHEEL_RUNS[slug]
    kit = shutil.copytree(kits[slug], tmp_path / "kit")
    site = tmp_path / "site"
    with zipfile.ZipFile(kit / WHEEL) as z:
        z.extractall(site)
    assert not (site / "reference").exists()
    shutil.copy(ROOT / "submissions" / slug / sample, kit / "mine.py")
    driver = tmp_path / "driver.py"
    driver.write_text(f'''
import importlib.abc, sys
class NoReference(importlib.abc.MetaPathFinder):  # the checkout's editable install would find it
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "reference":
            raise ModuleNotFoundError(f"No module named {{name!r}}")
sys.meta_path.insert(0, NoReference())
try:
    import reference
except ModuleNotFoundError as e:
    print("import reference:", e)
import grader
assert grader.__file__.startswith({str(site)!r}), grader.__file__
from grader.cli.app import main
main(["check", "mine.py", "--no-report"] if "--no-report" in sys.argv else ["check", "mine.py"])
''')
    env = {**os.environ, "PYTHONPATH": str(site)}
    proc = subprocess.run([sys.executable, str(driver)], cwd=kit, capture_output=True, text=True, env=env,
                          timeout=180)
    assert "import reference: No module named 'reference'" in proc.stdout, proc.stdout + proc.stderr
    assert (f"✗ {title} — {concept}" in proc.stdout or f"x {title} - {concept}" in proc.stdout), \
        proc.stdout + proc.stderr
    assert passed in proc.stdout


def test_a_file_copied_out_of_the_kit_finds_the_kit_its_grader_was_installed_from(kits, tmp_path):
    """The student moved attention.py to another folder: the wheel carries its kit's assignment."""
    sample, title, concept, passed = WHEEL_RUNS["masked-attention"]
    site = tmp_path / "site"
    with zipfile.ZipFile(kits["masked-attention"] / WHEEL) as z:
        z.extractall(site)
    assert (site / "grader" / "kits" / "assignments" / "masked-attention" / "expected.safetensors").is_file()
    elsewhere = tmp_path / "desktop"
    elsewhere.mkdir()
    shutil.copy(ROOT / "submissions" / "masked-attention" / sample, elsewhere / "attention.py")
    driver = tmp_path / "driver.py"
    driver.write_text(f'''
import sys
import grader
assert grader.__file__.startswith({str(site)!r}), grader.__file__
from grader.cli.app import main
main(sys.argv[1:])
''')
    env = {**os.environ, "PYTHONPATH": str(site), "GRADER_ASSIGNMENTS": ""}
    for args in (["check", "attention.py"], ["check", "attention.py", "-a", "masked-attention"]):
        proc = subprocess.run([sys.executable, str(driver), *args], cwd=elsewhere, capture_output=True, text=True,
                              env=env, timeout=180)
        assert f"✗ {title} — {concept}" in proc.stdout, proc.stdout + proc.stderr
        assert passed in proc.stdout

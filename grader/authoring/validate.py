"""`grader validate`: prove an assignment before students see it.

1. The trusted reference, graded as if it were a student's folder, scores 100 %.
2. Every sample submission declared for the assignment in ``submissions/expected.toml`` fails
   exactly its declared cases and is diagnosed with its declared concepts.
3. Grading twice gives identical results.
4. The student kit: released into a temporary folder, it holds no hidden case id or title, no
   seed and no line of the reference's source (its grader wheel included); its public cases
   import only files it ships; and its self-check, from its stored setups alone, gives the
   reference 100 %.
5. With ``other_seeds``: the reference and every sample again, with the cases' inputs drawn
   from each of the seeds 1..N instead of the assignment's. A kit draws a seed of its own at
   every release (and a new assignment draws one on first use), so a verdict or a diagnosis that
   holds for one seed only is a case design that fails students in the field: its inputs must
   make the mistake show on every draw.
"""

from __future__ import annotations

import dataclasses
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from grader.assignment.spec import Assignment
from grader.errors import GraderError
from grader.grading.engine import Engine
from grader.grading.reference_run import reference_submission
from grader.results import GradeReport, Outcome, to_dict


@dataclass(frozen=True)
class SampleExpectation:
    path: Path
    assignment: str
    fails: frozenset[str]
    """Case ids that must not pass; every other case must pass. A base id ("example_pairs") covers all
    of its parameters; ids with a parameter ("example_pairs[cache+mask-left]") say exactly which fail."""
    concepts: frozenset[str]
    """Concepts the grader must flag (at least these; exactly these when ``exact``)."""
    exact: bool = False
    """The grader flags these concepts and no other: the diagnosis names the mistake and nothing else."""


@dataclass
class Check:
    name: str
    ok: bool
    detail: str = ""


@dataclass
class ValidationReport:
    assignment: str
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)


def read_expectations(submissions_dir: Path) -> list[SampleExpectation]:
    """The samples ``submissions_dir/expected.toml`` declares, each path inside that folder.

    Raises:
        SampleTreeError: the file cannot be read, is not TOML, or an entry is malformed or names a
            path outside the folder (absolute, ``..``, or through a symbolic link leading out).
    """
    where = submissions_dir / "expected.toml"
    try:
        table = tomllib.loads(where.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise SampleTreeError(f"{where}: {e}") from e
    known = {"assignment", "fails", "concepts", "exact"}
    out = []
    for rel, entry in table.items():
        if not isinstance(entry, dict):
            raise SampleTreeError(f"{where} [{rel!r}]: expected a table (assignment = ..., fails = [...])")
        if set(entry) - known:
            raise SampleTreeError(f"{where} [{rel!r}]: unknown keys {sorted(set(entry) - known)}")
        lists = [entry.get("fails", []), entry.get("concepts", [])]
        if not isinstance(entry.get("assignment"), str) or not all(
                isinstance(v, list) and all(isinstance(x, str) for x in v) for v in lists) \
                or not isinstance(entry.get("exact", False), bool):
            raise SampleTreeError(f"{where} [{rel!r}]: assignment must be text, fails and concepts lists of "
                                  "text, exact true or false")
        out.append(SampleExpectation(_inside(submissions_dir, rel, where), entry["assignment"], frozenset(lists[0]),
                                     frozenset(lists[1]), entry.get("exact", False)))
    return out


class SampleTreeError(GraderError, ValueError):
    """expected.toml cannot be used: an operator error (``Error:``, exit 2)."""


def _inside(folder: Path, rel: str, where: Path) -> Path:
    """``folder / rel``, refused unless it stays inside `folder` (also after following links)."""
    parts = rel.replace("\\", "/").split("/")
    path = folder / rel
    if not rel or Path(rel).is_absolute() or rel.startswith(("/", "\\")) or ".." in parts or ":" in parts[0] \
            or not path.resolve().is_relative_to(folder.resolve()):
        raise SampleTreeError(f"{where} [{rel!r}]: a sample's path must be relative and inside {folder}")
    return path


def base_id(case_id: str) -> str:
    return case_id.split("[", 1)[0]


def failed_ids(report: GradeReport) -> set[str]:
    return {base_id(c.id) for c in report.cases if c.outcome is not Outcome.PASSED}


def compare_to_expectation(report: GradeReport, exp: SampleExpectation) -> str:
    """'' when the report matches the declaration, else what differs."""
    failed = failed_ids(report)
    declared = {base_id(f) for f in exp.fails}
    problems = []
    if failed - declared:
        problems.append(f"unexpected failures: {', '.join(sorted(failed - declared))}")
    if declared - failed:
        problems.append(f"should have failed: {', '.join(sorted(declared - failed))}")
    for base in sorted({base_id(f) for f in exp.fails if "[" in f}):
        want = {f for f in exp.fails if "[" in f and base_id(f) == base}
        got = {c.id for c in report.cases if base_id(c.id) == base and c.outcome is not Outcome.PASSED}
        if want != got:
            problems.append(f"{base}: failed {', '.join(sorted(got)) or 'none'}; declared {', '.join(sorted(want))}")
    flagged = set(report.concepts_failed())
    missing = exp.concepts - flagged
    if missing:
        problems.append(f"concepts not flagged: {', '.join(sorted(missing))} (flagged: "
                        f"{', '.join(report.concepts_failed()) or 'none'})")
    if exp.exact and flagged - exp.concepts:
        problems.append(f"concepts flagged but not declared (exact = true): {', '.join(sorted(flagged - exp.concepts))}")
    unexplained = [c.id for c in report.cases if c.outcome is not Outcome.PASSED and not c.concept
                   and not c.not_implemented]
    if unexplained:
        problems.append(f"failed without a concept: {', '.join(unexplained)}")
    return "; ".join(problems)


def _kit_check(assignment: Assignment) -> Check:
    """Release the student kit into a temporary folder: `grader.authoring.release.release` refuses a kit that leaks
    or imports what it does not ship, and grades the reference with the kit alone."""
    from grader.errors import AssignmentSpecError
    from grader.authoring.release import release

    name = "student kit: nothing hidden, no reference source, self-check of the reference"
    with tempfile.TemporaryDirectory(prefix="grader-validate-kit-") as tmp:
        try:
            kit = release(assignment, Path(tmp) / "kit")
        except AssignmentSpecError as e:
            return Check(name, False, str(e))
    return Check(f"{name} {kit.self_check}", True)


def _stable(report: GradeReport) -> dict:
    d = to_dict(report)
    d.pop("graded_at")
    for c in d["cases"]:
        c.pop("duration_s")
    return d


def validate(assignment: Assignment, engine: Engine, submissions_dir: Path | None, *,
             other_seeds: int = 0) -> ValidationReport:
    """Every check of the module docstring; ``other_seeds``: how many other seeds step 5 tries."""
    out = ValidationReport(assignment.id)
    with tempfile.TemporaryDirectory(prefix="grader-validate-") as tmp:
        ref_path = reference_submission(assignment, Path(tmp))
        first = engine.grade_path(ref_path, student_id="reference")
        wrong = [f"{c.id} ({c.outcome.value}: {c.message})" for c in first.cases if c.outcome is not Outcome.PASSED]
        out.checks.append(Check("reference scores 100 %", not wrong and first.score.earned == first.score.possible,
                                f"{first.score.earned:g}/{first.score.possible:g}" + ("; " + "; ".join(wrong) if wrong else "")))
        second = engine.grade_path(ref_path, student_id="reference")
        out.checks.append(Check("two runs give identical results", _stable(first) == _stable(second)))

    out.checks.append(_kit_check(assignment))

    if submissions_dir is None or not (submissions_dir / "expected.toml").is_file():
        out.checks.append(Check("sample submissions", False, "no submissions/expected.toml found"))
        return out
    samples = [e for e in read_expectations(submissions_dir) if e.assignment == assignment.id]
    if not samples:
        out.checks.append(Check("sample submissions", False, f"none declared for {assignment.id}"))
    for exp in samples:
        if not exp.path.exists():
            out.checks.append(Check(f"{exp.path.relative_to(submissions_dir)} -> missing", False,
                                    "declared in expected.toml, but there is no such file"))
            continue
        report = engine.grade_path(exp.path)
        problem = compare_to_expectation(report, exp)
        label = f"{exp.path.relative_to(submissions_dir)} -> {report.score.display_percent()}"
        if report.concepts_failed():
            label += f" [{', '.join(report.concepts_failed())}]"
        out.checks.append(Check(label, not problem, problem))
    present = [e for e in samples if e.path.exists()]
    for seed in range(1, other_seeds + 1):
        out.checks.append(under_seed(assignment, engine, present, submissions_dir, seed))
    return out


def under_seed(assignment: Assignment, engine: Engine, samples: list[SampleExpectation], submissions_dir: Path,
                seed: int) -> Check:
    """The reference and every sample graded with the cases' inputs drawn from ``seed``: one check,
    naming what differs from the declarations."""
    from grader.grading.factory import engine_for

    other = engine_for(dataclasses.replace(assignment, seed=seed), engine.sandbox, device=engine.device)
    other.prepare()
    problems = []
    with tempfile.TemporaryDirectory(prefix="grader-validate-") as tmp:
        ref = other.grade_path(reference_submission(assignment, Path(tmp)), student_id="reference")
    wrong = [c.id for c in ref.cases if c.outcome is not Outcome.PASSED]
    if wrong:
        problems.append(f"reference: fails {', '.join(wrong)}")
    for exp in samples:
        problem = compare_to_expectation(other.grade_path(exp.path), exp)
        if problem:
            problems.append(f"{exp.path.relative_to(submissions_dir)}: {problem}")
    name = f"seed {seed}: the reference and {len(samples)} sample{'' if len(samples) == 1 else 's'} as declared"
    return Check(name, not problems, "\n     ".join(problems))

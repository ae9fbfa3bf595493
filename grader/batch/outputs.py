"""The batch's similarity report: this run's submissions against each other, the starter left out.

Reads only what `grader.submission.load` already read (the code units, bounded, never executed)
and the assignment's own starter files; compares in `grader.similarity`, writes with
`grader.report.similarity_page`.
"""

from __future__ import annotations

from pathlib import Path

from grader.assignment.spec import Assignment
from grader.report.similarity_page import write_similarity
from grader.results import GradeReport
from grader.similarity.fingerprint import MAX_CHARS, fingerprints, normalised_tokens
from grader.similarity.pairs import Document, ranked_pairs
from grader.submission.load import LoadedSubmission, load_submission


def document(student_id: str, sub: LoadedSubmission) -> Document:
    units, labels, budget = [], [], MAX_CHARS
    for u in sub.units:
        if budget <= 0:
            break
        units.append(u.source[:budget])
        labels.append(u.label)
        budget -= len(units[-1])
    return Document(student_id, units, labels, fingerprints(normalised_tokens(units)))


def starter_documents(assignment: Assignment) -> list[Document]:
    """Every starter file (.py and notebook) of the assignment, as the similarity report reads it."""
    folder = assignment.dir / "starter"
    return [document("starter", load_submission(path, main_module=assignment.main_module,
                                                cell_tag=assignment.cell_tag))
            for path in (sorted(folder.glob("*")) if folder.is_dir() else []) if path.suffix in (".py", ".ipynb")]


def write_batch_similarity(assignment: Assignment, subs: dict[str, LoadedSubmission], reports: list[GradeReport],
                           out_dir: Path, *, lang: str | None = None) -> tuple[Path, Path, int]:
    """similarity.html and .csv over `subs` (student id -> what was loaded) and their reports;
    returns both paths and the number of pairs listed."""
    docs = {sid: document(sid, s) for sid, s in sorted(subs.items()) if not s.error}
    graded = [r for r in reports if r.submission.id in subs]
    starters = starter_documents(assignment)
    hashes = {h for d in starters for h in d.prints.hashes}
    lines = frozenset(line.strip() for d in starters for u in d.units for line in u.splitlines() if line.strip())
    pairs = ranked_pairs(list(docs.values()), hashes, graded)
    page, table = write_similarity(pairs, docs, out_dir, assignment=assignment.id, compared=len(subs),
                                   starter=lines, lang=lang)
    return page, table, len(pairs)

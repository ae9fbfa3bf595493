"""The shipped example workflow keeps the properties docs/ci.md promises."""

from __future__ import annotations

from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

WORKFLOW = Path(__file__).resolve().parents[2] / "examples" / "github-workflow.yml"


@pytest.fixture(scope="module")
def flow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text("utf-8"))


def test_triggered_by_pull_request_only(flow):
    triggers = flow[True]  # YAML 1.1 reads the key `on` as a boolean
    assert list(triggers) == ["pull_request"]
    assert "pull_request_target" not in WORKFLOW.read_text("utf-8").split("never pull_request_target")[1]


def test_no_permissions_and_no_secrets(flow):
    assert flow["permissions"] == {}
    assert all(job.get("permissions") == {} for job in flow["jobs"].values())
    text = WORKFLOW.read_text("utf-8")
    assert "secrets." not in text and "github.token" not in text and "${{ env.GITHUB_TOKEN" not in text


def test_pull_request_is_data_and_the_grader_comes_pinned(flow):
    steps = flow["jobs"]["grade"]["steps"]
    checkout = next(s for s in steps if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"] == {"path": "submission", "persist-credentials": False}
    for s in steps:
        if "uses" in s:
            assert len(s["uses"].split("@")[1]) == 40, f"{s['uses']} is not pinned to a commit"
    fetch = next(s for s in steps if "BUNDLE_URL" in s.get("run", ""))
    assert "sha256sum --check" in fetch["run"]
    grade = next(s for s in steps if "grader ci" in s.get("run", ""))
    assert grade["working-directory"] == "${{ runner.temp }}"
    assert '-a "bundle/assignments/$ASSIGNMENT"' in grade["run"]

"""`grader grade --cluster` refusals that need no cluster (and run without `distributed` installed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli.app import main

ROOT = Path(__file__).resolve().parents[2]
SDPA = ROOT / "submissions" / "masked-attention" / "correct" / "sdpa.py"

BLOCK_DISTRIBUTED = '''
import sys

class _NoDistributed:
    """As if the cluster extra were not installed."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("distributed", "dask"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NoDistributed())
'''


def test_without_distributed_the_flag_names_the_extra(tmp_path):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(BLOCK_DISTRIBUTED)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), os.environ.get("PYTHONPATH", "")])}
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", str(SDPA), "-a", "masked-attention", "-o", str(out),
                           "--cluster", "local:2"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stderr.startswith("Error: --cluster needs Dask's 'distributed' package, which is not installed")
    assert "install the extra: pip install 'attention-grader[cluster]'" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists()  # refused before anything was written


def grade(*args) -> object:
    return CliRunner().invoke(main, ["grade", *map(str, args)], catch_exceptions=False)


def test_a_malformed_cluster_address_is_an_operator_error(tmp_path):
    result = grade(SDPA, "-a", "masked-attention", "-o", tmp_path / "out", "--cluster", "head-node:8786")
    assert result.exit_code == 2
    assert "--cluster 'head-node:8786': expected local:N or a scheduler address like tls://scheduler-host:8786" \
        in result.output
    result = grade(SDPA, "-a", "masked-attention", "-o", tmp_path / "out", "--cluster", "local:0")
    assert result.exit_code == 2 and "a local cluster needs at least one worker" in result.output


def test_jobs_and_cluster_together_are_a_usage_error(tmp_path):
    result = grade(SDPA, "-a", "masked-attention", "-o", tmp_path / "out", "--cluster", "local:2", "-j", "2")
    assert result.exit_code == 2
    assert "-j/--jobs and --cluster cannot be combined" in result.output


def test_a_plain_tcp_scheduler_is_refused_unless_explicitly_allowed(tmp_path):
    pytest.importorskip("distributed")
    result = grade(SDPA, "-a", "masked-attention", "-o", tmp_path / "out", "--cluster", "tcp://127.0.0.1:9")
    assert result.exit_code == 2
    assert ("Error: --cluster tcp://127.0.0.1:9 is not TLS: it is not encrypted, and anyone who can reach the "
            "scheduler can join as a worker, receive the hidden cases and every submission, and return forged "
            "results. Use a tls:// scheduler with certificates (docs/cluster.md), or pass --insecure-cluster") \
        in result.output
    assert not (tmp_path / "out" / "results").exists()

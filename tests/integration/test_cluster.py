"""`grader grade --cluster` against real Dask processes: a TLS scheduler and two workers on loopback,
with certificates made here (`make_certs`) as docs/cluster.md tells an instructor to.

The workers run with --preload cluster_preload.py (a file named kills_worker* kills its worker, one
named forges_* comes back under another student's id) and the scheduler with allowed-failures 1, so
a submission that kills its worker twice ends as KilledWorker.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

distributed = pytest.importorskip("distributed")

from grader.assignment.spec import load_assignment  # noqa: E402
from grader.cli.app import main  # noqa: E402

FULL = round(load_assignment("masked-attention").possible(), 6)
"""The assignment's full score (its case set grows; the tests compare with it)."""

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "submissions" / "masked-attention"
PRELOAD = Path(__file__).with_name("cluster_preload.py")
FAULT = Path(__file__).with_name("cluster_fault_preload.py")
SIX = {"additive": "correct", "einsum": "correct", "sdpa": "correct",
       "no_scaling": "buggy", "zero_fill": "buggy", "causal_off_by_one": "buggy"}

pytestmark = pytest.mark.slow  # full tier: a Dask scheduler and workers in subprocesses


@dataclass
class Cluster:
    address: str
    procs: list[subprocess.Popen]
    logs: Path
    tls: list[str]
    """The CA, the certificate and its key (one for every node here)."""

    @property
    def args(self) -> list[str]:
        """What `grader grade` is given to grade on this cluster."""
        return ["--cluster", self.address, "--tls", *self.tls]

    def client(self) -> distributed.Client:
        ca, cert, key = self.tls
        sec = distributed.Security(tls_ca_file=ca, tls_client_cert=cert, tls_client_key=key, require_encryption=True)
        return distributed.Client(self.address, timeout=30, security=sec)


def make_certs(folder: Path) -> tuple[Path, Path, Path]:
    """A certificate authority and one certificate it signs for 127.0.0.1 (server and client use),
    as PEM files: the CA, the certificate, its key (docs/cluster.md makes them with openssl)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)

    def cert(subject, issuer, public, signer, *, ca: bool):
        b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public)
             .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
             .not_valid_after(now + datetime.timedelta(days=1))
             .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if not ca:
            b = (b.add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                              x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                                 critical=False)
                 .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                       ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False))
        return b.sign(signer, hashes.SHA256())

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "grader test CA")])
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    paths = folder / "ca.pem", folder / "node.pem", folder / "node-key.pem"
    paths[0].write_bytes(cert(ca_name, ca_name, ca_key.public_key(), ca_key, ca=True).public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert(name, ca_name, key.public_key(), ca_key, ca=False).public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return paths


def _python(module: str, *args: str, cwd: Path, log: Path, env: dict) -> subprocess.Popen:
    with open(log, "wb") as f:
        return subprocess.Popen([sys.executable, "-m", module, *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                stdout=f, stderr=subprocess.STDOUT, start_new_session=True)


def _wait_for_workers(c: Cluster, n: int, timeout: float = 90) -> None:
    with c.client() as client:
        client.wait_for_workers(n, timeout=timeout)


def _worker_pids(c: Cluster) -> dict[str, int]:
    with c.client() as client:
        return client.run(os.getpid)


@contextlib.contextmanager
def dask_cluster(base: Path, *, workers: int, worker_args: tuple[str, ...] = ()) -> Iterator[Cluster]:
    """`dask scheduler` and `workers` `dask worker` processes (1 thread each) on 127.0.0.1, random ports,
    TLS with certificates made here; all killed afterwards (each in its own session, with its children)."""
    env = {**os.environ, "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "1",
           "DASK_DISTRIBUTED__SCHEDULER__WORKER_SATURATION": "1.0", "DASK_TEMPORARY_DIRECTORY": str(base)}
    sched_file = base / "scheduler.json"
    ca, cert, key = make_certs(base)
    tls = ["--tls-ca-file", str(ca), "--tls-cert", str(cert), "--tls-key", str(key)]
    local = ["--host", "127.0.0.1", "--dashboard-address", "127.0.0.1:0", *tls]
    procs = [_python("distributed.cli.dask_scheduler", *local, "--protocol", "tls", "--port", "0",
                     "--scheduler-file", str(sched_file),
                     cwd=base, log=base / "scheduler.log", env=env)]
    try:
        end = time.monotonic() + 60
        while not sched_file.exists() and time.monotonic() < end and procs[0].poll() is None:
            time.sleep(0.1)
        address = json.loads(sched_file.read_text())["address"]
        for i in range(workers):
            procs.append(_python("distributed.cli.dask_worker", address, *local, "--nthreads", "1", "--nworkers", "1",
                                 "--local-directory", str(base / f"w{i}"), "--death-timeout", "60", *worker_args,
                                 cwd=base, log=base / f"worker{i}.log", env=env))
        c = Cluster(address, procs, base, [str(ca), str(cert), str(key)])
        _wait_for_workers(c, workers)
        yield c
    finally:
        for p in reversed(procs):  # workers first: their nannies close the sandboxes (plugin teardown)
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A scheduler and two workers whose preload kills a worker grading a file named kills_worker*."""
    with dask_cluster(tmp_path_factory.mktemp("dask"), workers=2, worker_args=("--preload", str(PRELOAD))) as c:
        yield c


@pytest.fixture
def healthy(cluster):
    """The cluster with both workers up (a test before may have killed one, which its nanny restarts)."""
    _wait_for_workers(cluster, 2)
    return cluster


def _six(folder: Path) -> Path:
    folder.mkdir()
    for name, kind in SIX.items():
        shutil.copy(SAMPLES / kind / f"{name}.py", folder / f"{name}.py")
    return folder


def _twelve_slow(folder: Path) -> Path:
    """Two copies of each of the six, each importing 0.3 s longer, so a batch lasts long enough to interrupt."""
    folder.mkdir()
    for name, kind in SIX.items():
        for k in (1, 2):
            text = (SAMPLES / kind / f"{name}.py").read_text()
            (folder / f"{name}_v{k}.py").write_text("import time as _t\n_t.sleep(0.3)\n" + text)
    return folder


def grade(*args) -> object:
    return CliRunner().invoke(main, ["grade", *map(str, args)], catch_exceptions=False)


def outcomes(out: Path) -> dict[str, tuple]:
    """Per student: score, load status, isolation and each case's (id, outcome, concept, points, message)."""
    table = {}
    for p in sorted((out / "results").glob("*.json")):
        d = json.loads(p.read_text())
        cases = tuple((c["id"], c["outcome"], c["concept"], c["points"]["earned"], c["message"]) for c in d["cases"])
        table[p.stem] = (d["score"], d["load"]["ok"], d["environment"]["isolation"], cases)
    return table


def ledger_rows(out: Path) -> list[str]:
    with sqlite3.connect(out / "ledger.sqlite") as conn:
        return [r[0] for r in conn.execute("SELECT student_id FROM graded ORDER BY student_id")]


def scores(out: Path, run_id: int) -> list[str]:
    with sqlite3.connect(out / "gradebook.sqlite") as conn:
        return [r[0] for r in conn.execute("SELECT student_id FROM scores WHERE run_id=? ORDER BY student_id",
                                           (run_id,))]


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    """The six graded locally with -j 1: what every cluster run must reproduce."""
    base = tmp_path_factory.mktemp("local")
    cls, out = _six(base / "class"), base / "out"
    result = grade(cls, "-a", "masked-attention", "-o", out, "-j", "1")
    assert result.exit_code == 0, result.output
    return cls, out


def _files(out: Path) -> list[str]:
    return sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())


# --- the same output as a local run ------------------------------------------------------------

def test_cluster_run_equals_a_local_run(healthy, local_run, tmp_path):
    cls, local_out = local_run
    out = tmp_path / "out"
    result = grade(cls, "-a", "masked-attention", "-o", out, *healthy.args)
    assert result.exit_code == 0, result.output
    assert "6 graded, 0 reused from the ledger, 0 failed to load, 0 not graded" in result.output
    assert f"--cluster {healthy.address}" in result.output
    assert outcomes(out) == outcomes(local_out)
    assert outcomes(out)["sdpa"][0] == {"earned": FULL, "possible": FULL}
    assert _files(out) == _files(local_out)
    assert ledger_rows(out) == sorted(SIX) and scores(out, 1) == sorted(SIX)

    again = grade(cls, "-a", "masked-attention", "-o", out, *healthy.args)
    assert again.exit_code == 0, again.output
    assert "Nothing to grade: all 6 submission(s) are unchanged" in again.output


def test_local_cluster_smoke(local_run, tmp_path):
    cls, local_out = local_run
    out = tmp_path / "out"
    result = grade(cls, "-a", "masked-attention", "-o", out, "--cluster", "local:2")
    assert result.exit_code == 0, result.output
    assert "6 graded" in result.output and "--cluster local:2" in result.output
    assert outcomes(out) == outcomes(local_out)


# --- a cluster you can trust -------------------------------------------------------------------

def test_a_report_a_worker_files_under_another_students_id_is_refused_and_graded_here(healthy, local_run,
                                                                                     tmp_path):
    cls = tmp_path / "class"
    cls.mkdir()
    shutil.copy(SAMPLES / "correct" / "additive.py", cls / "additive.py")
    shutil.copy(SAMPLES / "buggy" / "zero_fill.py", cls / "forges_grade.py")
    out = tmp_path / "out"
    result = grade(cls, "-a", "masked-attention", "-o", out, *healthy.args)
    assert result.exit_code == 0, result.output
    assert "returned for forges_grade was refused (it is filed under another student's id, 'additive'); " \
           "forges_grade was graded again on this machine" in result.output
    local = outcomes(local_run[1])
    got = outcomes(out)
    assert sorted(got) == ["additive", "forges_grade"]
    assert got["additive"] == local["additive"]  # not overwritten by the forged report
    assert got["forges_grade"][0] == local["zero_fill"][0] and got["forges_grade"][3] == local["zero_fill"][3]


def test_a_worker_whose_jail_fails_the_trusted_reference_grades_no_one(local_run, tmp_path):
    with dask_cluster(tmp_path, workers=1, worker_args=("--preload", str(FAULT))) as c:
        result = grade(local_run[0], "-a", "masked-attention", "-o", tmp_path / "out", *c.args)
    assert result.exit_code == 2, result.output
    assert "Error: the sandbox could not start on 1 worker(s): tls://127.0.0.1:" in result.output
    assert "the trusted reference fails" in result.output and "nothing was graded" in result.output
    assert not list((tmp_path / "out").glob("results/*.json"))


# --- reliability -------------------------------------------------------------------------------

def _start(args: list, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "grader", *map(str, args)], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait_for_a_result(out: Path, proc: subprocess.Popen, timeout: float = 90) -> None:
    end = time.monotonic() + timeout
    while not any((out / "results").glob("*.json")):
        if proc.poll() is not None:
            raise AssertionError(f"grader exited early ({proc.returncode}): {proc.communicate()}")
        if time.monotonic() > end:
            proc.kill()
            raise AssertionError("timed out waiting for the first result")
        time.sleep(0.02)


def _same_as_local(out: Path, local_out: Path) -> None:
    local = outcomes(local_out)
    for student, (score, ok, isolation, cases) in outcomes(out).items():
        assert (score, ok, isolation, cases) == local[student.rsplit("_v", 1)[0]], student


def test_a_worker_killed_mid_batch_loses_nothing(healthy, local_run, tmp_path):
    cls, out = _twelve_slow(tmp_path / "class"), tmp_path / "out"
    victim = min(_worker_pids(healthy).values())
    proc = _start(["grade", cls, "-a", "masked-attention", "-o", out, *healthy.args], tmp_path)
    _wait_for_a_result(out, proc)
    os.kill(victim, signal.SIGKILL)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, (stdout, stderr)
    assert "12 graded, 0 reused from the ledger, 0 failed to load, 0 not graded" in stdout
    students = sorted(p.name for p in cls.iterdir())
    ids = sorted(s.removesuffix(".py") for s in students)
    assert sorted(outcomes(out)) == ids
    assert ledger_rows(out) == ids and scores(out, 1) == ids  # each exactly once
    progress = [line.split()[1] for line in stdout.splitlines() if line.startswith("[")]
    assert sorted(progress) == ids  # one line each: nothing graded twice is reported twice
    _same_as_local(out, local_run[1])
    assert victim not in _worker_pids(healthy).values()  # it really died (its nanny started another)


def test_a_submission_that_kills_its_worker_every_time_is_recorded_as_a_crash(healthy, tmp_path):
    cls = tmp_path / "class"
    cls.mkdir()
    shutil.copy(SAMPLES / "correct" / "sdpa.py", cls / "kills_worker_alice.py")
    shutil.copy(SAMPLES / "correct" / "einsum.py", cls / "bob.py")
    out = tmp_path / "out"
    result = grade(cls, "-a", "masked-attention", "-o", out, *healthy.args)
    assert result.exit_code == 0, result.output
    assert "2 graded" in result.output
    table = outcomes(out)
    score, ok, _, cases = table["kills_worker_alice"]
    assert score == {"earned": 0.0, "possible": FULL} and not ok
    assert {(c[1], c[2]) for c in cases} == {("error", "crash")}
    assert "killed the grading process 2 times" in cases[0][4]
    assert table["bob"][0] == {"earned": FULL, "possible": FULL}
    assert ledger_rows(out) == ["bob", "kills_worker_alice"]

    again = grade(cls, "-a", "masked-attention", "-o", out, *healthy.args)
    assert "Nothing to grade" in again.output  # the crash is that submission's result, not retried


def test_sigint_stops_cleanly_and_a_rerun_resumes_from_the_ledger(healthy, tmp_path):
    cls, out = _twelve_slow(tmp_path / "class"), tmp_path / "out"
    proc = _start(["grade", cls, "-a", "masked-attention", "-o", out, *healthy.args], tmp_path)
    _wait_for_a_result(out, proc)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, (stdout, stderr)
    assert "Stopping after the submissions in progress" in stderr
    first = len(ledger_rows(out))
    assert 1 <= first < 12

    result = grade(cls, "-a", "masked-attention", "-o", out, *healthy.args)
    assert result.exit_code == 0, result.output
    assert f"{12 - first} graded, {first} reused from the ledger" in result.output
    assert len(ledger_rows(out)) == 12 and len(scores(out, 2)) == 12
    with sqlite3.connect(out / "gradebook.sqlite") as conn:
        assert [r[0] for r in conn.execute("SELECT status FROM runs ORDER BY id")] == ["interrupted", "complete"]


# --- refusals ----------------------------------------------------------------------------------

def test_workers_with_another_grader_version_are_refused(healthy, local_run, tmp_path, monkeypatch):
    import grader

    installed = grader.__version__
    monkeypatch.setattr(grader, "__version__", "9.9.9")  # this machine claims another version than the workers
    result = grade(local_run[0], "-a", "masked-attention", "-o", tmp_path / "out", *healthy.args)
    assert result.exit_code == 2
    assert "the workers must run the same grader version as this machine (9.9.9)" in result.output
    assert result.output.count(f"has grader {installed}") == 2
    assert "install attention-grader==9.9.9 on them" in result.output


def test_cuda_without_gpu_workers_is_refused(healthy, local_run, tmp_path):
    result = grade(local_run[0], "-a", "masked-attention", "-o", tmp_path / "out", *healthy.args,
                   "--device", "cuda")
    assert result.exit_code == 2
    assert "--device cuda: no worker advertises a GPU" in result.output
    assert "--resources GPU=1" in result.output


# --- GPU workers (needs CUDA) ------------------------------------------------------------------

@pytest.mark.gpu
def test_cuda_batch_runs_on_gpu_workers_and_equals_a_local_cuda_run(tmp_path):
    cls = _six(tmp_path / "class")
    local = grade(cls, "-a", "masked-attention", "-o", tmp_path / "local", "-j", "1", "--device", "cuda")
    assert local.exit_code == 0, local.output
    with dask_cluster(tmp_path, workers=1, worker_args=("--resources", "GPU=1")) as c:
        result = grade(cls, "-a", "masked-attention", "-o", tmp_path / "out", *c.args,
                       "--device", "cuda")
    assert result.exit_code == 0, result.output
    assert outcomes(tmp_path / "out") == outcomes(tmp_path / "local")
    assert {json.loads(p.read_text())["environment"]["device"] for p in (tmp_path / "out" / "results").glob("*")} \
        == {"cuda"}
    smoke = grade(cls, "-a", "masked-attention", "-o", tmp_path / "out2", "--cluster", "local:2", "--device", "cuda")
    assert smoke.exit_code == 0, smoke.output
    assert outcomes(tmp_path / "out2") == outcomes(tmp_path / "local")

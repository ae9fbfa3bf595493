"""Reference setups kept on disk between runs: what depends only on the assignment and the machine.

A case's setup (its inputs, the reference's expected results and the classic mistakes' outputs
its diagnosis compares with) is a function of the case code, the reference, spec.toml (its seed),
the grader and the numerics of this machine's torch. Every command used to compute all of them
again; this keeps them in a folder the operator controls, one file per assignment and key:

    <folder>/<assignment id>-<sha256 of the key, 24 hex digits>.safetensors

The key is every input of that function: the assignment's fingerprint (case files, reference
files, spec.toml and seed, grader version: `grader.assignment.fingerprint`), a digest of the
grader's own source, and the environment (Python, torch and its CPU kernels, the machine, torch's
thread count, the device and, for CUDA, the device's name, capability and bfloat16 support).
A file is written by `grader.grading.stored`, the student kit's format: tensors in safetensors,
the structure as JSON, never pickle, so reading one runs no code. It carries the whole key and a
digest of its own content in its metadata: a file that is missing, truncated, of another key, or
whose content does not match its digest is a miss, and the setups are computed (and the file
written again). Only a folder owned by this user and writable by no one else is used. Which folder
is the command line's choice (``--cache-dir``, ``--no-cache``: `grader.cli.common.cache_folder`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from grader.assignment.fingerprint import fingerprint
from grader.assignment.spec import Assignment
from grader.cases import Setup

KEEP = 4
"""Files kept per assignment: the newest few keys (another grader or torch in use beside this one)."""


@functools.lru_cache(maxsize=1)
def grader_source_digest() -> str:
    """sha256 over the grader package's Python files: a change to the grader changes the key,
    whether or not its version was bumped."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        if "__pycache__" in p.parts:
            continue
        h.update(p.relative_to(root).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def environment_key(device: torch.device) -> dict[str, str]:
    """What of this machine the reference's numbers depend on."""
    env = {"python": f"{sys.implementation.name} {platform.python_version()}", "torch": torch.__version__,
           "machine": platform.machine(), "cpu_capability": torch.backends.cpu.get_cpu_capability(),
           "threads": str(torch.get_num_threads()), "device": str(device)}
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        major, minor = torch.cuda.get_device_capability(index)
        env.update(cuda=str(torch.version.cuda), cuda_device=torch.cuda.get_device_name(index),
                   cuda_capability=f"{major}.{minor}", cuda_bf16=str(torch.cuda.is_bf16_supported()))
    return env


def cache_key(a: Assignment, device: torch.device) -> dict[str, str]:
    """The whole key of `a`'s setups on `device` here (every value a str)."""
    return {"assignment": a.id, **{f"fingerprint.{k}": v for k, v in fingerprint(a).to_dict().items()},
            "grader_source": grader_source_digest(), **environment_key(device)}


def usable(folder: Path) -> bool:
    """`folder` exists (or was just made, mode 0700), is ours and is writable by no one else: what
    it holds decides students' scores, like the reference itself."""
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = folder.stat()
    except OSError:
        return False
    if sys.platform == "win32":
        return True
    return st.st_uid == os.geteuid() and not st.st_mode & 0o022


@dataclass(frozen=True)
class SetupCache:
    """Setups of assignments in `folder` (see the module's doc)."""

    folder: Path

    def path(self, key: dict[str, str]) -> Path:
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
        return self.folder / f"{key['assignment']}-{digest}.safetensors"

    def read(self, key: dict[str, str]) -> dict[str, Setup] | None:
        """The setups stored under `key` (on the CPU), or None where there is no sound file for it."""
        from grader.grading import stored

        if not usable(self.folder):
            return None
        try:
            setups, _ = stored.read_checked(self.path(key), {"key": json.dumps(key, sort_keys=True)})
        except Exception:  # noqa: BLE001 - any fault of the file is a miss, never trusted
            return None
        return setups

    def write(self, key: dict[str, str], setups: dict[str, Setup]) -> bool:
        """Store `setups` under `key` (atomically: a reader sees the old file or the new one);
        False where they cannot be stored (an unwritable folder, a value the format cannot hold)."""
        from grader.grading import stored

        if not usable(self.folder):
            return False
        target = self.path(key)
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".writing-", suffix=".safetensors")
        os.close(fd)
        try:
            stored.write(Path(tmp), setups, {}, meta={"key": json.dumps(key, sort_keys=True)})
            os.replace(tmp, target)
        except Exception:  # noqa: BLE001 - the cache is an optimisation: grading goes on without it
            Path(tmp).unlink(missing_ok=True)
            return False
        self._prune(key["assignment"], keep=target)
        return True

    def _prune(self, assignment: str, *, keep: Path) -> None:
        """Keep the `KEEP` newest files of `assignment` (`keep` among them)."""
        try:
            mine = sorted((p for p in self.folder.glob(f"{assignment}-*.safetensors") if p != keep),
                          key=lambda p: p.stat().st_mtime, reverse=True)
        except OSError:
            return
        for p in mine[KEEP - 1:]:
            p.unlink(missing_ok=True)


def open_cache(folder: Path | None) -> SetupCache | None:
    return None if folder is None else SetupCache(folder)


def cached(cache: SetupCache | None, a: Assignment, device: torch.device, ids: list[str],
           compute: Any) -> tuple[dict[str, Setup], str]:
    """The setups of instance `ids`: read from `cache` where it holds every one of them under this
    key, else `compute(missing ids)` for those it lacks, and the union written back. Returns them
    and "hit", "miss" or "off"."""
    from grader.grading.setups import on_device

    if cache is None:
        return compute(ids), "off"
    key = cache_key(a, device)
    have = cache.read(key) or {}
    missing = [i for i in ids if i not in have]
    if not missing:
        return {i: on_device(have[i], device) for i in ids}, "hit"
    fresh = compute(missing)
    cache.write(key, {**have, **fresh})
    return {i: fresh[i] if i in fresh else on_device(have[i], device) for i in ids}, "miss"

"""`Limits`: every limit applied to one submission's worker, in one frozen dataclass.

Plain data, no imports beyond the standard library: the grader builds one per run and passes it
in; each worker gets the same limits for its whole life.
"""

from __future__ import annotations

from dataclasses import dataclass

GiB = 1 << 30


@dataclass(frozen=True)
class Limits:
    """Every limit applied to one submission's worker."""

    import_timeout_s: float = 60.0
    """Wall clock for running all code units (the notebook's cells / the module body)."""
    call_timeout_s: float = 10.0
    """Wall clock for one call (function, method, state_dict, vjp)."""
    submission_timeout_s: float = 300.0
    """Wall clock for the worker's whole life; RLIMIT_CPU is twice this."""
    memory_bytes: int = 2 * GiB
    max_pids: int = 64
    """Processes and threads (cgroup pids.max)."""
    max_file_bytes: int = 16 << 20
    max_output_bytes: int = 64 << 10
    """Captured stdout / stderr kept per stream."""
    kill_output_bytes: int = 8 << 20
    """Total output past which the worker is killed."""
    max_result_bytes: int = 64 << 20
    """Largest reply payload accepted from a worker; the engine lowers it per case to what the case
    can expect (``Worker.reply_cap``)."""
    scratch_bytes: int = 64 << 20
    """Bytes the worker may write (its scratch dir is a tmpfs of this size, with namespaces)."""
    scratch_files: int = 4096
    """Files and folders the worker may create in its scratch dir (with namespaces)."""
    cpu_quota: float = 1.0
    """CPUs a worker and everything it starts may use at once (cgroup cpu quota, where available)."""
    max_restarts: int = 6
    """Crashes or time-outs of the cases calling one entry point after which its remaining cases are
    not run (each costs a fresh worker); the other entry points' cases still run. Six: code that
    hangs on every float16 call times out in the six float16 cases of masked-attention and still
    gets the rest graded (``submission_timeout_s`` bounds the total)."""
    gpu_memory_bytes: int = 2 * GiB
    """GPU memory a worker's CUDA allocator may hold (``--device cuda``; best effort: what the driver
    and the CUDA context take is outside it)."""
    start_timeout_s: float = 120.0
    """Worker start-up (a fresh process imports torch); not charged to the student."""


@dataclass(frozen=True)
class Budget:
    """What all the workers of one sandbox may use together at once, the pre-started ones counted:
    a cgroup over them all (``grader.sandbox.jail.cgroups.make_batch``), where cgroups can be written.
    With `-j N`, each slot keeps the worker it grades and the next one, started early; without a
    budget they could hold 2N CPUs and 2N memory caps."""

    cpus: float
    """CPUs the batch's workers may use at once (their cgroup's cpu quota)."""
    memory_bytes: int
    """Memory they may use at once; past it the kernel reclaims, then its OOM killer ends the
    largest of them (reported like its own memory limit)."""

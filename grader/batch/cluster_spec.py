"""The --cluster value: `local:N` or a scheduler address, and the device a cluster batch grades on."""

from __future__ import annotations

import re
from dataclasses import dataclass

from grader.errors import GraderError

INSTALL_HINT = "pip install 'attention-grader[cluster]'"


@dataclass(frozen=True)
class ClusterSpec:
    address: str
    """A scheduler address (tcp://host:port, tls://...), or "" for a LocalCluster."""
    local_workers: int = 0
    """For local:N: N worker processes with one thread each."""

    def __str__(self) -> str:
        return f"local:{self.local_workers}" if self.local_workers else self.address


def parse_spec(text: str) -> ClusterSpec:
    """`local:N` or a scheduler address; GraderError naming the extra when distributed is missing."""
    m = re.fullmatch(r"local:(\d+)", text.strip())
    if m:
        if int(m.group(1)) < 1:
            raise GraderError(f"--cluster {text}: a local cluster needs at least one worker (local:2)")
        spec = ClusterSpec("", int(m.group(1)))
    elif re.fullmatch(r"(tcp|tls|ucx|inproc)://[^\s/]+", text.strip()):
        spec = ClusterSpec(text.strip())
    else:
        raise GraderError(f"--cluster {text!r}: expected local:N or a scheduler address like "
                          "tcp://scheduler-host:8786")
    try:
        import distributed  # noqa: F401
    except ImportError as e:
        raise GraderError(f"--cluster needs Dask's 'distributed' package, which is not installed ({e}); "
                          f"install the extra: {INSTALL_HINT}") from None
    return spec


def device_for(spec: ClusterSpec, name: str):
    """The batch's device. local:N runs here, so it resolves as a local run; a remote scheduler's
    workers are other machines: "auto" means CPU there, and "cuda" is checked against the workers."""
    from grader.device import resolve_device
    import torch

    if spec.local_workers or name == "cpu":
        return resolve_device(name)
    if name not in ("auto", "cuda"):
        raise ValueError(f"device must be one of auto, cpu, cuda; got {name!r}")
    return torch.device("cpu" if name == "auto" else "cuda")

"""The --cluster value: `local:N` or a scheduler address, and the device a cluster batch grades on."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from grader.errors import GraderError

if TYPE_CHECKING:
    from distributed import Security

INSTALL_HINT = "pip install 'attention-grader[cluster]'"


PLAIN_TCP = ("it is not encrypted, and anyone who can reach the scheduler can join as a worker, receive the "
             "hidden cases and every submission, and return forged results")


@dataclass(frozen=True)
class TLSFiles:
    """The instructor's client credentials for a tls:// scheduler (PEM files, see docs/cluster.md)."""

    ca_file: str
    """The certificate authority that signed the scheduler's and the workers' certificates."""
    cert: str
    key: str


@dataclass(frozen=True)
class ClusterSpec:
    address: str
    """A scheduler address (tls://host:port, or tcp:// with `insecure`), or "" for a LocalCluster."""
    local_workers: int = 0
    """For local:N: N worker processes with one thread each."""
    tls: TLSFiles | None = None
    """Client credentials for a tls:// scheduler; None: Dask's configuration (distributed.comm.tls)."""
    insecure: bool = False
    """Plain TCP allowed (``--insecure-cluster``); otherwise TLS with certificates, always."""

    def __str__(self) -> str:
        return f"local:{self.local_workers}" if self.local_workers else self.address


def parse_spec(text: str, *, tls: TLSFiles | None = None, insecure: bool = False) -> ClusterSpec:
    """`local:N` or a scheduler address; GraderError naming the extra when distributed is missing,
    and for a scheduler that is not TLS with certificates (unless `insecure`)."""
    m = re.fullmatch(r"local:(\d+)", text.strip())
    if m:
        if int(m.group(1)) < 1:
            raise GraderError(f"--cluster {text}: a local cluster needs at least one worker (local:2)")
        spec = ClusterSpec("", int(m.group(1)), tls=tls, insecure=insecure)
    elif re.fullmatch(r"(tcp|tls|ucx|inproc)://[^\s/]+", text.strip()):
        spec = ClusterSpec(text.strip(), tls=tls, insecure=insecure)
    else:
        raise GraderError(f"--cluster {text!r}: expected local:N or a scheduler address like "
                          "tls://scheduler-host:8786")
    try:
        import distributed  # noqa: F401
    except ImportError as e:
        raise GraderError(f"--cluster needs Dask's 'distributed' package, which is not installed ({e}); "
                          f"install the extra: {INSTALL_HINT}") from None
    if spec.address and not spec.address.startswith("tls://") and not insecure:
        raise GraderError(f"--cluster {spec.address} is not TLS: {PLAIN_TCP}. Use a tls:// scheduler with "
                          "certificates (docs/cluster.md), or pass --insecure-cluster on a network you trust")
    return spec


def security_for(spec: ClusterSpec) -> Security | None:
    """The instructor's `distributed.Security`: TLS with certificates, encryption required (None with
    --insecure-cluster). local:N makes throw-away certificates in memory (`Security.temporary`)."""
    from distributed import Security

    if spec.insecure:
        return None
    if spec.local_workers:
        try:
            return Security.temporary()
        except ImportError as e:
            raise GraderError(f"--cluster local:N secures its workers with TLS, which needs the 'cryptography' "
                              f"package ({e}); install it, or pass --insecure-cluster") from None
    if spec.tls is not None:
        return Security(tls_ca_file=spec.tls.ca_file, tls_client_cert=spec.tls.cert, tls_client_key=spec.tls.key,
                        require_encryption=True)
    sec = Security(require_encryption=True)  # from Dask's configuration
    mine = sec.get_tls_config_for_role("client")
    if not (mine["ca_file"] and mine["cert"]):
        raise GraderError(f"--cluster {spec.address}: no TLS certificate for this machine; pass --tls CA CERT KEY "
                          "(or set distributed.comm.tls in Dask's configuration), "
                          "see docs/cluster.md")
    return sec


def device_for(spec: ClusterSpec, name: str) -> torch.device:
    """The batch's device. local:N runs here, so it resolves as a local run; a remote scheduler's
    workers are other machines: "auto" means CPU there, and "cuda" is checked against the workers."""
    from grader.device import resolve_device

    if spec.local_workers or name == "cpu":
        return resolve_device(name)
    if name not in ("auto", "cuda"):
        raise ValueError(f"device must be one of auto, cpu, cuda; got {name!r}")
    return torch.device("cpu" if name == "auto" else "cuda")

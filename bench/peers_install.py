"""Install nbgrader 0.9.6 and otter-grader 7.0.0 into their own virtualenvs under bench/out/.

Each venv gets torch pinned to the version in use first, then the peer and what the generated
notebooks import (matplotlib), then an ipykernel registered inside the venv (--sys-prefix).
Idempotent: a venv whose `.ok` marker lists the same packages is kept.
Usage: python bench/peers_install.py [nbgrader] [otter]
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"

PEERS = {
    "nbgrader": ["nbgrader==0.9.6"],
    "otter": ["otter-grader==7.0.0"],
}
NOTEBOOKS_NEED = ["matplotlib"]
"""What the generated notebooks import beyond torch (`%matplotlib inline`), as on the students' machines."""


def torch_version() -> str:
    out = subprocess.run([sys.executable, "-c", "import torch;print(torch.__version__)"],
                         capture_output=True, text=True, check=True).stdout.strip()
    return out.split("+")[0]


def venv_dir(name: str) -> Path:
    return OUT / f"venv-{name}"


def venv_python(name: str) -> Path:
    return venv_dir(name) / "bin" / "python"


def _marker(name: str) -> str:
    return " ".join(PEERS[name] + NOTEBOOKS_NEED)


def is_ready(name: str) -> bool:
    """Installed, with the packages this version of the bench asks for (a venv made for another list
    gets the missing ones added)."""
    ok = venv_dir(name) / ".ok"
    return ok.exists() and _marker(name) in ok.read_text()


def install(name: str, log=None) -> tuple[bool, str]:
    """Returns (ok, message)."""
    d = venv_dir(name)
    if is_ready(name):
        return True, f"{name}: already installed in {d}"
    OUT.mkdir(parents=True, exist_ok=True)
    logf = open(OUT / f"install-{name}.log", "a")
    t0 = time.time()

    def sh(*cmd):
        logf.write("$ " + " ".join(map(str, cmd)) + "\n")
        logf.flush()
        r = subprocess.run([str(c) for c in cmd], stdout=logf, stderr=subprocess.STDOUT)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(map(str, cmd[:6]))} ... exited {r.returncode}")

    try:
        if not venv_python(name).exists():
            sh(sys.executable, "-m", "venv", d)
        py = venv_python(name)
        sh(py, "-m", "pip", "install", "-q", "--upgrade", "pip")
        sh(py, "-m", "pip", "install", "-q", f"torch=={torch_version()}")
        sh(py, "-m", "pip", "install", "-q", *PEERS[name], *NOTEBOOKS_NEED, "ipykernel")
        sh(py, "-m", "ipykernel", "install", "--sys-prefix", "--name", f"bench-{name}",
           "--display-name", f"bench-{name}")
        (d / ".ok").write_text(f"{_marker(name)}\ninstalled in {time.time() - t0:.0f}s\n")
        return True, f"{name}: installed in {time.time() - t0:.0f}s"
    except Exception as e:  # noqa: BLE001 - report, the bench skips the peer
        return False, f"{name}: cannot install ({e}); see {OUT / f'install-{name}.log'}"
    finally:
        logf.close()


if __name__ == "__main__":
    import argparse
    import concurrent.futures as cf

    ap = argparse.ArgumentParser(description="Install the peer graders the bench compares with, each into "
                                             "its own virtualenv under bench/out/ (cached).")
    ap.add_argument("names", nargs="*", metavar="PEER", help=f"which peers ({', '.join(PEERS)}) [all]")
    names = ap.parse_args().names or list(PEERS)
    unknown = [n for n in names if n not in PEERS]
    if unknown:
        ap.error(f"unknown peer {', '.join(unknown)} (choose from {', '.join(PEERS)})")
    with cf.ThreadPoolExecutor(len(names)) as ex:
        for msg in ex.map(lambda n: install(n)[1], names):
            print(msg, flush=True)

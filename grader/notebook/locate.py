"""Which notebook a kernel runs, and whether its saved file is behind the code the kernel ran.

``grader.notebook.check()`` grades the notebook as saved on disk, in the sandbox, never the
kernel's live state. So it must find the file, and warn when the student ran code they have not
saved. Standard library only (IPython, ipykernel and jupyter_core are used when present).

Where the file comes from, first found wins:

1. ``check(path=...)``;
2. ``$GRADER_NOTEBOOK``;
3. VS Code: ``__vsc_ipynb_file__`` in the kernel's namespace;
4. Jupyter Server 2 (JupyterLab, Notebook 7): ``$JPY_SESSION_NAME``, set for the kernel;
5. a Jupyter server on this machine (``jpserver-*.json`` / ``nbserver-*.json`` in the runtime
   dir, classic notebook too): its sessions API, asked for the session of this kernel (by the id
   in the kernel's connection file); only servers on localhost, one second at most each;
6. the only ``.ipynb`` in the working directory (a kernel starts in its notebook's folder).
"""

from __future__ import annotations

import glob
import json
import os
import re
import sys
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.errors import GraderError
from grader.i18n import Msg, tr

ENV_VAR = "GRADER_NOTEBOOK"
_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "0.0.0.0", ""}
_MAX_LOG = 200


@dataclass(frozen=True)
class Located:
    path: Path
    how: Msg | str
    """How it was found, for the output: "path=", "$GRADER_NOTEBOOK", "VS Code", ..."""


class NotebookNotFound(GraderError):
    """No notebook to grade; ``render(lang)`` says so in the student's language."""

    def __init__(self, message: Msg):
        super().__init__(message)


def _shell() -> Any:
    """The running IPython shell, or None (IPython not imported: no kernel, so not imported here)."""
    ipython = sys.modules.get("IPython")
    return ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None


def _jupyter_servers() -> list[dict]:
    try:
        from jupyter_core.paths import jupyter_runtime_dir
    except ImportError:
        return []
    found = []
    for f in sorted(glob.glob(os.path.join(jupyter_runtime_dir(), "*server-*.json"))):
        if not os.path.basename(f).startswith(("jpserver-", "nbserver-")):
            continue
        try:
            with open(f, encoding="utf-8") as fh:
                found.append(json.load(fh))
        except (OSError, ValueError):
            continue
    return found


def _kernel_id() -> str | None:
    try:
        from ipykernel.connect import get_connection_file

        name = os.path.basename(get_connection_file())
    except Exception:  # noqa: BLE001 - not in an ipykernel, or no connection file
        return None
    m = re.match(r"kernel-(.+)\.json$", name)
    return m.group(1) if m else None


def _from_server_sessions() -> Path | None:
    kid = _kernel_id()
    if kid is None:
        return None
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # localhost only, never a proxy
    for server in _jupyter_servers():
        url = str(server.get("url") or "")
        if urllib.parse.urlparse(url).hostname not in _LOCAL_HOSTS or not url.startswith("http"):
            continue
        req = urllib.request.Request(url.rstrip("/") + "/api/sessions",
                                     headers={"Authorization": f"token {server.get('token', '')}"})
        try:
            with opener.open(req, timeout=1) as r:
                sessions = json.loads(r.read(1 << 20))
        except (OSError, ValueError):
            continue
        for s in sessions if isinstance(sessions, list) else []:
            if isinstance(s, dict) and (s.get("kernel") or {}).get("id") == kid:
                rel = s.get("path") or (s.get("notebook") or {}).get("path")
                root = server.get("root_dir") or server.get("notebook_dir") or ""
                if rel:
                    return Path(root, rel)
    return None


def _from_session_name(name: str) -> Path | None:
    p = Path(name)
    if p.is_absolute():
        return p
    for server in _jupyter_servers():
        root = server.get("root_dir") or server.get("notebook_dir")
        if root and Path(root, name).is_file():
            return Path(root, name)
    return Path.cwd() / p.name if (Path.cwd() / p.name).is_file() else None


def find_notebook(path: str | os.PathLike | None = None) -> Located:
    """The notebook to grade (see the module docstring for the order). Raises GraderError."""
    if path is not None:
        return _existing(Path(path), "path=")
    if os.environ.get(ENV_VAR):
        return _existing(Path(os.environ[ENV_VAR]), f"${ENV_VAR}")
    shell = _shell()
    vsc = getattr(shell, "user_ns", {}).get("__vsc_ipynb_file__") if shell is not None else None
    if isinstance(vsc, str) and vsc:
        return _existing(Path(vsc), "VS Code")
    if os.environ.get("JPY_SESSION_NAME"):
        p = _from_session_name(os.environ["JPY_SESSION_NAME"])
        if p is not None and p.suffix == ".ipynb" and p.is_file():
            return Located(p, "Jupyter")
    p = _from_server_sessions()
    if p is not None and p.is_file():
        return Located(p, "Jupyter")
    here = sorted(Path.cwd().glob("*.ipynb"))
    if len(here) == 1:
        return Located(here[0], tr("the only notebook in this folder"))
    if not here:
        raise NotebookNotFound(tr("could not tell which notebook this is: there is none in {folder}; pass it: "
                                  "notebook.check(path=\"attention.ipynb\")", folder=str(Path.cwd())))
    raise NotebookNotFound(tr("could not tell which notebook this is (notebooks in {folder}: {listed}); pass it: "
                              "notebook.check(path=\"attention.ipynb\")", folder=str(Path.cwd()),
                              listed=", ".join(p.name for p in here[:5])))


def _existing(p: Path, how: str) -> Located:
    if not p.is_file():
        raise NotebookNotFound(tr("notebook {path} ({how}) does not exist; save the notebook, or pass "
                                  "notebook.check(path=...)", path=str(p), how=how))
    return Located(p, how)


# --- what the kernel ran -------------------------------------------------------------------

_LOG: list[tuple[float, str]] = []
"""(start time, raw source) of each cell the kernel ran since ``install_hook``."""
_HOOKED: set[int] = set()


def _record(info: Any = None) -> None:
    src = getattr(info, "raw_cell", None)
    if isinstance(src, str):
        _LOG.append((time.time(), src))
        del _LOG[:-_MAX_LOG]


def install_hook() -> None:
    """Record when each cell starts from now on (IPython's ``pre_run_cell``), once per shell."""
    shell = _shell()
    if shell is None or id(shell) in _HOOKED:
        return
    try:
        shell.events.register("pre_run_cell", _record)
    except Exception:  # noqa: BLE001 - an IPython without events: no staleness warning
        return
    _HOOKED.add(id(shell))


def _norm(src: str) -> str:
    return "\n".join(line.rstrip() for line in src.replace("\r\n", "\n").split("\n")).strip()


def saved_code(path: Path) -> set[str] | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        cells = [c for c in doc.get("cells", []) if isinstance(c, dict) and c.get("cell_type") == "code"]
        return {_norm("".join(c["source"]) if isinstance(c.get("source"), list) else str(c.get("source", "")))
                for c in cells}
    except (OSError, ValueError, AttributeError, TypeError, KeyError):
        return None


def _ran_since(mtime: float) -> list[tuple[float | None, str]]:
    """Cells run after the file was saved, this one (the check's own cell) left out."""
    if _LOG:
        return [(t, s) for t, s in _LOG[:-1] if t > mtime]
    shell = _shell()
    raw = list(getattr(getattr(shell, "history_manager", None), "input_hist_raw", []) or [])
    return [(None, raw[-2])] if len(raw) >= 3 else []  # no log yet: the cell before this one


def unsaved_warning(path: Path) -> Msg | str:
    """A sentence when the kernel ran code, after the file was last saved, that is not in it.

    Comparing the code, not only the times: running every cell of an unchanged notebook
    ("Run All") after opening it makes the file older than every run, yet nothing is unsaved."""
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return ""
    saved = saved_code(path)
    if saved is None:
        return ""
    for t, src in reversed(_ran_since(mtime)):
        code = _norm(src)
        if code and code not in saved:
            first = next((line for line in code.split("\n") if line.strip()), "")[:60]
            saved_at = time.strftime("%H:%M:%S", time.localtime(mtime))
            if t:
                return tr("You ran code at {time} that is not in the saved file ({first}); {file} was saved at "
                          "{saved}. The saved file is what is graded: save (Ctrl+S) and check again.",
                          time=time.strftime("%H:%M:%S", time.localtime(t)), first=first, file=path.name,
                          saved=saved_at)
            return tr("You ran code that is not in the saved file ({first}); {file} was saved at {saved}. The "
                      "saved file is what is graded: save (Ctrl+S) and check again.", first=first, file=path.name,
                      saved=saved_at)
    return ""

"""grader.notebook.locate: which notebook the kernel runs, and code run but not saved."""

from __future__ import annotations

import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest

from grader.notebook import locate as nl
from grader.errors import GraderError


def _nb(path: Path, *sources: str) -> Path:
    cells = [{"cell_type": "code", "metadata": {}, "source": s, "outputs": [], "execution_count": None}
             for s in sources]
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


@pytest.fixture(autouse=True)
def no_jupyter(monkeypatch, tmp_path):
    """No kernel, no server, no env hints, an empty working directory, an empty run log."""
    for var in (nl.ENV_VAR, "JPY_SESSION_NAME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(nl, "_shell", lambda: None)
    monkeypatch.setattr(nl, "_jupyter_servers", lambda: [])
    monkeypatch.setattr(nl, "_kernel_id", lambda: None)
    monkeypatch.setattr(nl, "_LOG", [])
    monkeypatch.chdir(tmp_path)


def test_order_path_then_env_then_vscode_then_folder(tmp_path, monkeypatch):
    a, b, c = _nb(tmp_path / "a.ipynb"), _nb(tmp_path / "b.ipynb"), _nb(tmp_path / "c.ipynb")
    monkeypatch.setenv(nl.ENV_VAR, str(b))
    monkeypatch.setattr(nl, "_shell", lambda: SimpleNamespace(user_ns={"__vsc_ipynb_file__": str(c)}))
    assert nl.find_notebook(a) == nl.Located(a, "path=")
    assert nl.find_notebook() == nl.Located(b, "$GRADER_NOTEBOOK")
    monkeypatch.delenv(nl.ENV_VAR)
    assert nl.find_notebook() == nl.Located(c, "VS Code")


def test_jupyter_session_name_relative_to_the_working_directory(tmp_path, monkeypatch):
    nb = _nb(tmp_path / "attention.ipynb")
    _nb(tmp_path / "other.ipynb")
    monkeypatch.setenv("JPY_SESSION_NAME", "course/week3/attention.ipynb")
    assert nl.find_notebook() == nl.Located(tmp_path / "attention.ipynb", "Jupyter")
    assert nb.is_file()


def test_jupyter_server_sessions_api_on_localhost(tmp_path, monkeypatch):
    root = tmp_path / "root"
    (root / "hw").mkdir(parents=True)
    nb = _nb(root / "hw" / "attention.ipynb")
    seen = []

    class Sessions(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            seen.append((self.path, self.headers.get("Authorization")))
            body = json.dumps([{"path": "hw/other.ipynb", "kernel": {"id": "k-other"}},
                               {"path": "hw/attention.ipynb", "kernel": {"id": "k-1"}}]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Sessions)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        monkeypatch.setattr(nl, "_jupyter_servers", lambda: [
            {"url": "http://example.invalid:8888/", "token": "x", "root_dir": "/nowhere"},  # not local: never asked
            {"url": url, "token": "t0k", "root_dir": str(root)}])
        monkeypatch.setattr(nl, "_kernel_id", lambda: "k-1")
        assert nl.find_notebook() == nl.Located(nb, "Jupyter")
        assert seen == [("/api/sessions", "token t0k")]
    finally:
        server.shutdown()


def test_the_only_notebook_in_the_folder_else_a_one_line_error(tmp_path):
    a = _nb(tmp_path / "attention.ipynb")
    found = nl.find_notebook()
    assert found.path == a and str(found.how) == "the only notebook in this folder"
    assert found.how.render("zh-CN") == "这个文件夹里唯一的笔记本"
    _nb(tmp_path / "scratch.ipynb")
    with pytest.raises(GraderError, match=r"could not tell which notebook this is \(notebooks in .*: attention"
                                          r"\.ipynb, scratch\.ipynb\); pass it: notebook\.check\(path="):
        nl.find_notebook()
    with pytest.raises(GraderError, match=r"notebook .*missing\.ipynb \(path=\) does not exist; save the notebook"):
        nl.find_notebook("missing.ipynb")
    (tmp_path / "attention.ipynb").unlink()
    (tmp_path / "scratch.ipynb").unlink()
    with pytest.raises(nl.NotebookNotFound) as none:
        nl.find_notebook()
    assert none.value.render("zh-CN").startswith("无法确定是哪个笔记本：")
    assert "(notebooks in" not in str(none.value) and "there is none in" in str(none.value)


def test_unsaved_code_warns_saved_code_does_not(tmp_path, monkeypatch):
    nb = _nb(tmp_path / "attention.ipynb", "import torch", "def causal_mask(n):\n    return None  ")
    mtime = nb.stat().st_mtime
    later = mtime + 5
    # Run All of the saved notebook after opening it: every run is newer than the file, nothing unsaved.
    monkeypatch.setattr(nl, "_LOG", [(later, "import torch"), (later, "def causal_mask(n):\n    return None"),
                                     (later, "notebook.check()")])
    assert nl.unsaved_warning(nb) == ""
    # An edited cell run, not saved: the warning names it and says to save.
    monkeypatch.setattr(nl, "_LOG", [(later, "def causal_mask(n):\n    return torch.ones(n, n).tril().bool()"),
                                     (later, "notebook.check('causal_mask')")])
    w = str(nl.unsaved_warning(nb))
    assert w.startswith(f"You ran code at {time.strftime('%H:%M:%S', time.localtime(later))} that is not in the "
                        "saved file (def causal_mask(n):); attention.ipynb was saved at ")
    assert w.endswith("The saved file is what is graded: save (Ctrl+S) and check again.")
    assert nl.unsaved_warning(nb).render("zh-CN").startswith("你在 ")
    # The same edit, run before the file was saved: saved since, so no warning.
    monkeypatch.setattr(nl, "_LOG", [(mtime - 5, "def causal_mask(n):\n    return 1"), (later, "notebook.check()")])
    assert nl.unsaved_warning(nb) == ""


def test_without_a_log_the_cell_before_this_one_is_compared(tmp_path, monkeypatch):
    nb = _nb(tmp_path / "attention.ipynb", "x = 1")
    history = SimpleNamespace(input_hist_raw=["", "x = 1", "x = 2", "notebook.check()"])
    monkeypatch.setattr(nl, "_shell", lambda: SimpleNamespace(history_manager=history, user_ns={}))
    assert "(x = 2)" in str(nl.unsaved_warning(nb))
    history.input_hist_raw[2] = "x = 1"
    assert nl.unsaved_warning(nb) == ""
    assert os.path.exists(nb)

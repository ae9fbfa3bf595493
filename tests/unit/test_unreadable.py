"""In a worker, a module whose files cannot be opened is not found (as if not installed)."""

import importlib.machinery
import importlib.util
import sys

import pytest

from grader.sandbox.child import unreadable


@pytest.fixture
def finder(monkeypatch, tmp_path):
    (tmp_path / "locked_pkg").mkdir()
    (tmp_path / "locked_pkg" / "__init__.py").write_text("VALUE = 1\n")
    (tmp_path / "open_mod.py").write_text("VALUE = 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    locked = str(tmp_path / "locked_pkg")
    monkeypatch.setattr(unreadable, "_opens", lambda p: not p.startswith(locked))
    unreadable.install()
    yield
    for name in ("locked_pkg", "open_mod"):
        sys.modules.pop(name, None)


def test_it_takes_the_path_finders_place_once(finder):
    unreadable.install()
    assert sys.meta_path.count(unreadable.UnreadableIsMissing) == 1
    assert importlib.machinery.PathFinder not in sys.meta_path


def test_an_unreadable_module_is_missing_and_a_readable_one_imports(finder):
    assert importlib.util.find_spec("locked_pkg") is None
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("locked_pkg")
    assert importlib.import_module("open_mod").VALUE == 2

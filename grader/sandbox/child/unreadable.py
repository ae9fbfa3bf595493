"""Imports in a worker: a module whose files the worker may not read is not installed, for imports.

Landlock keeps a worker's reads to its read set (``grader.sandbox.jail.resident``), so importing a
package outside it would raise PermissionError from deep inside importlib, which no
``try: import x`` / ``except ImportError`` expects: torch imports optional packages that way
(colorama, when the meta device's first op imports ``torch._inductor``), and a worker whose zygote
did not import them first would fail there. `install` puts a finder in the path finder's place
that finds nothing (so the import raises ModuleNotFoundError, and ``importlib.util.find_spec``
returns None, as for a package that is not installed) where neither the module's compiled file
nor its source can be opened. Opening a file reads none of its pages.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType


class UnreadableIsMissing:
    """A meta path finder: the path finder's spec, or None where its files cannot be opened (a
    namespace package, having no file, as the path finder finds it)."""

    @staticmethod
    def find_spec(name: str, path: Sequence[str] | None = None, target: ModuleType | None = None) -> ModuleSpec | None:
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or not spec.has_location or not spec.origin:
            return spec
        if any(f and _opens(f) for f in (spec.cached, spec.origin)):
            return spec
        return None

    @staticmethod
    def invalidate_caches() -> None:
        importlib.machinery.PathFinder.invalidate_caches()


def install() -> None:
    """Put the finder in the path finder's place on ``sys.meta_path`` (at the end where it is not there)."""
    finders = [f for f in sys.meta_path if f is not importlib.machinery.PathFinder and f is not UnreadableIsMissing]
    at = next((i for i, f in enumerate(sys.meta_path) if f is importlib.machinery.PathFinder), len(finders))
    sys.meta_path[:] = finders[:at] + [UnreadableIsMissing] + finders[at:]


def _opens(path: str) -> bool:
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_CLOEXEC))
    except OSError:
        return False
    return True

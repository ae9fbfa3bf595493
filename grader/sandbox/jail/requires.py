"""The installed packages a distribution requires, all the way down, found from their metadata.

torch imports several of the distributions it requires lazily, on first use of a feature: the
meta device's first op imports sympy (and sympy mpmath), ``torch.compile`` imports ``torch._dynamo``. A worker
may read those packages whole (``grader.sandbox.jail.resident``), whether or not its zygote
imported them, so that what a worker can import does not depend on the zygote's warm-up. Found
from the installed distributions' metadata (``importlib.metadata``), never from a list of names or
paths: requirements of an extra (``; extra == ...``) are left out, and so are distributions that
are not installed.

Standard library only: imported with ``resident.py`` (``importlib.metadata`` only when used).
"""

from __future__ import annotations

import importlib.util
import os
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import importlib.metadata

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_EXTRA = re.compile(r"\bextra\s*==")


def required_closure(names: tuple[str, ...]) -> list[importlib.metadata.Distribution]:
    """The installed distributions `names` require, and those they require, and so on (not `names`)."""
    import importlib.metadata  # here: the jail probe imports this module's neighbours, not this

    seen: set[str] = set()
    found: list[importlib.metadata.Distribution] = []
    todo = [normal_name(n) for n in names]
    first = set(todo)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            dist = importlib.metadata.distribution(name)
        except (importlib.metadata.PackageNotFoundError, ValueError):
            continue
        if name not in first:
            found.append(dist)
        todo += [n for n in map(required_name, dist.requires or ()) if n]
    return found


def required_name(requirement: str) -> str | None:
    """The (normalised) distribution a requirement line names; None for one of an extra."""
    spec, _, marker = requirement.partition(";")
    m = _NAME.match(spec.strip())
    return normal_name(m.group()) if m and not _EXTRA.search(marker) else None


def top_level(dist: importlib.metadata.Distribution) -> list[str]:
    """The top-level package folders and one-file modules (their compiled files) `dist` installs."""
    names = (dist.read_text("top_level.txt") or "").split()
    if not names:
        names = sorted({f.parts[0] for f in dist.files or () if len(f.parts) > 0
                        and not f.parts[0].endswith((".dist-info", ".egg-info", ".pth", ".data"))
                        and f.parts[0] not in ("..", "__pycache__", "bin")})
    out = []
    for name in names:
        path = os.path.realpath(str(dist.locate_file(name)))
        if os.path.isdir(path):
            out.append(path)
        elif name.endswith(".py") or os.path.isfile(path + ".py"):
            source = path if name.endswith(".py") else path + ".py"
            out.append(importlib.util.cache_from_source(source))
    return out


def required_packages(names: tuple[str, ...]) -> list[str]:
    """`top_level` of every distribution in `required_closure(names)`, existing ones only."""
    out: list[str] = []
    for dist in required_closure(names):
        out += [p for p in top_level(dist) if os.path.exists(p)]
    return sorted(set(out))


def normal_name(name: str) -> str:
    """A distribution's name as metadata compares them (PEP 503: runs of -_. as one -, lower case)."""
    return re.sub(r"[-_.]+", "-", name).lower()

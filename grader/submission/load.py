"""Loading a submission (.py, .ipynb, folder or .zip) into code units to run. Nothing is executed here.

Bad student input never raises: it gives a `LoadedSubmission` whose `error` says, for the student,
what was wrong.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import warnings
import zipfile
from dataclasses import dataclass, field

from grader.submission.ids import student_id

MAX_FILE_BYTES = 20 << 20
"""Largest single file read (a notebook full of stored outputs is refused, not parsed)."""
MAX_TOTAL_BYTES = 50 << 20
"""Largest folder or unpacked zip."""
MAX_MEMBERS = 1000
DEFAULT_MAIN = "submission.py"

# Cell magics whose body is Python: keep the body, drop the magic line.
_PYTHON_CELL_MAGICS = {"time", "timeit", "capture", "prun", "debug"}
_ASSIGN_MAGIC = re.compile(r"^(\s*)([A-Za-z_][\w.,\s]*?)\s*=\s*[!%]")


@dataclass(frozen=True)
class CodeUnit:
    label: str
    """"code cell 3" for a notebook cell, the file name for a module."""
    cell: int | None
    """Notebook code cell number, 1-based, counting code cells only (Jupyter numbers no cell, and a
    markdown cell is nothing to look for among code); None for .py."""
    source: str
    """The code, with IPython magics, !shell lines and (in notebooks) the grader's self-check calls
    neutralised (same line numbers; see grader.submission.selfcheck_cells)."""


def unit_title(unit: CodeUnit, width: int = 60) -> str:
    """How a student finds a unit: "code cell 5 (def causal_mask(q_len, k_len=None, ...)" for a cell."""
    if unit.cell is None:
        return unit.label
    first = next((line.strip() for line in unit.source.splitlines() if line.strip()), "")
    if len(first) > width:
        first = first[: width - 1] + "…"
    return f"{unit.label} ({first})" if first else unit.label


@dataclass(frozen=True)
class LoadedSubmission:
    id: str
    """Student id derived from the file/folder name (see `student_id`)."""
    path: str
    kind: str
    """"py", "ipynb", "folder" or "zip"."""
    sha256: str
    """Of the bytes; folders and zips: over sorted relative paths and their bytes."""
    units: tuple[CodeUnit, ...] = ()
    """Executed in order in one module namespace."""
    files: dict[str, bytes] = field(default_factory=dict)
    """Extra files (relative path -> bytes) for the worker's scratch dir."""
    error: str | None = None
    """Set when nothing can run: a message for the student."""


class _Refused(Exception):
    """Student input that cannot be loaded; the message is for the student."""


def load_submission(path: str | os.PathLike, *, main_module: str | None = None,
                    cell_tag: str | None = None) -> LoadedSubmission:
    """Read a submission without running it. Never raises for bad student input.

    Args:
        main_module: for folders and zips, the file to run (default ``submission.py``; a lone
            ``.py``/``.ipynb`` is used when that name is absent).
        cell_tag: for notebooks, run only the code cells carrying this tag.
    """
    path = os.fspath(path)
    kind = _kind(path)
    sid = student_id(path)
    digest = ""
    try:
        if kind == "folder":
            files = read_folder(path)
            digest = _tree_digest(files)
            units, extra = _from_tree(files, main_module, cell_tag)
        elif kind == "zip":
            raw = _read_capped(path)
            digest = hashlib.sha256(raw).hexdigest()
            files = _read_zip(path)
            units, extra = _from_tree(files, main_module, cell_tag)
        else:
            raw = _read_capped(path)
            digest = hashlib.sha256(raw).hexdigest()
            name = os.path.basename(path)
            units = _notebook_units(raw, name, cell_tag) if kind == "ipynb" else _py_units(raw, name)
            extra = {}
    except _Refused as e:
        return LoadedSubmission(id=sid, path=path, kind=kind, sha256=digest, error=str(e))
    return LoadedSubmission(id=sid, path=path, kind=kind, sha256=digest, units=tuple(units), files=extra)


def _kind(path: str) -> str:
    if os.path.isdir(path):
        return "folder"
    low = path.lower()
    if low.endswith(".zip"):
        return "zip"
    if low.endswith(".ipynb"):
        return "ipynb"
    return "py"


def _read_capped(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise _Refused(f"{os.path.basename(path)} does not exist") from None
    except OSError as e:
        raise _Refused(f"{os.path.basename(path)} could not be read: {e.strerror}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise _Refused(f"{os.path.basename(path)} is larger than {MAX_FILE_BYTES >> 20} MB; "
                       "clear the notebook's outputs (Kernel > Restart & Clear Output) and resubmit")
    return raw


def _decode(raw: bytes, name: str) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _Refused(f"{name} is not UTF-8 text (invalid byte 0x{raw[e.start]:02x} at byte offset "
                       f"{e.start}); save it as UTF-8") from None
    return text.removeprefix("\ufeff")


def _py_units(raw: bytes, name: str) -> list[CodeUnit]:
    if not raw.strip():
        raise _Refused(f"{name} is empty")
    return [CodeUnit(label=name, cell=None, source=_decode(raw, name))]


# --- notebooks --------------------------------------------------------------------------------

def _notebook_units(raw: bytes, name: str, cell_tag: str | None) -> list[CodeUnit]:
    if not raw.strip():
        raise _Refused(f"{name} is empty")
    text = _decode(raw, name)
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise _Refused(f"{name} is not a valid notebook (invalid JSON: {e}); "
                       "download it again with File > Download > .ipynb") from None
    if not isinstance(doc, dict):
        raise _Refused(f"{name} is not a valid notebook (its JSON is not an object)")
    major = doc.get("nbformat")
    if not isinstance(major, int) or major < 3 or major > 4:
        raise _Refused(f"{name} uses notebook format version {major!r}; only versions 3 and 4 are "
                       "supported (open and save it in a current Jupyter)")
    import nbformat  # costly to import (docs/performance.md), so only when a notebook is loaded

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nb = nbformat.reads(text, as_version=4)
    except Exception as e:  # nbformat raises many types for malformed notebooks
        raise _Refused(f"{name} is not a valid notebook ({type(e).__name__}: {str(e)[:200]})") from None
    units = []
    code_cells = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    for number, cell in enumerate(code_cells, start=1):
        if cell_tag is not None and cell_tag not in (cell.get("metadata", {}).get("tags") or []):
            continue
        source = cell.get("source", "")
        if isinstance(source, list):
            source = "".join(source)
        units.append(CodeUnit(label=f"code cell {number}", cell=number, source=neutralise_magics(source)))
    if units:
        from grader.submission.selfcheck_cells import neutralise_self_checks

        sources = neutralise_self_checks([u.source for u in units])
        units = [CodeUnit(label=u.label, cell=u.cell, source=src) for u, src in zip(units, sources)]
    if not units:
        if cell_tag is not None:
            raise _Refused(f"{name} has no code cell tagged {cell_tag!r}; add the tag to the cells "
                           "to grade (View > Cell Toolbar > Tags)")
        raise _Refused(f"{name} has no code cells")
    return units


def neutralise_magics(source: str) -> str:
    """IPython magics and shell escapes -> `pass` (same line count), so nothing of them runs."""
    lines = source.split("\n")
    first = lines[0].lstrip() if lines else ""
    if first.startswith("%%"):
        magic = first[2:].split(None, 1)[0] if first[2:].strip() else ""
        indent = "pass  # cell magic %%" + magic + " not run"
        if magic in _PYTHON_CELL_MAGICS:
            return "\n".join([indent] + lines[1:])
        return "\n".join([indent] + ["# " + line for line in lines[1:]])
    out = []
    for line in lines:
        stripped = line.lstrip()
        indent = line[: len(line) - len(stripped)]
        if stripped.startswith(("%", "!")):
            out.append(f"{indent}pass  # magic not run")
        elif _ASSIGN_MAGIC.match(line):
            m = _ASSIGN_MAGIC.match(line)
            out.append(f"{m.group(1)}{m.group(2)} = None  # magic not run")
        else:
            out.append(line)
    return "\n".join(out)


# --- folders and zips -------------------------------------------------------------------------

def read_folder(root: str) -> dict[str, bytes]:
    """A submission folder's files (relative path -> bytes), with the same safety checks as loading."""
    real_root = os.path.realpath(root)
    files: dict[str, bytes] = {}
    total = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__pycache__")))
        for d in dirnames:
            if os.path.islink(os.path.join(dirpath, d)):
                _check_link(os.path.join(dirpath, d), real_root, root)
        for fn in sorted(filenames):
            full = os.path.join(dirpath, fn)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            if os.path.islink(full):
                _check_link(full, real_root, root)
            if fn.startswith(".") or not os.path.isfile(full):
                continue
            if len(files) >= MAX_MEMBERS:
                raise _Refused(f"the submission folder has more than {MAX_MEMBERS} files")
            data = _read_capped(full)
            total += len(data)
            if total > MAX_TOTAL_BYTES:
                raise _Refused(f"the submission folder is larger than {MAX_TOTAL_BYTES >> 20} MB")
            files[rel] = data
    return files


def _check_link(full: str, real_root: str, root: str) -> None:
    target = os.path.realpath(full)
    if target != real_root and not target.startswith(real_root + os.sep):
        rel = os.path.relpath(full, root)
        raise _Refused(f"{rel} is a symbolic link pointing outside the submission; submit the file itself")


def _read_zip(path: str) -> dict[str, bytes]:
    name = os.path.basename(path)
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as e:
        raise _Refused(f"{name} is not a valid zip file ({e})") from None
    files: dict[str, bytes] = {}
    with zf:
        infos = zf.infolist()
        if len(infos) > MAX_MEMBERS:
            raise _Refused(f"{name} holds more than {MAX_MEMBERS} files")
        if sum(i.file_size for i in infos) > MAX_TOTAL_BYTES:
            raise _Refused(f"{name} unpacks to more than {MAX_TOTAL_BYTES >> 20} MB")
        for info in infos:
            member = info.filename
            parts = member.replace("\\", "/").split("/")
            if member.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", member) or ".." in parts:
                raise _Refused(f"{name} contains the unsafe path {member!r}; zip the files themselves")
            if stat.S_ISLNK(info.external_attr >> 16):
                raise _Refused(f"{name} contains a symbolic link ({member}); zip the files themselves")
            if info.is_dir() or "__MACOSX" in parts or parts[-1].startswith("."):
                continue
            try:
                data = zf.read(info)
            except Exception as e:  # corrupt member, unsupported compression, bad CRC
                raise _Refused(f"{name}: {member} could not be unpacked ({e})") from None
            if len(data) > MAX_FILE_BYTES:
                raise _Refused(f"{name}: {member} is larger than {MAX_FILE_BYTES >> 20} MB")
            rel = "/".join(p for p in parts if p not in ("", "."))
            if rel in files:
                raise _Refused(f"{name} holds {rel!r} twice; zip each file once")
            files[rel] = data
    _check_no_clash(files, name)
    return _strip_common_dir(files)


def _check_no_clash(files: dict[str, bytes], name: str) -> None:
    """Refuse a tree that cannot be unpacked: a file whose path is also a folder of another file
    (``utils`` and ``utils/helpers.py``), at any depth."""
    for rel in sorted(files):
        parts = rel.split("/")
        for depth in range(1, len(parts)):
            folder = "/".join(parts[:depth])
            if folder in files:
                raise _Refused(f"{name} holds both a file and a folder named {folder!r} (the folder holds "
                               f"{rel!r}); rename one of them and zip again")


def _strip_common_dir(files: dict[str, bytes]) -> dict[str, bytes]:
    tops = {rel.split("/", 1)[0] for rel in files}
    if len(tops) == 1 and all("/" in rel for rel in files):
        return {rel.split("/", 1)[1]: data for rel, data in files.items()}
    return files


def _tree_digest(files: dict[str, bytes]) -> str:
    h = hashlib.sha256()
    for rel in sorted(files):
        # os.fsencode: a name that is not UTF-8 arrives as surrogate escapes; hash its real bytes
        h.update(os.fsencode(rel) + b"\0" + len(files[rel]).to_bytes(8, "little") + files[rel])
    return h.hexdigest()


def _from_tree(files: dict[str, bytes], main_module: str | None,
               cell_tag: str | None) -> tuple[list[CodeUnit], dict[str, bytes]]:
    main = main_module or DEFAULT_MAIN
    if main not in files:
        candidates = sorted(r for r in files if "/" not in r and r.endswith((".py", ".ipynb")))
        # A lone module is unambiguous whatever its name (my_attention.py in a student's folder).
        if len(candidates) == 1:
            main = candidates[0]
        else:
            found = ", ".join(candidates) or "no .py or .ipynb files"
            raise _Refused(f"the submission has no {main}; found: {found}. Rename your main file to {main}")
    data = files[main]
    units = _notebook_units(data, main, cell_tag) if main.endswith(".ipynb") else _py_units(data, main)
    extra = {rel: d for rel, d in files.items() if rel != main}
    return units, extra

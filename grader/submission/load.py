"""Loading a submission (.py, .ipynb, folder or .zip) into code units to run. Nothing is executed here.

Bad student input never raises: it gives a `LoadedSubmission` whose `error` says, for the student,
what was wrong.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import stat
import warnings
import zipfile
from dataclasses import dataclass, field
from collections.abc import Callable

from grader.i18n import Msg, tr, verbatim
from grader.submission.ids import student_id
from grader.submission.neutralise import neutralise_magics, neutralise_self_checks

MAX_FILE_BYTES = 20 << 20
"""Largest single file read (a notebook full of stored outputs is refused, not parsed)."""
MAX_TOTAL_BYTES = 50 << 20
"""Largest folder or unpacked zip."""
MAX_MEMBERS = 1000
DEFAULT_MAIN = "submission.py"



@dataclass(frozen=True)
class CodeUnit:
    label: str
    """"code cell 3" for a notebook cell, the file name for a module."""
    cell: int | None
    """Notebook code cell number, 1-based, counting code cells only (Jupyter numbers no cell, and a
    markdown cell is nothing to look for among code); None for .py."""
    source: str
    """The code, with IPython magics, !shell lines and (in notebooks) the grader's self-check calls
    neutralised (same line numbers; see grader.submission.neutralise)."""


def unit_title(unit: CodeUnit, width: int = 60) -> Msg:
    """How a student finds a unit: "code cell 5 (def causal_mask(q_len, k_len=None, ...)" for a cell,
    the file name for a module."""
    if unit.cell is None:
        return verbatim(unit.label)
    found = _FIRST_CODE.search(unit.source)  # not splitlines(): a cell may hold a million lines
    first = found.group().strip() if found else ""
    if len(first) > width:
        first = first[: width - 1] + "…"
    return tr("code cell {n} ({code})", n=unit.cell, code=first) if first else tr("code cell {n}", n=unit.cell)


_FIRST_CODE = re.compile(r"\S[^\r\n]*")


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
    error: Msg | None = None
    """Set when nothing can run: a message for the student."""


class _Refused(Exception):
    """Student input that cannot be loaded; the message is for the student."""

    def __init__(self, reason: Msg):
        super().__init__(str(reason))
        self.reason = reason


def load_submission(path: str | os.PathLike, *, main_module: str | None = None, cell_tag: str | None = None,
                    link_root: str | os.PathLike | None = None,
                    on_digest: Callable[[str], None] = lambda digest: None) -> LoadedSubmission:
    """Read a submission without running it, in this process. Never raises for bad student input.

    This is what `grader.submission.intake` runs in a child process with a deadline and a memory
    budget; call that, not this, on files a student sent.

    Args:
        main_module: for folders and zips, the file to run (default ``submission.py``; a lone
            ``.py``/``.ipynb`` is used when that name is absent).
        cell_tag: for notebooks, run only the code cells carrying this tag.
        link_root: refuse a submission that is, or lies under, a symbolic link below this folder
            (``grader ci``: a link committed in the pull request would read a file of the runner).
        on_digest: called with ``sha256`` as soon as it is known, before anything is parsed.
    """
    path = os.fspath(path)
    kind = _kind(path)
    sid = student_id(path)
    digest = ""
    try:
        if link_root is not None:
            _refuse_links(path, os.fspath(link_root))
        if kind == "folder":
            files = read_folder(path)
            digest = _tree_digest(files)
            on_digest(digest)
            units, extra = _from_tree(files, main_module, cell_tag)
        else:
            raw = _read_capped(path)
            digest = hashlib.sha256(raw).hexdigest()
            on_digest(digest)
            if kind == "zip":
                units, extra = _from_tree(_read_zip(raw, os.path.basename(path)), main_module, cell_tag)
            else:
                name = os.path.basename(path)
                units = _notebook_units(raw, name, cell_tag) if kind == "ipynb" else _py_units(raw, name)
                extra = {}
    except _Refused as e:
        return LoadedSubmission(id=sid, path=path, kind=kind, sha256=digest, error=e.reason)
    except MemoryError:
        raise  # the intake's child reports it as the memory budget
    except Exception as e:  # a reader's bug on input nobody foresaw: this student's error, not the batch's
        reason = tr("{name} could not be read ({kind}: {error})", name=os.path.basename(path),
                    kind=type(e).__name__, error=str(e)[:200])
        return LoadedSubmission(id=sid, path=path, kind=kind, sha256=digest, error=reason)
    return LoadedSubmission(id=sid, path=path, kind=kind, sha256=digest, units=tuple(units), files=extra)


def _refuse_links(path: str, root: str) -> None:
    """The submission and every folder above it up to `root` must be no symbolic link."""
    here, top = os.path.abspath(path), os.path.abspath(root)
    while True:
        if os.path.islink(here):
            raise _Refused(tr("{name} is a symbolic link; commit the file itself", name=os.path.basename(here)))
        parent = os.path.dirname(here)
        if here == top or parent == here or os.path.commonpath([parent, top]) != top:
            return
        here = parent


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
        raise _Refused(tr("{file} does not exist", file=os.path.basename(path))) from None
    except OSError as e:
        raise _Refused(tr("{file} could not be read: {strerror}", file=os.path.basename(path), strerror=e.strerror)) from None
    if len(raw) > MAX_FILE_BYTES:
        raise _Refused(tr("{file} is larger than {mb} MB; clear the notebook's outputs (Kernel > Restart & "
                          "Clear Output) and resubmit", file=os.path.basename(path), mb=MAX_FILE_BYTES >> 20))
    return raw


def _decode(raw: bytes, name: str) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _Refused(tr("{name} is not UTF-8 text (invalid byte 0x{byte} at byte offset {start}); save it as UTF-8", name=name, byte=format(raw[e.start], "02x"), start=e.start)) from None
    return text.removeprefix("\ufeff")


def _py_units(raw: bytes, name: str) -> list[CodeUnit]:
    if not raw.strip():
        raise _Refused(tr("{name} is empty", name=name))
    return [CodeUnit(label=name, cell=None, source=_decode(raw, name))]


# --- notebooks --------------------------------------------------------------------------------

def _notebook_units(raw: bytes, name: str, cell_tag: str | None) -> list[CodeUnit]:
    if not raw.strip():
        raise _Refused(tr("{name} is empty", name=name))
    text = _decode(raw, name)
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise _Refused(tr("{name} is not a valid notebook (invalid JSON: {error}); download it again with File > "
                          "Download > .ipynb", name=name, error=e)) from None
    if not isinstance(doc, dict):
        raise _Refused(tr("{name} is not a valid notebook (its JSON is not an object)", name=name))
    major = doc.get("nbformat")
    if not isinstance(major, int) or major < 3 or major > 4:
        raise _Refused(tr("{name} uses notebook format version {major}; only versions 3 and 4 are supported (open "
                          "and save it in a current Jupyter)", name=name, major=repr(major)))
    import nbformat  # costly to import (docs/performance.md), so only when a notebook is loaded

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nb = nbformat.reads(text, as_version=4)
    except Exception as e:  # nbformat raises many types for malformed notebooks
        raise _Refused(tr("{name} is not a valid notebook ({kind}: {error})", name=name, kind=type(e).__name__, error=str(e)[:200])) from None
    units = []
    for number, cell in enumerate(_code_cells(nb, name), start=1):
        if cell_tag is not None and cell_tag not in _cell_tags(cell, number, name):
            continue
        units.append(CodeUnit(label=f"code cell {number}", cell=number,
                              source=neutralise_magics(_cell_source(cell, number, name))))
    if units:
        sources = neutralise_self_checks([u.source for u in units])
        units = [CodeUnit(label=u.label, cell=u.cell, source=src) for u, src in zip(units, sources)]
    if not units:
        if cell_tag is not None:
            raise _Refused(tr("{name} has no code cell tagged {cell_tag}; add the tag to the cells to grade (View > "
                              "Cell Toolbar > Tags)", name=name, cell_tag=repr(cell_tag)))
        raise _Refused(tr("{name} has no code cells", name=name))
    return units


# nbformat only logs what its schema refuses; what the loader uses is type-checked here, so a
# notebook edited by hand (a source that is a number, tags that are a string) is that student's
# load error, never an exception in the grader.

def _code_cells(nb: object, name: str) -> list[dict]:
    cells = nb.get("cells", []) if isinstance(nb, dict) else None
    if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells):
        raise _Refused(tr("{name} is not a valid notebook (its cells are not a list of cells); open and save it "
                          "in Jupyter", name=name))
    return [c for c in cells if c.get("cell_type") == "code"]


def _cell_source(cell: dict, number: int, name: str) -> str:
    source = cell.get("source", "")
    if isinstance(source, list) and all(isinstance(line, str) for line in source):
        return "".join(source)
    if isinstance(source, str):
        return source
    raise _Refused(tr("{name} is not a valid notebook: the source of code cell {n} is a JSON {kind}, not text; "
                      "open and save it in Jupyter", name=name, n=number, kind=_json_kind(source)))


def _cell_tags(cell: dict, number: int, name: str) -> list[str]:
    metadata = cell.get("metadata", {})
    tags = metadata.get("tags") if isinstance(metadata, dict) else None
    if not isinstance(metadata, dict) or not (tags is None or isinstance(tags, list)
                                              and all(isinstance(t, str) for t in tags)):
        raise _Refused(tr("{name} is not a valid notebook: the metadata or tags of code cell {n} are not what "
                          "Jupyter writes; open and save it in Jupyter", name=name, n=number))
    return tags or []


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    for kind, name in ((bool, "boolean"), (int, "number"), (float, "number"), (dict, "object"), (list, "list")):
        if isinstance(value, kind):
            return name
    return "value"


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
                raise _Refused(tr("the submission folder has more than {max_members} files", max_members=MAX_MEMBERS))
            data = _read_capped(full)
            total += len(data)
            if total > MAX_TOTAL_BYTES:
                raise _Refused(tr("the submission folder is larger than {mb} MB", mb=MAX_TOTAL_BYTES >> 20))
            files[rel] = data
    return files


def _check_link(full: str, real_root: str, root: str) -> None:
    target = os.path.realpath(full)
    if target != real_root and not target.startswith(real_root + os.sep):
        rel = os.path.relpath(full, root)
        raise _Refused(tr("{rel} is a symbolic link pointing outside the submission; submit the file itself", rel=rel))


def _read_zip(raw: bytes, name: str) -> dict[str, bytes]:
    try:
        zf = zipfile.ZipFile(io.BytesIO(raw))
    except UnicodeDecodeError:  # a member name flagged as UTF-8 that is not
        raise _Refused(tr("{name} holds a file name marked as UTF-8 that is not UTF-8; zip the files again with "
                          "another tool", name=name)) from None
    except Exception as e:  # BadZipFile, OSError, and whatever else a crafted central directory raises
        raise _Refused(tr("{name} is not a valid zip file ({error})", name=name, error=e)) from None
    files: dict[str, bytes] = {}
    with zf:
        infos = zf.infolist()
        if len(infos) > MAX_MEMBERS:
            raise _Refused(tr("{name} holds more than {max_members} files", name=name, max_members=MAX_MEMBERS))
        if sum(i.file_size for i in infos) > MAX_TOTAL_BYTES:
            raise _Refused(tr("{name} unpacks to more than {mb} MB", name=name, mb=MAX_TOTAL_BYTES >> 20))
        for info in infos:
            member = info.filename
            parts = member.replace("\\", "/").split("/")
            if member.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", member) or ".." in parts:
                raise _Refused(tr("{name} contains the unsafe path {member}; zip the files themselves", name=name, member=repr(member)))
            if stat.S_ISLNK(info.external_attr >> 16):
                raise _Refused(tr("{name} contains a symbolic link ({member}); zip the files themselves", name=name, member=member))
            if info.is_dir() or "__MACOSX" in parts or parts[-1].startswith("."):
                continue
            try:
                data = zf.read(info)
            except Exception as e:  # corrupt member, unsupported compression, bad CRC
                raise _Refused(tr("{name}: {member} could not be unpacked ({error})", name=name, member=member, error=e)) from None
            if len(data) > MAX_FILE_BYTES:
                raise _Refused(tr("{name}: {member} is larger than {mb} MB", name=name, member=member, mb=MAX_FILE_BYTES >> 20))
            rel = "/".join(p for p in parts if p not in ("", "."))
            if rel in files:
                raise _Refused(tr("{name} holds {rel} twice; zip each file once", name=name, rel=repr(rel)))
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
                raise _Refused(tr("{name} holds both a file and a folder named {folder} (the folder holds {rel}); "
                                  "rename one of them and zip again", name=name, folder=repr(folder), rel=repr(rel)))


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
            found = ", ".join(candidates) if candidates else tr("no .py or .ipynb files")
            raise _Refused(tr("the submission has no {main}; found: {found}. Rename your main file to {main}", main=main, found=found))
    data = files[main]
    units = _notebook_units(data, main, cell_tag) if main.endswith(".ipynb") else _py_units(data, main)
    extra = {rel: d for rel, d in files.items() if rel != main}
    return units, extra

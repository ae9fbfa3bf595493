"""The page cache closed as a channel: every page a worker can read is resident before one starts.

Whether a page of a file is in the page cache is one bit that every process of the host shares,
and it outlives them: a worker that reads a page nobody has read since boot caches it, and a later
worker, in this batch or a later one, tells by timing its own read (measured: 205 us from the disk
against 2.1 us cached). The seccomp filter denies the oracles and the evictions; this module makes
the remaining move, reading a page, change nothing, in the zygote, before its first fork:

- `ReadSet.of_this_process`: what a worker may open, decided from what the zygote imported: the
  compiled modules (and extension modules) it imported; all of torch's and of the distributions
  torch requires (`requires`), so that a module imported later (by the student, or lazily by
  torch: sympy for the meta device) still imports, warm-up or not; the standard
  library's (without its test suite, IDLE, tkinter and the like); the data files the zygote opened
  while importing (an audit hook, `record_opens`, saw them); those packages' folders, for listing.
  And what a worker can read without opening anything: every file mapped into the zygote (torch's
  libraries, the interpreter), range by range.
- `pagein.make_resident`: every page of those files and ranges is read once (``mincore`` says
  which are missing), so that a worker's read finds each page cached already. Most of the set
  (`ReadSet.fixed`) is known before any import: a helper process scans it, reads its pages and
  makes its rules while the zygote imports torch (``prefetch.py``).
- `build_layer`: a Landlock ruleset allowing reads of exactly those files (and of /proc, /sys,
  /dev and the scratch root, which have no pages on a disk), made once here; each worker restricts
  itself with it (`restrict`) beside its own Landlock layer, one system call per worker. It
  handles execution too and allows it nowhere: a program a worker ran would be read from disk.

`prepare(pages=False)` builds the read set and its layer without the residency: for a sandbox that
grades one submission whose author runs code of their own on this machine anyway (``grader check``,
``grader ci``, the notebook), where the page cache carries nothing the author could not send unjailed.

What stays open (README, "What timing still leaks"): the host evicting pages under memory
pressure, and the metadata caches (a first ``stat`` of a path is slower than the next).

Standard library only: imported by the zygote and, as a neighbour of ``jail.py``, by the worker.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import stat
import sys
import time
from dataclasses import dataclass, field

try:
    from grader.sandbox.jail import landlock, pagein, requires
except ImportError:  # beside jail.py, run as a script
    import landlock  # type: ignore[no-redef,import-not-found]
    import pagein  # type: ignore[no-redef,import-not-found]
    import requires  # type: ignore[no-redef,import-not-found]

STDLIB_LEFT_OUT = ("site-packages", "dist-packages", "test", "idlelib", "tkinter", "turtledemo",
                   "ensurepip", "lib2to3", "__phello__")
"""Parts of the standard library no graded code imports (its test suite alone is 120 MB)."""
VIRTUAL = ("/proc", "/sys", "/dev")
"""File systems without pages on a disk: never in the read set (`build_layer` says what of them a
worker reads)."""
WHOLE = ("torch",)
"""Packages whose sources a worker may read too: torch imports many of its modules lazily, on first
use, and reads some of their sources then (its config modules, through inspect). Every compiled
module of a package the zygote imported from may be imported (numpy's too), and of those of the
distributions torch requires (`requires.required_packages`: sympy, which the meta device's first
op imports, mpmath, networkx, ...), imported by the zygote or not."""
PYC = f".{sys.implementation.cache_tag}.pyc"
NO_MODULES = ("include", "share", "bin", "lib", "test", "tests")
"""Folders of a package not searched for modules: C headers, build files, libraries (mapped, not
imported), test suites."""
EXTENSIONS = tuple(s for s in importlib.machinery.EXTENSION_SUFFIXES if s != ".so")
"""Extension-module suffixes with the interpreter's tag: not torch's plain ``lib*.so`` libraries."""

LAYER_FD: int | None = None
"""The Landlock ruleset this zygote built (`build_layer`), inherited by every fork; a worker
restricts itself with it and closes it before any student code runs."""
_opened: set[str] = set()
_recording = False


def record_opens() -> None:
    """Note every file this process (the zygote) opens from now on: the data files importing torch
    reads (package metadata, say) are read again by lazy imports. A worker stops it (`restrict`)."""
    global _recording

    def hook(event: str, args: tuple) -> None:
        if _recording and event == "open" and args and isinstance(args[0], str):
            _opened.add(args[0])

    _recording = True
    sys.addaudithook(hook)


@dataclass
class ReadSet:
    """What a worker may read, and what it can read through mappings it inherits."""

    files: dict[str, int] = field(default_factory=dict)
    """Regular files a worker may open (read only) -> their size."""
    folders: set[str] = field(default_factory=set)
    """Folders a worker may list (beneath each); their files are in `files` or not readable."""
    file_folders: set[str] = field(default_factory=set)
    """Folders (``__pycache__``) all of whose files are in `files`: one rule instead of many."""
    mapped: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    """File -> (offset, length) of each range mapped into this process."""
    read_already: set[str] = field(default_factory=set)
    """Files of `files` this process read whole a moment ago (its imports), or the helper read
    (``prefetch.py``): resident already."""
    trees: set[str] = field(default_factory=set)
    """Folders scanned whole already (`fixed`): not scanned again."""

    @classmethod
    def fixed(cls, hidden: tuple[str, ...] = (), libraries: tuple[str, ...] = ()) -> ReadSet:
        """The part known before this process imports anything: the standard library, the `WHOLE`
        packages and those of the distributions they require (found, not imported), and every
        file of `libraries`; nothing at or below `hidden`."""
        out = cls()
        for top in sorted(_fixed_tops()):
            if os.path.isdir(top):
                out._add_tree(top, sources=os.path.basename(top) in WHOLE)
                out.trees.add(top)
            else:
                out._add(top)  # a one-file module's compiled file
        for top in libraries:
            out._add_tree(top, every_file=True)
            out.trees.add(top)
        out._leave_out(hidden + VIRTUAL)
        return out

    def to_json(self) -> dict:
        return {"files": self.files, "folders": sorted(self.folders), "file_folders": sorted(self.file_folders),
                "trees": sorted(self.trees)}

    @classmethod
    def from_json(cls, d: dict) -> ReadSet:
        return cls(files={str(k): int(v) for k, v in d["files"].items()}, folders=set(d["folders"]),
                   file_folders=set(d["file_folders"]), trees=set(d["trees"]))

    @classmethod
    def of_this_process(cls, hidden: tuple[str, ...] = (), libraries: tuple[str, ...] = (),
                        base: ReadSet | None = None) -> ReadSet:
        """From what this process imported, opened and mapped, and every file of `libraries`
        (folders on the workers' sys.path that this process does not import from); nothing at or
        below `hidden`. `base`: `fixed` made already (by the helper), only added to."""
        out = cls() if base is None else cls(dict(base.files), set(base.folders), set(base.file_folders),
                                             read_already=set(base.read_already), trees=set(base.trees))
        stdlib = os.path.dirname(os.path.realpath(os.__file__))
        entries = sorted({os.path.realpath(p) for p in sys.path if p and os.path.isabs(p)}, key=len, reverse=True)
        whole: set[str] = set()
        for module in list(sys.modules.values()):
            source = getattr(module, "__file__", None)
            if not isinstance(source, str) or not os.path.isabs(source):
                continue
            cached = getattr(module, "__cached__", None)
            out._add(cached if isinstance(cached, str) and os.path.isfile(cached) else source)
            top = _top_folder(source, entries, stdlib)
            if top and os.path.isdir(top):
                whole.add(top)
        if base is None:
            fixed = cls.fixed(hidden, libraries)
            whole -= fixed.trees
            out.files.update(fixed.files)
            out.folders |= fixed.folders
            out.file_folders |= fixed.file_folders
        for top in sorted(whole - out.trees):
            out._add_tree(top, sources=os.path.basename(top) in WHOLE)
        for p in list(_opened):
            out._add(p)
        out.read_already |= {p for p in _opened if p.endswith(PYC)} & out.files.keys()
        out.mapped = _mapped_ranges()
        out._leave_out(hidden + VIRTUAL)
        return out

    def _add(self, path: str) -> None:
        if path not in self.files:
            try:
                st = os.stat(path)
            except OSError:
                return
            if stat.S_ISREG(st.st_mode):
                self.files[path] = st.st_size

    def _add_tree(self, top: str, *, every_file: bool = False, sources: bool = False) -> None:
        """Every compiled and extension module (`sources`: and source; `every_file`: every file) below
        the folder `top`, which becomes listable (a one-file module: its compiled file, added with
        the imported ones)."""
        if not os.path.isdir(top):
            return
        if os.path.basename(top) != "__pycache__":
            self.folders.add(top)
        todo = [top]
        while todo:
            folder = todo.pop()
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            kept = 0
            for e in entries:
                if e.is_dir(follow_symlinks=False):
                    if e.name not in NO_MODULES:
                        todo.append(e.path)
                elif (every_file or e.name.endswith(PYC) or e.name.endswith(EXTENSIONS)
                      or (sources and e.name.endswith(".py"))):
                    self.files.setdefault(e.path, -1)  # its size: read when it is made resident
                    kept += 1
            if kept and kept == len(entries) and os.path.basename(folder) == "__pycache__":
                self.file_folders.add(folder)

    def _leave_out(self, hidden: tuple[str, ...]) -> None:
        exact, below = set(hidden), tuple(h.rstrip("/") + "/" for h in hidden)

        def inside(p: str) -> bool:
            return p in exact or p.startswith(below)

        self.files = {p: n for p, n in self.files.items() if not inside(p)}
        self.folders = {p for p in self.folders if not inside(p)}
        self.file_folders = {p for p in self.file_folders if not inside(p)}
        self.mapped = {p: r for p, r in self.mapped.items() if not inside(p)}

    @property
    def nbytes(self) -> int:
        """Bytes of file data this set makes resident (whole files, mapped ranges of the rest)."""
        total = sum(n for n in self.files.values() if n > 0)
        for path, ranges in self.mapped.items():
            if path not in self.files:
                total += sum(length for _, length in ranges)
        return total


def _top_folder(path: str, entries: list[str], stdlib: str) -> str | None:
    """The top-level package folder (or one-file module) of a module file below one of the sys.path
    `entries` (longest first): site-packages/torch/nn/functional.py -> site-packages/torch. None
    in the standard library's own top level (read whole, below) and outside every entry."""
    for entry in entries:
        if path.startswith(entry + "/"):
            if entry == stdlib:
                return None
            return entry + "/" + path[len(entry) + 1:].split("/")[0]
    return None


def _fixed_tops() -> set[str]:
    """The standard library's folders, the `WHOLE` packages' and those of the distributions they
    require (one-file modules: their compiled files), found without importing any of them."""
    stdlib = os.path.dirname(os.path.realpath(os.__file__))
    try:
        names = os.listdir(stdlib)
    except OSError:
        names = []
    tops = {os.path.join(stdlib, n) for n in names if n not in STDLIB_LEFT_OUT and not n.startswith("config-")}
    for name in WHOLE:
        spec = importlib.util.find_spec(name)  # a top-level package: found, not imported
        if spec is not None and spec.submodule_search_locations:
            tops.add(os.path.realpath(list(spec.submodule_search_locations)[0]))
    return tops | set(requires.required_packages(WHOLE))


def _mapped_ranges() -> dict[str, list[tuple[int, int]]]:
    out: dict[str, list[tuple[int, int]]] = {}
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) < 6 or not parts[5].startswith("/") or parts[5].rstrip().endswith("(deleted)"):
                continue
            start, end = (int(x, 16) for x in parts[0].split("-"))
            path = parts[5].rstrip("\n")
            out.setdefault(path, []).append((int(parts[2], 16), end - start))
    return {p: r for p, r in out.items() if os.path.isfile(p)}


# --- the Landlock layer ------------------------------------------------------------------------

READ = landlock.EXECUTE | landlock.READ_FILE | landlock.READ_DIR
"""What the layer handles: reading, listing, executing. Writes are the worker's own layer's."""


def layer_rules(rs: ReadSet, base: ReadSet | None = None) -> list[tuple[str, int]]:
    """The rules reading `rs.files` and listing `rs.folders` take (one per file, or per folder of
    `file_folders`); `base`: a part of `rs` whose rules exist already, left out."""
    one_rule = rs.file_folders
    old = base or ReadSet()
    return ([(p, landlock.READ_FILE) for p in sorted(one_rule - old.file_folders)]
            + [(p, landlock.READ_FILE) for p in sorted(rs.files.keys() - old.files.keys())
               if p.rpartition("/")[0] not in one_rule]
            + [(p, landlock.READ_DIR) for p in sorted(rs.folders - old.folders)])


def build_layer(rs: ReadSet, open_below: tuple[str, ...], devices: tuple[str, ...] = (),
                base: tuple[ReadSet, int] | None = None) -> int:
    """A Landlock ruleset (its fd): read `rs.files` and `devices`, list `rs.folders`, read and list
    all below `open_below` (/sys, the scratch root); execute nothing, read nothing else (/proc
    neither: a worker's own /proc is mounted after this is built, and no rule made here reaches it).

    Rules hold inodes: the device nodes bound into a worker's own /dev are the host's, so a rule
    on each node holds there; a folder rule does not reach through a mount made on top of it later.
    `base`: a part of `rs` and a ruleset (its fd) holding its rules already: the rest is added to it."""
    extra = [(d, landlock.READ_FILE) for d in devices] + [(p, landlock.READ_FILE | landlock.READ_DIR) for p in open_below]
    if base is None:
        return landlock.ruleset(layer_rules(rs) + extra, READ)
    landlock.add_rules(base[1], layer_rules(rs, base[0]) + extra, READ)
    return base[1]


def restrict() -> None:
    """In a worker (no-new-privileges set): restrict it with the zygote's layer and close the fd.
    Raises where there is none (a worker not forked from a zygote that built one)."""
    global LAYER_FD, _recording
    _recording = False
    if LAYER_FD is None:
        raise OSError("no resident-files layer was built in this process")
    fd, LAYER_FD = LAYER_FD, None
    try:
        landlock.restrict_with(fd)
    finally:
        os.close(fd)


def drop() -> None:
    """Close the layer's fd unused (a worker whose plan has no Landlock)."""
    global LAYER_FD
    if LAYER_FD is not None:
        os.close(LAYER_FD)
        LAYER_FD = None


_BASE: ReadSet | None = None
"""The part of the read set the helper made (``prefetch.py``), kept for a later `prepare`."""


def prepare(hidden: tuple[str, ...], open_below: tuple[str, ...], devices: tuple[str, ...] = (),
            libraries: tuple[str, ...] = (), *, pages: bool = True,
            prefetched: tuple[ReadSet, int] | None = None) -> dict:
    """In the zygote, after its imports: the read set, its pages made resident (not without
    `pages`), and its layer built (any previous one replaced). `prefetched`: `ReadSet.fixed` and
    its ruleset, from the helper (``prefetch.py``). Returns the summary the zygote reports (files,
    bytes, the bytes read, whether pages were made resident, seconds)."""
    global LAYER_FD, _BASE
    t0 = time.perf_counter()
    if prefetched is not None:
        _BASE = prefetched[0]
    try:
        rs = ReadSet.of_this_process(hidden, libraries, _BASE)
        res = pagein.make_resident(rs) if pages else None
        fd = build_layer(rs, open_below, devices, prefetched)
    except BaseException:
        if prefetched is not None:
            os.close(prefetched[1])
        raise
    if LAYER_FD is not None:
        os.close(LAYER_FD)
    LAYER_FD = fd
    return {"files": len(rs.files.keys() | rs.mapped.keys()), "bytes": res.nbytes if res else rs.nbytes,
            "read_bytes": res.read_bytes if res else 0, "pages": pages, "prefetched": prefetched is not None,
            "seconds": round(time.perf_counter() - t0, 3)}

"""Which inputs an ingest reads: files, directories (walked iteratively, to a bounded depth) and globs expanded
into regular files, and every entry that will not be read (FIFOs, sockets, devices, dangling symlinks, symlink
loops, unreadable or too-deep entries) with the reason, for `ingest_files`. Nothing here opens a file for data.
"""

from __future__ import annotations

import errno
import fnmatch
import glob
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from attribution.errors import InputError
from attribution.reader import STORE_MARKER, open_regular

__all__ = ["DOC_NAME_RE", "IGNORE_FILE", "MAX_DEPTH", "Skipped", "discover", "discover_inputs"]

_SKIP_DIRS = {".git", "__pycache__", ".ipynb_checkpoints"}
# Inside a directory being walked, documentation (which often quotes log lines) is passed over silently, and
# so is whatever a `.attributionignore` file (fnmatch patterns, one per line) names. A file named on the
# command line is always read.
IGNORE_FILE = ".attributionignore"
DOC_NAME_RE = re.compile(r"(?i)(\.(md|markdown|rst|html?|pdf|ipynb|py|sh|toml|ya?ml)$|^(license|licence|copying|notice)(\.|$))")
MAX_DEPTH = 100  # directory levels walked below a named directory; deeper ones are recorded, not walked


@dataclass(frozen=True)
class Skipped:
    """An input that is not read: not a regular file (a FIFO, socket or device, which could block or never
    end), a dangling symlink or a symlink loop, an unreadable entry, a directory nested too deep (status
    `skipped`), or a file gone between discovery and reading (`vanished`). `path` is the entry's own absolute
    path (a dangling link's, not its missing target's)."""

    path: str
    status: str
    reason: str


def _kind(p: Path) -> tuple[str, str]:
    """("file" | "dir" | "skipped" | "vanished", reason) for a path, from one stat (never an open)."""
    try:
        st = os.stat(p)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "skipped", "a symlink loop: not read"
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            if os.path.islink(p):
                try:
                    target = os.readlink(p)
                except OSError:
                    target = "?"
                return "skipped", f"a dangling symlink (its target {target} does not exist): not read"
            return "vanished", "deleted before it could be read"
        return "skipped", f"cannot read: {exc.strerror or exc}"
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        return "dir", ""
    if stat.S_ISREG(mode):
        return "file", ""
    what = ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")
    return "skipped", f"{what}: not read"


def discover(paths: list[str]) -> list[Path]:
    """The regular files of `discover_inputs` (what is skipped is left out)."""
    return discover_inputs(paths)[0]


def discover_inputs(paths: list[str]) -> tuple[list[Path], list[Skipped]]:
    """Expand directories (recursively; hidden entries, documentation and `.attributionignore` patterns
    skipped) and globs into a sorted list of regular files, and the inputs that will not be read (`Skipped`).
    The walk is iterative and bounded (MAX_DEPTH) and follows no directory symlink, so no layout makes it
    recurse without end; nothing is opened here."""
    out: dict[str, Path] = {}
    skipped: dict[str, Skipped] = {}

    def skip(p: Path, status: str, reason: str) -> None:
        path = os.path.abspath(p)
        skipped.setdefault(path, Skipped(path, status, reason))

    def add(f: Path) -> None:
        try:
            out.setdefault(str(f.resolve()), f)
        except (OSError, RuntimeError) as exc:  # a loop appearing after the stat (3.11 raises RuntimeError)
            skip(f, "skipped", f"cannot resolve: {exc}")

    for raw in paths:
        if any(ch in raw for ch in "*?["):
            matches = sorted(glob.glob(raw, recursive=True))
            if not matches:
                raise InputError(f"{raw}: the pattern matches no file")
            candidates = [Path(m) for m in matches]
        else:
            p = Path(raw)
            if not os.path.lexists(p):
                raise InputError(f"{raw}: no such file or directory")
            candidates = [p]
        for c in candidates:
            kind, reason = _kind(c)
            if kind == "dir":
                _walk(c, add, skip)
            elif kind == "file":
                add(c)
            else:
                skip(c, kind, reason)
    return [out[k] for k in sorted(out)], [skipped[k] for k in sorted(skipped)]


def _walk(top: Path, add: Callable[[Path], None], skip: Callable[[Path, str, str], None]) -> None:
    """Depth-first over `top` with an explicit stack (the same order as a sorted os.walk)."""
    ignored: list[tuple[Path, list[str]]] = []
    stack: list[tuple[Path, int]] = [(top, 0)]
    while stack:
        root, depth = stack.pop()
        try:
            with os.scandir(root) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            skip(root, "skipped" if os.path.lexists(root) else "vanished",
                 f"directory cannot be listed: {exc.strerror or exc}")
            continue
        names = {e.name for e in entries}
        if STORE_MARKER in names:  # never read a store (ours) as input
            continue
        if IGNORE_FILE in names:
            ignored.append((root, _ignore_patterns(root / IGNORE_FILE)))
        subdirs = []
        for e in entries:
            f = root / e.name
            if e.name.startswith("."):
                continue
            try:
                is_dir = e.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if is_dir:
                if e.name in _SKIP_DIRS:
                    continue
                if depth + 1 > MAX_DEPTH:
                    skip(f, "skipped", f"nested more than {MAX_DEPTH} directories below {top}: not walked")
                else:
                    subdirs.append(f)
                continue
            if DOC_NAME_RE.search(e.name) or _is_ignored(f, ignored):
                continue
            if e.is_symlink():
                kind, reason = _kind(f)
                if kind == "dir":  # a directory symlink is not followed (as os.walk does not)
                    continue
            else:
                kind, reason = ("file", "") if e.is_file(follow_symlinks=False) else _kind(f)
            if kind == "file":
                add(f)
            else:
                skip(f, kind, reason)
        stack.extend((d, depth + 1) for d in reversed(subdirs))


def _ignore_patterns(path: Path) -> list[str]:
    try:
        lines = open_regular(path).read().decode(errors="replace").splitlines()
    except OSError:  # an unreadable (or FIFO) ignore file ignores nothing
        return []
    return [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]


def _is_ignored(f: Path, ignored: list[tuple[Path, list[str]]]) -> bool:
    for base, patterns in ignored:
        try:
            rel = f.relative_to(base).as_posix()
        except ValueError:
            continue
        if any(fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(f.name, p) for p in patterns):
            return True
    return False



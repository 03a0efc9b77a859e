"""Names a learner chose, and the only way the grader turns them into paths.

A learner names files three ways: entries of the git trees they commit, files in the
folder they hand in, and (through both) the file names that warnings and reports quote.
The grader writes each snapshot into a sandbox's folder *as root* on course machines, so
a name is never trusted to say where it lands:

* ``problem_in_name`` says what is wrong with one path *component*.  Two classes:
  **structural** names that no honest tool makes and that would leave the folder or
  confuse git (empty, ``.``, ``..``, a ``/`` or NUL inside, ``.git`` in any case or in its
  NTFS/HFS disguises; ``git fsck`` rejects each) and **unprintable** names (control,
  format, bidi or line-separator characters, bytes that are not UTF-8), which can lie in a
  terminal or a CI log.  A commit holding a structural name anywhere the grader reads is
  refused as a whole; a file with an unprintable name is left out, and named escaped.
* ``check_relpath`` applies the rule to every component of a ``/``-separated relative path.
* ``safe_join`` is the one place a learner-supplied relative path becomes a path below a
  folder: it refuses what the rule refuses and what would not resolve below the folder.
* ``write_beneath`` creates a file below a folder with every folder on the way opened
  relative to its parent with ``O_NOFOLLOW`` -- no name and no link can make it write
  anywhere else, whatever raced it.
* ``shown`` escapes a name for people (warnings, left-out lists): what is unprintable
  appears as ``\\xNN``/``\\uNNNN``, never as itself.
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

MAX_NAME_BYTES = 255  # a file name's limit on Linux file systems
#: Characters that git (on HFS+) ignores inside a name: ``.g\u200cit`` is ``.git`` there.
_IGNORABLE = dict.fromkeys(map(ord, "\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                                    "\u206a\u206b\u206c\u206d\u206e\u206f\ufeff"))
_UNPRINTABLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp", "Co", "Cn"})

STRUCTURAL, UNPRINTABLE = "structural", "unprintable"


class UnsafeName(ValueError):
    """A learner-supplied name the grader refuses to turn into a path."""

    def __init__(self, name: str, why: str, kind: str):
        super().__init__(f"{shown(name)}: {why}")
        self.name, self.why, self.kind = name, why, kind


def is_dot_git(name: str) -> bool:
    """``.git`` as git itself would take it on any file system it protects: any case,
    trailing dots or spaces (NTFS), ignorable characters (HFS+), the 8.3 name ``git~1``."""
    folded = name.translate(_IGNORABLE).lower().rstrip(". ")
    return folded == ".git" or folded == "git~1"


def problem_in_name(name: str) -> tuple[str, str] | None:
    """(kind, why) when ``name`` cannot be one path component of a learner's files, else None."""
    if name == "":
        return STRUCTURAL, "an empty name"
    if name in (".", ".."):
        return STRUCTURAL, "'.' names the folder itself" if name == "." else "'..' names the parent folder"
    if "/" in name or "\0" in name:
        return STRUCTURAL, "a name with '/' or NUL inside is a path, not a name"
    if is_dot_git(name):
        return STRUCTURAL, "git reserves the name .git"
    try:
        raw = name.encode("utf-8")
    except UnicodeEncodeError:
        return UNPRINTABLE, "a name that is not UTF-8"
    if len(raw) > MAX_NAME_BYTES:
        return UNPRINTABLE, f"a name over {MAX_NAME_BYTES} bytes"
    if any(unicodedata.category(c) in _UNPRINTABLE_CATEGORIES for c in name):
        return UNPRINTABLE, "a name with control or invisible characters"
    return None


def check_relpath(rel: str) -> tuple[str, ...]:
    """The components of the relative path ``rel`` (``a/b/c.py``); UnsafeName if any
    component is refused (an absolute path has an empty first component)."""
    parts = tuple(rel.split("/"))
    for part in parts:
        problem = problem_in_name(part)
        if problem is not None:
            raise UnsafeName(rel, problem[1], problem[0])
    return parts


def safe_join(root: str | os.PathLike, rel: str) -> Path:
    """``root/rel`` for a learner-supplied ``rel``, after checking every component and that
    the result lies below ``root`` (UnsafeName otherwise).  Only the name is checked: to
    create the file without following links on the way, use ``write_beneath``."""
    parts = check_relpath(rel)
    base = os.path.normpath(os.fspath(root))
    joined = os.path.normpath(os.path.join(base, *parts))
    if os.path.commonpath([base, joined]) != base or joined == base:
        raise UnsafeName(rel, "a path that does not stay inside its folder", STRUCTURAL)
    return Path(joined)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def write_beneath(root: str | os.PathLike, rel: str, data: bytes, mode: int = 0o644) -> Path:
    """Create the new file ``root/rel`` holding ``data``: the name checked by ``safe_join``,
    each folder on the way made if missing and opened relative to its parent without
    following a link, the file created exclusively (an existing file or link is an error)."""
    path = safe_join(root, rel)
    parts = check_relpath(rel)
    fds = [os.open(os.fspath(root), _DIR_FLAGS)]
    try:
        for part in parts[:-1]:
            try:
                os.mkdir(part, 0o755, dir_fd=fds[-1])
            except FileExistsError:
                pass
            fds.append(os.open(part, _DIR_FLAGS, dir_fd=fds[-1]))
        fd = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                     mode, dir_fd=fds[-1])
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
    finally:
        for fd in reversed(fds):
            os.close(fd)
    return path


def shown(name: str) -> str:
    """``name`` for people: every unprintable character escaped (``\\x1b``, ``\\u202e``,
    ``\\udc80`` for a byte that was not UTF-8), everything else as it is."""
    out = []
    for c in name:
        if unicodedata.category(c) in _UNPRINTABLE_CATEGORIES or c == "\\":
            code = ord(c)
            out.append("\\\\" if c == "\\" else f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
                       if code < 0x10000 else f"\\U{code:08x}")
        else:
            out.append(c)
    return "".join(out)

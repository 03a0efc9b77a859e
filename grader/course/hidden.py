"""Where the hidden checks come from: the course's ``solutions/`` or a private SOURCE.

``grade ci --hidden SOURCE`` and ``grade batch --hidden SOURCE`` accept a folder or a
tarball (``.tar``, ``.tar.gz``, ``.tgz``, ``.tar.xz``) that the course keeps private.  Either
holds ``<exercise dir>/test_hidden.py`` -- at its top, under ``solutions/``, or under one
top-level folder (what ``git archive --prefix`` or a GitHub tarball produces) -- and, beside
each, the reference solution (``<exercise dir>/<learner file>``): compile checks judge a
submission against what the reference costs for the same calls.  Without it those checks
fall back to attributing compilations (``grader.testing``).

``open_hidden`` yields a folder that only this user can read: a tarball is unpacked into a
fresh private temporary folder (members that would land outside it are refused), and a
folder is used in place.  ``digest`` names a set of hidden checks, so results graded with
different hidden checks are never mistaken for one another.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import tarfile
from collections.abc import Iterator
from pathlib import Path

from grader.manifest import HIDDEN_CHECKS
from grader.sandbox import scratch

TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.xz", ".tar.bz2")


class HiddenSourceError(ValueError):
    """The hidden SOURCE is missing or unusable; the message says what to do."""


def holds_hidden_checks(folder: Path) -> bool:
    """Whether ``folder`` directly holds ``<exercise dir>/test_hidden.py`` files."""
    return folder.is_dir() and any(folder.glob(f"*/{HIDDEN_CHECKS}"))


def find_root(folder: Path) -> Path:
    """The folder under ``folder`` that directly holds ``<exercise dir>/test_hidden.py``."""
    candidates = [folder, folder / "solutions"]
    subdirs = [p for p in folder.iterdir() if p.is_dir()] if folder.is_dir() else []
    if len(subdirs) == 1:
        candidates += [subdirs[0], subdirs[0] / "solutions"]
    for c in candidates:
        if holds_hidden_checks(c):
            return c
    raise HiddenSourceError(
        f"{folder} holds no hidden checks: expected <exercise dir>/{HIDDEN_CHECKS} at its top or under solutions/"
    )


@contextlib.contextmanager
def open_hidden(source: Path) -> Iterator[Path]:
    source = Path(source)
    if not source.exists():
        raise HiddenSourceError(f"the hidden checks source {source} does not exist")
    if source.is_dir():
        yield find_root(source)
        return
    if not source.name.endswith(TAR_SUFFIXES):
        raise HiddenSourceError(f"{source} is neither a folder nor a tarball ({', '.join(TAR_SUFFIXES)})")
    tmp = scratch.make("hidden")  # mode 0700: no other user can look in
    try:
        try:
            with tarfile.open(source) as tar:
                tar.extractall(tmp, filter="data")  # refuses absolute paths, `..` and links out
        except (tarfile.TarError, OSError) as exc:
            raise HiddenSourceError(f"could not unpack {source}: {exc}") from None
        yield find_root(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def digest(root: Path) -> str:
    """A short hash of what grading reads from ``root`` (names and contents): every hidden
    check file and every Python file beside it -- the reference solutions, whose costs
    compile checks are judged against."""
    h = hashlib.sha256()
    for path in sorted({*root.glob(f"*/{HIDDEN_CHECKS}"), *(p for d in root.glob(f"*/{HIDDEN_CHECKS}")
                                                            for p in d.parent.glob("*.py"))}):
        h.update(f"{path.parent.name}/{path.name}".encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]

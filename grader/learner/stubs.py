"""The exercises' original stubs, and `grade reset`.

A learner works in the stub itself (``exercises/<dir>/<file>``), so the original must
come from elsewhere: ``grade release`` keeps a copy of every stub under
``.grade/stubs/<dir>/<file>`` in the learners' repository.  In the course's own
repository the stubs in ``exercises/`` are the originals; an edited one comes back from
git's HEAD there.

``grade reset N`` never loses work: each learner file that differs from its stub is moved
to ``.grade/backups/<dir>/<file>.<time>`` (git ignores the backups) before the stub is
written back, and the command prints where.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path

STUBS = Path(".grade") / "stubs"
BACKUPS = Path(".grade") / "backups"


class ResetError(Exception):
    """The stub cannot be brought back; the message says why and what to do instead."""


def pristine_file(root: Path, ex, name: str) -> bytes | None:
    """The original stub of the learner file ``name`` of ``ex`` in the checkout ``root``."""
    kept = Path(root) / STUBS / ex.dir / name
    if kept.is_file() and not kept.is_symlink():
        return kept.read_bytes()
    if (Path(root) / "solutions").is_dir() and (Path(root) / ".git").exists():  # the course's own repository
        from grader.gitsafe import in_course_repository

        return in_course_repository(root, "show", f"HEAD:exercises/{ex.dir}/{name}")
    return None


def pristine(root: Path, ex) -> bytes | None:
    """The original stub of ``ex``'s first learner file (None when there is no copy)."""
    return pristine_file(root, ex, ex.module_file)


def reset(root: Path, ex) -> list[tuple[Path, Path]]:
    """Write ``ex``'s stubs back; returns (file, backup) for each file that was replaced."""
    root = Path(root)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    done = []
    for name in ex.files:
        original = pristine_file(root, ex, name)
        if original is None:
            raise ResetError(f"no original of exercises/{ex.dir}/{name} here (no {STUBS}/ folder from the release); "
                             f"restore it from git: `git log -- exercises/{ex.dir}/{name}` shows its history")
        target = root / "exercises" / ex.dir / name
        if target.is_symlink() or (target.exists() and not target.is_file()):
            raise ResetError(f"{target} is not a plain file; move it away first")
        if target.is_file() and target.read_bytes() == original:
            continue
        if target.is_file():
            backup = root / BACKUPS / ex.dir / f"{name}.{stamp}"
            backup.parent.mkdir(parents=True, exist_ok=True)
            os.replace(target, backup)
        else:
            backup = Path("(there was no file)")
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{name}.reset")
        tmp.write_bytes(original)
        os.replace(tmp, target)
        done.append((target, backup))
    return done

"""`grade gradescope-bundle OUT.zip`: the autograder zip a Gradescope assignment takes.

Gradescope unpacks the zip into ``/autograder/source``, runs ``setup.sh`` once to build
the image, then ``run_autograder`` for every submission (the submission is in
``/autograder/submission``; the result goes to ``/autograder/results/results.json``).
The zip holds::

    setup.sh, run_autograder      from grader/templates/gradescope-*
    pyproject.toml, README.md     so `pip install .` installs the grader and its pinned JAX
    grader/**.py, grader/templates/*
    exercises/manifest.toml, exercises/<dir>/test_public.py
    hidden/<dir>/test_hidden.py   the hidden checks
    hidden/<dir>/<learner files>  the reference solution: compile checks judge a submission's
                                  compilations against what it costs for the same calls, in a
                                  sandbox of the same kind (grader.testing)

As root (Gradescope runs ``run_autograder`` as root), the hidden folder is closed to the
sandbox users, like the hidden checks: learner code cannot read the reference.  Fixtures
are never in the zip.  The zip is reproducible: entries are sorted and dated 1980-01-01, so
the same course gives the same bytes.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from grader.manifest import HIDDEN_CHECKS
from grader.manifest import Manifest

TEMPLATES = Path(__file__).resolve().parents[1] / "templates"  # grader/templates
_EPOCH = (1980, 1, 1, 0, 0, 0)
_README = ("# Autograder\n\nBuilt by `grade gradescope-bundle` for Gradescope. `setup.sh` installs the grader; "
           "`run_autograder` grades one submission with the bundled hidden checks.\n")


def bundle_entries(course: Path, manifest: Manifest, hidden_root: Path) -> dict[str, tuple[bytes, bool]]:
    """Zip path -> (content, executable), for everything the bundle holds."""
    entries: dict[str, tuple[bytes, bool]] = {
        "setup.sh": ((TEMPLATES / "gradescope-setup.sh").read_bytes(), True),
        "run_autograder": ((TEMPLATES / "gradescope-run_autograder").read_bytes(), True),
        "pyproject.toml": ((course / "pyproject.toml").read_bytes(), False),
        "README.md": (_README.encode(), False),
        "exercises/manifest.toml": (manifest.path.read_bytes(), False),
    }
    package = Path(__file__).resolve().parents[1]  # the grader that runs this, wherever the course is
    for path in sorted(package.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and (path.suffix == ".py" or "templates" in path.parts):
            entries[f"grader/{path.relative_to(package)}"] = (path.read_bytes(), False)
    for ex in manifest.exercises:
        public = ex.public_checks(course)
        if public.is_file():
            entries[str(public.relative_to(course))] = (public.read_bytes(), False)
        hidden = ex.hidden_checks(hidden_root)
        if not hidden.is_file():
            raise FileNotFoundError(f"exercise {ex.number} has no hidden checks at {hidden}")
        entries[f"hidden/{ex.dir}/{HIDDEN_CHECKS}"] = (hidden.read_bytes(), False)
        for name in ex.files:  # the reference solution, where the hidden root has it
            reference = hidden_root / ex.dir / name
            if reference.is_file():
                entries[f"hidden/{ex.dir}/{name}"] = (reference.read_bytes(), False)
    return entries


def write_bundle(out: Path, entries: dict[str, tuple[bytes, bool]]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(entries):
            data, executable = entries[name]
            info = zipfile.ZipInfo(name, date_time=_EPOCH)
            info.external_attr = (0o100755 if executable else 0o100644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)

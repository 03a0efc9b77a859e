"""What every `grade` command module shares: exit codes, the course, its manifest.

The exit codes are documented in ``grader.cli`` and the README.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from grader.manifest import ManifestError, load

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_CANNOT_GRADE, EXIT_GRADER_ERROR = 0, 1, 2, 3, 4


def course_root() -> Path:
    """The course: manifest, public checks, and (by default) solutions/ with the hidden checks.

    The checkout the grader is installed from, unless GRADER_COURSE names another.
    """
    return Path(os.environ.get("GRADER_COURSE") or Path(__file__).resolve().parents[1]).resolve()


class GraderCrash(click.ClickException):
    exit_code = EXIT_CANNOT_GRADE


def _manifest(course: Path):
    try:
        return load(course / "exercises" / "manifest.toml")
    except ManifestError as exc:
        raise GraderCrash(f"the exercise manifest is broken: {exc}") from None


def check_numbers(manifest, numbers) -> None:
    """Unknown exercise numbers are a usage error that lists the known ones."""
    for n in numbers:
        try:
            manifest.get(n)
        except KeyError as exc:
            raise click.UsageError(str(exc.args[0])) from None

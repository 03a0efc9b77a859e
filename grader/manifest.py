"""The exercise manifest: ``exercises/manifest.toml``, loaded into frozen dataclasses.

One file describes every exercise; the CLI, ``grade verify`` and the tests all read it
through ``load``.  Format (``format_version = 1``)::

    format_version = 1

    [[exercise]]
    number = 3                         # what `grade exercise 3` means; 1..N, unique
    slug = "per-example-grad-norms"    # stable id for scripts and fixtures
    dir = "03_per_example_grad_norms"  # folder under exercises/ (and solutions/, fixtures/)
    title = "Per-example gradient norms"
    files = ["grad_norms.py"]          # the learner's file(s); the first is imported
    timeout_s = 90                     # wall-clock budget for the whole exercise
    memory_mb = 4096                   # address-space cap of the learner's process
    cpu_devices = 1                    # simulated CPU devices the exercise needs
    clean_worker = false               # checks need a second, learner-free JAX process
                                       # (`truth` fixture), started alongside the sandbox
    hints = ["first nudge", "stronger nudge", ...]   # >= 2, shown one per `grade hint`
                                       # or, for an exercise in parts, one list per part:
                                       #   [exercise.hints]
                                       #   A = ["nudge", ..., "near-answer"]
                                       #   B = [...]            (`grade hint N --part B`)

      [[exercise.checks]]
      name = "matches_one_at_a_time"   # pytest test `test_<name>` (parametrized is fine)
      visibility = "hidden"            # "public": exercises/<dir>/test_public.py
                                       # "hidden": solutions/<dir>/test_hidden.py
      points = 3                       # public checks carry 0 points (see below)
      summary = "one line saying what the check verifies"
      feedback = "what a learner reads when it fails"  # hidden checks only, required:
                                       # written for the check, it names no input and no
                                       # expected value (what the test measured goes to
                                       # the instructor only, see grader.results)
      requires = ["matches_one_at_a_time"]   # optional: scores only once these pass
      part = "A"                       # optional: the part of the exercise it checks
      measured = true                  # optional, default true: the verdict rests on what
                                       # was measured inside the learner's process (compile
                                       # counts, jaxprs, HLO, timings); false for a check
                                       # that only compares returned values with the
                                       # grader's own reference

``requires`` keeps structural checks honest: "compiles once" or "no Python loop" is
vacuously true of ``return jnp.zeros(B)``, so such checks score only when the checks
proving the function right have passed too (otherwise they are ``blocked``).

``measured`` says what an accusation costs: when the sandbox's integrity guard accuses the
learner's code of an action aimed at the grader or its meter (code claiming a library's
file name, a swapped ``__code__``, one of the grader's frames, ...), every measured check
of the exercise scores 0, because what was measured in that process can no longer be
trusted; checks that only compare returned values with the grader's own reference keep
their verdict -- except after an accusation that JAX compiled another program than it traced
(a rule of one of JAX's own primitives replaced: ``outcomes.VOIDS_EVERY_CHECK``), which voids
every check.  What the guard refuses quietly (a subprocess, a gc walk, ...) costs
nothing by itself.

Public checks carry no points: learners can read them, so a submission tuned to their
inputs must not earn anything.  Every property a public check tests is re-tested by a
hidden check on inputs drawn at grading time, and only hidden checks score.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path

FORMAT_VERSION = 1
PUBLIC_CHECKS, HIDDEN_CHECKS = "test_public.py", "test_hidden.py"  # an exercise's check files
VISIBILITIES = ("public", "hidden")
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class ManifestError(ValueError):
    pass


@dataclasses.dataclass(frozen=True)
class Check:
    name: str
    visibility: str
    points: int
    summary: str
    requires: tuple[str, ...] = ()
    feedback: str = ""
    part: str = ""
    measured: bool = True


@dataclasses.dataclass(frozen=True)
class Exercise:
    number: int
    slug: str
    dir: str
    title: str
    files: tuple[str, ...]
    timeout_s: float
    memory_mb: int
    cpu_devices: int
    hints: tuple[str, ...]
    checks: tuple["Check", ...]
    clean_worker: bool = False
    hint_parts: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (part, its hints); one ("", hints) if unsplit

    @property
    def module_file(self) -> str:
        return self.files[0]

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(part for part, _ in self.hint_parts if part)

    def hints_for(self, part: str = "") -> tuple[str, ...]:
        """The hints of ``part`` (all of them, in order, when ``part`` is empty)."""
        if not part:
            return self.hints
        for name, hints in self.hint_parts:
            if name.lower() == part.lower():
                return hints
        known = ", ".join(self.parts) or "none: its hints are not split by part"
        raise KeyError(f"exercise {self.number} has no part {part!r} (parts: {known})")

    @property
    def max_score(self) -> int:
        return sum(c.points for c in self.checks)

    def public_checks(self, course_root: Path) -> Path:
        return course_root / "exercises" / self.dir / PUBLIC_CHECKS

    def hidden_checks(self, hidden_root: Path) -> Path:
        """Where the hidden checks are in a folder of them (normally the course's solutions/)."""
        return hidden_root / self.dir / HIDDEN_CHECKS

    def learner_paths(self, root: Path) -> list[Path]:
        """Paths of the learner's files in a submission rooted at ``root``.

        A fork of the learners' repository holds them at ``exercises/<dir>/<file>``.  A
        submission without that layout (files uploaded to Gradescope, say) is searched for
        each file by name; the shallowest match wins, and a missing file keeps its usual path
        (the grader then says it was not found there)."""
        usual = [root / "exercises" / self.dir / f for f in self.files]
        if (root / "exercises").is_dir() or not root.is_dir():
            return usual
        found = []
        for path, name in zip(usual, self.files):
            matches = sorted((p for p in root.rglob(name) if ".git" not in p.parts and p.is_file()),
                             key=lambda p: (len(p.parts), str(p)))
            found.append(matches[0] if matches else path)
        return found


@dataclasses.dataclass(frozen=True)
class Manifest:
    format_version: int
    exercises: tuple[Exercise, ...]
    path: Path

    def get(self, number: int) -> Exercise:
        for ex in self.exercises:
            if ex.number == number:
                return ex
        known = ", ".join(str(e.number) for e in self.exercises)
        raise KeyError(f"there is no exercise {number}; the exercises are {known} (see `grade list`)")


def _req(table: dict, key: str, typ, where: str):
    if key not in table:
        raise ManifestError(f"{where}: missing field `{key}`")
    value = table[key]
    if typ is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
        raise ManifestError(f"{where}: `{key}` should be {typ.__name__}, got {type(value).__name__}")
    return value


def _hint_parts(raw: dict, where: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``hints`` as ((part, hints), ...): a list is one unnamed part, a table names its parts."""
    if "hints" not in raw:
        raise ManifestError(f"{where}: missing field `hints`")
    value = raw["hints"]
    table = value if isinstance(value, dict) else {"": value}
    out = []
    for part, hints in table.items():
        if not isinstance(hints, list) or not all(isinstance(h, str) for h in hints):
            raise ManifestError(f"{where}: the hints{f' of part {part}' if part else ''} should be a list of strings")
        out.append((str(part), tuple(hints)))
    return tuple(out)


def parse(data: dict, path: Path) -> Manifest:
    version = data.get("format_version")
    if version != FORMAT_VERSION:
        raise ManifestError(f"{path}: format_version is {version!r}; this grader reads version {FORMAT_VERSION}")
    exercises = []
    for i, raw in enumerate(data.get("exercise", [])):
        where = f"{path.name}: exercise #{i + 1}"
        checks = []
        for j, rc in enumerate(raw.get("checks", [])):
            cw = f"{where}, check #{j + 1}"
            name = _req(rc, "name", str, cw)
            if not _NAME.match(name):
                raise ManifestError(f"{cw}: check name {name!r} must be lower_snake_case")
            vis = _req(rc, "visibility", str, cw)
            if vis not in VISIBILITIES:
                raise ManifestError(f"{cw}: visibility must be one of {VISIBILITIES}, got {vis!r}")
            points = _req(rc, "points", int, cw)
            if vis == "public" and points != 0:
                raise ManifestError(f"{cw}: public checks carry 0 points (hidden checks score)")
            if points < 0:
                raise ManifestError(f"{cw}: points must be >= 0")
            requires = tuple(rc.get("requires", []))
            feedback = _req(rc, "feedback", str, cw) if vis == "hidden" else ""
            if vis == "public" and "feedback" in rc:
                raise ManifestError(f"{cw}: `feedback` is for hidden checks; public checks explain their failures")
            measured = rc.get("measured", True)
            if not isinstance(measured, bool):
                raise ManifestError(f"{cw}: `measured` should be true or false")
            checks.append(Check(name=name, visibility=vis, points=points, summary=_req(rc, "summary", str, cw),
                                requires=requires, feedback=feedback, part=str(rc.get("part", "")),
                                measured=measured))
        names = [c.name for c in checks]
        if len(set(names)) != len(names):
            raise ManifestError(f"{where}: duplicate check names")
        for c in checks:
            unknown = [r for r in c.requires if r not in names or r == c.name]
            if unknown:
                raise ManifestError(f"{where}: check {c.name!r} requires unknown check(s) {unknown}")
        files = tuple(_req(raw, "files", list, where))
        if not files or not all(isinstance(f, str) and f.endswith(".py") for f in files):
            raise ManifestError(f"{where}: `files` must list the learner's .py file(s)")
        hint_parts = _hint_parts(raw, where)
        hints = tuple(h for _, part_hints in hint_parts for h in part_hints)
        parts = {p for p, _ in hint_parts if p}
        for c in checks:
            if c.part and c.part not in parts:
                raise ManifestError(f"{where}: check {c.name!r} is in part {c.part!r}, which has no hints")
        exercises.append(
            Exercise(
                number=_req(raw, "number", int, where),
                slug=_req(raw, "slug", str, where),
                dir=_req(raw, "dir", str, where),
                title=_req(raw, "title", str, where),
                files=files,
                timeout_s=_req(raw, "timeout_s", float, where),
                memory_mb=_req(raw, "memory_mb", int, where),
                cpu_devices=int(raw.get("cpu_devices", 1)),
                hints=hints,
                checks=tuple(checks),
                clean_worker=bool(raw.get("clean_worker", False)),
                hint_parts=hint_parts,
            )
        )
    numbers = [e.number for e in exercises]
    if len(set(numbers)) != len(numbers):
        raise ManifestError(f"{path}: exercise numbers must be unique")
    return Manifest(format_version=version, exercises=tuple(sorted(exercises, key=lambda e: e.number)), path=path)


def load(path: Path) -> Manifest:
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ManifestError(f"no manifest at {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"{path}: {exc}") from None
    return parse(data, Path(path))

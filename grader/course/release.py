"""`grade release OUT`: build the repository learners fork, and prove it gives nothing away.

What goes in is an allowlist; nothing else is ever copied:

* ``exercises/manifest.toml``; for each exercise ``exercises/<dir>/README.md`` (the
  statement), the learner file(s) the manifest lists (the stubs) and ``test_public.py``;
* the grader: ``grader/**/*.py`` (no ``__pycache__``) and ``grader/templates/*``;
* the course's ``pyproject.toml`` and ``.gitignore``;
* a copy of every stub under ``.grade/stubs/`` (what ``grade reset`` brings back);
* from ``grader/templates/``: ``README.md`` (``learner-README.md``, filled in from the
  manifest), ``Makefile`` (``learner-Makefile``) and ``.github/workflows/grade.yml``
  (``learner-workflow.yml``: public checks on every push, with a summary table);
* ``RELEASE.json``: ``{"format_version": 1, "grader_version", "course_commit", "files":
  [{"path", "sha256", "bytes"}]}``, every other released file, sorted by path.  It holds
  no date, so the same course always gives the same release.

Files under ``exercises/`` that the allowlist does not name are left out and listed in
the report (``ReleaseReport.left_out``), so an instructor notices a data file a statement
needs.  Everything else -- ``solutions/`` (reference solutions, hidden checks),
``fixtures/`` (known-wrong submissions, cheats), ``tests/``, ``.ci/`` -- stays behind.

Before anything lands in OUT the staged release is scanned for leaks (``find_leaks``):

* no file lies under, or is byte-for-byte equal to a file of, ``solutions/``,
  ``fixtures/``, ``tests/`` or ``.ci/``;
* no function in a released ``.py`` file has the body (its statements as ``ast.dump``
  gives them, docstring left out) of a function in ``solutions/`` or ``fixtures/``.
  Bodies that only ``pass``, ``...`` or ``raise NotImplementedError`` say nothing, and
  code the stubs themselves give the learner (e.g. a model they must not change) is not
  secret; ``grade verify`` separately proves that every stub scores 0;
* no released file contains the text of a hidden check file, or the text of a secret
  function body of at least ``MIN_TEXT_CHARS`` characters (whitespace collapsed), so a
  body pasted into a README or a string is caught too.

A leak refuses the release (exit 1) and OUT is left untouched.  The scan compares code,
not meaning: a renamed or rewritten copy of a solution passes it.

OUT must be absent or empty; ``force=True`` replaces its contents but keeps ``OUT/.git``,
so a release can be rebuilt inside a clone of the learners' repository and committed.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from grader.manifest import HIDDEN_CHECKS, PUBLIC_CHECKS, Manifest, ManifestError, load

RELEASE_FORMAT_VERSION = 1
TEMPLATES = Path(__file__).resolve().parents[1] / "templates"  # grader/templates
#: Folders of the course that never go out, not even one file of them.
SECRET_DIRS = ("solutions", "fixtures", "tests", ".ci")
#: Folders whose Python function bodies are secret (reference solutions, hidden checks, fixtures).
BODY_DIRS = ("solutions", "fixtures")
MIN_TEXT_CHARS = 60
MIN_BODY_NODES = 5
WORKFLOW_PATH = ".github/workflows/grade.yml"
MANIFEST_NAME = "RELEASE.json"

EXIT_OK, EXIT_LEAK, EXIT_USAGE, EXIT_BROKEN_COURSE = 0, 1, 2, 3


class ReleaseError(Exception):
    """The release was not written; the message says why and what to do."""

    exit_code = EXIT_USAGE


class CourseError(ReleaseError):
    """The course itself is incomplete (a file the manifest promises is missing)."""

    exit_code = EXIT_BROKEN_COURSE


class LeakError(ReleaseError):
    exit_code = EXIT_LEAK

    def __init__(self, leaks: list[Leak]):
        self.leaks = leaks
        shown = "\n".join(f"  {leak}" for leak in leaks[:20])
        more = f"\n  ... and {len(leaks) - 20} more" if len(leaks) > 20 else ""
        super().__init__(f"the release would give away course material, so nothing was written:\n{shown}{more}")


@dataclasses.dataclass(frozen=True)
class ReleasedFile:
    path: str  # relative to the release root, with "/"
    sha256: str
    bytes: int


@dataclasses.dataclass(frozen=True)
class ReleaseReport:
    out: Path
    grader_version: str
    course_commit: str | None
    files: tuple[ReleasedFile, ...]
    left_out: tuple[str, ...]  # files under exercises/ the allowlist does not name

    def to_dict(self) -> dict:
        return {
            "format_version": RELEASE_FORMAT_VERSION,
            "grader_version": self.grader_version,
            "course_commit": self.course_commit,
            "files": [dataclasses.asdict(f) for f in self.files],
        }


@dataclasses.dataclass(frozen=True)
class Leak:
    path: str  # the released file
    secret: str  # where the secret comes from: "solutions/<dir>/x.py::name" or a course file
    how: str  # "secret folder", "identical file", "function body", "text"

    def __str__(self) -> str:
        return f"{self.path}: {self.how} of {self.secret}"


# --- what goes in ----------------------------------------------------------------------

def _course_manifest(course: Path) -> Manifest:
    try:
        return load(course / "exercises" / "manifest.toml")
    except ManifestError as exc:
        raise CourseError(f"the exercise manifest is broken: {exc}") from None


def allowlist(course: Path, manifest: Manifest) -> list[tuple[Path, str]]:
    """(source in the course, path in the release) for every file copied as it is."""
    pairs: list[tuple[Path, str]] = [(course / "exercises" / "manifest.toml", "exercises/manifest.toml")]
    for ex in manifest.exercises:
        for name in ("README.md", *ex.files, PUBLIC_CHECKS):
            pairs.append((course / "exercises" / ex.dir / name, f"exercises/{ex.dir}/{name}"))
        for name in ex.files:  # the originals `grade reset` brings back (grader.learner.stubs)
            pairs.append((course / "exercises" / ex.dir / name, f".grade/stubs/{ex.dir}/{name}"))
    grader_dir = course / "grader"
    code = [p for p in grader_dir.rglob("*.py") if "__pycache__" not in p.relative_to(grader_dir).parts]
    templates = [p for p in (grader_dir / "templates").glob("*") if p.is_file()]
    for p in sorted(code + templates):
        pairs.append((p, p.relative_to(course).as_posix()))
    for name in ("pyproject.toml", ".gitignore"):
        pairs.append((course / name, name))
    missing = [rel for src, rel in pairs if not src.is_file()]
    if missing:
        raise CourseError("the course lacks files a release needs: " + ", ".join(missing))
    return pairs


def _left_out(course: Path, pairs: list[tuple[Path, str]]) -> tuple[str, ...]:
    taken = {rel for _, rel in pairs}
    found = (p.relative_to(course).as_posix() for p in (course / "exercises").rglob("*") if p.is_file())
    return tuple(sorted(r for r in found if r not in taken and "__pycache__" not in r))


def grader_version(course: Path) -> str:
    """``__version__`` of the course's grader package, read without importing it."""
    tree = ast.parse((course / "grader" / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        names = [t.id for t in getattr(node, "targets", ()) if isinstance(t, ast.Name)]
        if isinstance(node, ast.Assign) and "__version__" in names and isinstance(node.value, ast.Constant):
            return str(node.value.value)
    raise CourseError("grader/__init__.py defines no __version__")


def _course_commit(course: Path) -> str | None:
    from grader.gitsafe import in_course_repository

    out = in_course_repository(course, "rev-parse", "HEAD", timeout=10)
    return out.decode("ascii", "replace").strip() or None if out is not None else None


def _fill(template: str, values: dict[str, str]) -> str:
    """Replace ``@@name@@`` placeholders (GitHub's ``${{ }}`` stays as it is)."""
    text = (TEMPLATES / template).read_text(encoding="utf-8")
    for key, value in values.items():
        text = text.replace(f"@@{key}@@", value)
    if "@@" in text:
        start = text.index("@@")
        raise CourseError(f"grader/templates/{template}: unknown placeholder near {text[start:start + 40]!r}")
    return text


def readme_values(manifest: Manifest, version: str) -> dict[str, str]:
    rows = ["| # | exercise | your file | statement | points |", "|---|---|---|---|---|"]
    for ex in manifest.exercises:
        files = ", ".join(f"`exercises/{ex.dir}/{f}`" for f in ex.files)
        rows.append(f"| {ex.number} | {ex.title} | {files} | [README](exercises/{ex.dir}/README.md) | {ex.max_score} |")
    first = manifest.exercises[0]
    return {
        "exercise_table": "\n".join(rows),
        "exercise_count": str(len(manifest.exercises)),
        "total_points": str(sum(e.max_score for e in manifest.exercises)),
        "grader_version": version,
        "example_number": str(first.number),
        "example_dir": first.dir,
        "example_file": first.module_file,
    }


def _generated(manifest: Manifest, version: str) -> dict[str, str]:
    return {
        "README.md": _fill("learner-README.md", readme_values(manifest, version)),
        "Makefile": _fill("learner-Makefile", {}),
        WORKFLOW_PATH: _fill("learner-workflow.yml", {}),
    }


# --- the leak scan -------------------------------------------------------------------

def _body(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.stmt]:
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return body


def _says_nothing(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Pass):
        return True
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and stmt.value.value is Ellipsis:
        return True
    if isinstance(stmt, ast.Raise) and stmt.exc is not None:
        exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
        return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"
    return False


def body_key(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The function's body as ``ast.dump`` gives it (no docstring, no line numbers);
    ``None`` when it says nothing (``pass``, ``...``, ``raise NotImplementedError``) or too
    little to give anything away (``return False``, ``return self.x``: fewer than
    ``MIN_BODY_NODES`` syntax nodes), which any code may hold by coincidence."""
    body = _body(fn)
    if all(_says_nothing(s) for s in body):
        return None
    nodes = sum(1 for s in body for n in ast.walk(s) if not isinstance(n, ast.expr_context))
    if nodes < MIN_BODY_NODES:
        return None
    return "\n".join(ast.dump(s) for s in body)


def _squash(text: str) -> str:
    return " ".join(text.split())


def _functions(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


@dataclasses.dataclass
class Secrets:
    """What must not leave the course, indexed for the scan."""

    bodies: dict[str, str]  # body_key -> "solutions/<dir>/file.py::name"
    texts: dict[str, str]  # whitespace-collapsed text -> its origin
    digests: dict[str, str]  # sha256 of a secret file -> its path
    problems: list[str]  # secret .py files that could not be parsed (never silently skipped)


def secret_material(course: Path, manifest: Manifest | None = None) -> Secrets:
    manifest = manifest or _course_manifest(course)
    given: set[str] = set()  # bodies the stubs hand to the learner
    for ex in manifest.exercises:
        for path in ex.learner_paths(course):
            try:
                given.update(k for f in _functions(ast.parse(path.read_text(encoding="utf-8")))
                             if (k := body_key(f)) is not None)
            except (OSError, SyntaxError, ValueError):
                pass
    secrets = Secrets({}, {}, {}, [])
    for top in SECRET_DIRS:
        for path in sorted(p for p in (course / top).rglob("*") if p.is_file()):
            rel = path.relative_to(course).as_posix()
            if "__pycache__" in rel:
                continue
            data = path.read_bytes()
            if data.strip():
                secrets.digests.setdefault(hashlib.sha256(data).hexdigest(), rel)
            if top not in BODY_DIRS or path.suffix != ".py":
                continue
            text = data.decode("utf-8", errors="replace")
            if path.name == HIDDEN_CHECKS:
                secrets.texts.setdefault(_squash(text), rel)
            try:
                tree = ast.parse(text)
            except (SyntaxError, ValueError) as exc:
                secrets.problems.append(f"{rel}: cannot be parsed ({exc}), so its code cannot be looked for")
                continue
            lines = text.splitlines()
            for fn in _functions(tree):
                key = body_key(fn)
                if key is None or key in given:
                    continue
                origin = f"{rel}::{fn.name}"
                secrets.bodies.setdefault(key, origin)
                body = _body(fn)
                source = _squash("\n".join(lines[body[0].lineno - 1:body[-1].end_lineno])[body[0].col_offset:])
                if len(source) >= MIN_TEXT_CHARS:
                    secrets.texts.setdefault(source, origin)
    return secrets


def scan(release: Path, secrets: Secrets) -> list[Leak]:
    """Every leak of ``secrets`` in the folder ``release`` (``.git`` is not looked at)."""
    leaks = [Leak("(course)", p, "unreadable secret") for p in secrets.problems]
    for path in sorted(p for p in release.rglob("*") if p.is_file()):
        rel = path.relative_to(release).as_posix()
        if rel.split("/")[0] == ".git":
            continue
        if rel.split("/")[0] in SECRET_DIRS:
            leaks.append(Leak(rel, rel.split("/")[0] + "/", "secret folder"))
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if digest in secrets.digests:
            leaks.append(Leak(rel, secrets.digests[digest], "identical file"))
        text = data.decode("utf-8", errors="replace")
        squashed = _squash(text)
        leaks += [Leak(rel, origin, "text") for secret, origin in secrets.texts.items() if secret in squashed]
        if path.suffix != ".py":
            continue
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            leaks.append(Leak(rel, rel, "unparseable Python (cannot be checked)"))
            continue
        for fn in _functions(tree):
            key = body_key(fn)
            if key is not None and key in secrets.bodies:
                leaks.append(Leak(f"{rel}::{fn.name}", secrets.bodies[key], "function body"))
    return leaks


def find_leaks(release: Path, course: Path) -> list[Leak]:
    return scan(release, secret_material(course))


# --- writing it ------------------------------------------------------------------------

def _is_release(folder: Path) -> bool:
    """Whether ``folder`` holds an earlier release (its RELEASE.json, as this module writes it)."""
    try:
        doc = json.loads((folder / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("format_version") == RELEASE_FORMAT_VERSION and "files" in doc


def _check_out(course: Path, out: Path, force: bool, replace_any: bool = False) -> None:
    if out == course or course.is_relative_to(out):
        raise ReleaseError(f"{out} holds the course itself; choose an empty folder outside it")
    for top in ("exercises", "grader", *SECRET_DIRS):
        if out.is_relative_to(course / top):
            raise ReleaseError(f"{out} is inside the course's {top}/; choose a folder outside it")
    if out.exists() and not out.is_dir():
        raise ReleaseError(f"{out} is a file; give a folder")
    holds = out.is_dir() and any(p.name != ".git" for p in out.iterdir())
    if holds and not force:
        raise ReleaseError(f"{out} is not empty; give an empty folder, or --force to replace an earlier release "
                           f"there (a .git folder there is kept)")
    if holds and not _is_release(out) and not replace_any:
        raise ReleaseError(f"{out} is not an earlier release (no {MANIFEST_NAME} of one): --force would delete its "
                           f"files; give an empty folder, or add --replace-any-folder if deleting them is meant")


def build_release(course_root: Path, out: Path, *, force: bool = False, replace_any: bool = False) -> ReleaseReport:
    """Write the learners' repository for the course at ``course_root`` into ``out``.

    Raises ``ReleaseError`` (OUT unusable), ``CourseError`` (course incomplete) or
    ``LeakError`` (the staged release held course secrets; OUT untouched).
    """
    course = Path(course_root).resolve()
    out = Path(out).resolve()
    _check_out(course, out, force, replace_any)
    manifest = _course_manifest(course)
    pairs = allowlist(course, manifest)
    version = grader_version(course)
    contents: dict[str, bytes] = {rel: src.read_bytes() for src, rel in pairs}
    contents.update({rel: text.encode("utf-8") for rel, text in _generated(manifest, version).items()})
    files = tuple(ReleasedFile(rel, hashlib.sha256(data).hexdigest(), len(data))
                  for rel, data in sorted(contents.items()))
    report = ReleaseReport(out, version, _course_commit(course), files, _left_out(course, pairs))
    contents[MANIFEST_NAME] = (json.dumps(report.to_dict(), indent=2) + "\n").encode("utf-8")

    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.release-", dir=out.parent))
    try:
        for rel, data in contents.items():
            dest = stage / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
        leaks = scan(stage, secret_material(course, manifest))
        if leaks:
            raise LeakError(leaks)
        out.mkdir(exist_ok=True)
        for old in out.iterdir():
            if old.name == ".git":
                continue
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old)
            else:
                old.unlink()
        for entry in stage.iterdir():
            os.replace(entry, out / entry.name)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return report


def release_command_impl(out: Path, force: bool = False, *, course: Path | None = None,
                         replace_any: bool = False) -> int:
    """What `grade release OUT [--force]` does; returns the exit status (0, 1 leak, 2 usage, 3 course)."""
    import click

    from grader.cli_common import course_root

    echo = click.echo
    course = course if course is not None else course_root()
    try:
        report = build_release(course, out, force=force, replace_any=replace_any)
    except ReleaseError as exc:
        echo(f"Error: {exc}", err=True)
        return exc.exit_code
    except OSError as exc:  # e.g. OUT's parent is not writable
        echo(f"Error: could not write the release to {out}: {exc}", err=True)
        return EXIT_USAGE
    echo(f"Wrote the learners' repository to {report.out}: {len(report.files) + 1} files, grader "
         f"{report.grader_version}; leak scan clean (no solution, hidden check or fixture).")
    for rel in report.left_out:
        echo(f"  left out (not on the allowlist): {rel}")
    start = "" if (report.out / ".git").is_dir() else "git init && "
    echo(f"Next: cd {report.out} && {start}git add -A && git commit, then push it as the repository learners fork.")
    return EXIT_OK

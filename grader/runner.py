"""Grade exercises: sandboxes for learner code, pytest for the verdicts.

``grade(...)`` is the one entry point (the CLI, ``verify`` and the tests call it):

1. For each selected exercise find the learner's file, derive its seed, and start a
   ``Sandbox`` (a fresh process) for it -- all at once, so their JAX imports overlap.
2. Copy the check tests -- public ones from the course's ``exercises/``, hidden ones from
   the hidden root (normally ``solutions/``) -- into a private temporary folder.  Tests
   never come from the submission, so a submission cannot edit or shadow them.
3. Run pytest *in this trusted process* on that folder with conftest loading off,
   pytest-json-report collecting outcomes in memory (no report file anyone could write),
   and ``grader.pytest_plugin`` providing the fixtures.
4. Fold the per-test outcomes into per-check results: a check passes when every test
   item for it passed; its points are all or nothing.

The submission's process only ever answers ``call``/``probe`` requests with plain data.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import io
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from grader import __version__
from grader.manifest import Exercise, Manifest
from grader.results import ERROR, FAILED, NOT_RUN, PASSED, CheckResult, ExerciseResult, RunResult
from grader.sandbox.client import Sandbox

PUBLIC_TESTS = "test_public.py"
#: Check files are copied to a private folder under these names (see grader.pytest_plugin).
CHECK_MODULE_RE = re.compile(r"^test_e(?P<num>\d+)_(?P<vis>public|hidden)\.py$")


@dataclasses.dataclass
class ExerciseRun:
    """One exercise being graded: what the check fixtures need."""

    exercise: Exercise
    module_path: Path
    seed: int
    sandbox: Sandbox
    clean: Sandbox | None = None  # learner-free worker for trusted measurements (manifest clean_worker)

    def workers(self) -> list[Sandbox]:
        return [w for w in (self.sandbox, self.clean) if w is not None]
HIDDEN_TESTS = "test_hidden.py"


def derive_seed(exercise: Exercise, paths: list[Path]) -> int:
    """Default seed: a hash of the learner's files, so the same submission always draws the
    same inputs, while any edit (e.g. a table of hard-coded answers) draws new ones."""
    h = hashlib.sha256(f"grade-seed-v1:{exercise.number}".encode())
    for p in paths:
        try:
            h.update(p.read_bytes())
        except OSError:
            h.update(b"<missing>")
    return int.from_bytes(h.digest()[:4], "big")


def _jax_version() -> str:
    try:
        from importlib.metadata import version

        return version("jax")
    except Exception:  # pragma: no cover
        return "unknown"


def grade(
    manifest: Manifest,
    numbers: list[int],
    *,
    course_root: Path,
    submission_root: Path | None = None,
    module_overrides: dict[int, Path] | None = None,
    hidden_root: Path | None = None,
    seed: int | None = None,
) -> RunResult:
    """Grade the exercises ``numbers``.

    ``course_root`` holds the trusted ``exercises/`` (public tests); ``submission_root`` is
    the checkout being graded (defaults to ``course_root``); ``module_overrides`` maps an
    exercise number to a learner file elsewhere (fixtures); ``hidden_root`` holds
    ``<dir>/test_hidden.py`` (``None``: public checks only).
    """
    t0 = time.monotonic()
    submission_root = Path(submission_root or course_root)
    module_overrides = module_overrides or {}
    exercises = [manifest.get(n) for n in numbers]
    tmp = Path(tempfile.mkdtemp(prefix="grade-checks-"))
    runs: dict[int, ExerciseRun] = {}
    try:
        for ex in exercises:
            if ex.number in module_overrides:
                module_path = Path(module_overrides[ex.number]).resolve()
                paths = [module_path.parent / f for f in ex.files]
            else:
                paths = ex.learner_paths(submission_root)
                module_path = paths[0]
            ex_seed = seed if seed is not None else derive_seed(ex, paths)
            sandbox = Sandbox(module_path, timeout_s=ex.timeout_s, memory_mb=ex.memory_mb, cpu_devices=ex.cpu_devices)
            sandbox.start()  # now, so its JAX import overlaps everything below
            clean = None
            if ex.clean_worker:
                clean = Sandbox.clean(timeout_s=ex.timeout_s, memory_mb=ex.memory_mb, cpu_devices=ex.cpu_devices).start()
            runs[ex.number] = ExerciseRun(ex, module_path, ex_seed, sandbox, clean)
            public = course_root / "exercises" / ex.dir / PUBLIC_TESTS
            if public.is_file():
                shutil.copyfile(public, tmp / f"test_e{ex.number:02d}_public.py")
            if hidden_root is not None:
                hidden = hidden_root / ex.dir / HIDDEN_TESTS
                if hidden.is_file():
                    shutil.copyfile(hidden, tmp / f"test_e{ex.number:02d}_hidden.py")
        report = _run_pytest(tmp, runs)
        results = tuple(_exercise_result(runs[ex.number], report, hidden_root is not None) for ex in exercises)
    finally:
        for run in runs.values():
            for worker in run.workers():
                worker.close()
        if "grader.pytest_plugin" in sys.modules:
            sys.modules["grader.pytest_plugin"].STATE.clear()
        shutil.rmtree(tmp, ignore_errors=True)
    return RunResult(
        exercises=results,
        grader_version=__version__,
        jax_version=_jax_version(),
        seed_option=seed,
        duration_s=time.monotonic() - t0,
    )


def grade_parallel(manifest: Manifest, numbers: list[int], *, jobs: int | None = None, **kwargs) -> RunResult:
    """``grade`` with the exercises spread over ``jobs`` trusted worker processes.

    Each worker takes the next exercise from a queue and grades it with ``grade`` (its own
    sandbox as always); results come back as frozen data and are merged in order.  While
    one worker waits on its sandbox, the other core runs another exercise.
    """
    jobs = jobs or os.cpu_count() or 1
    if jobs <= 1 or len(numbers) <= 1:
        return grade(manifest, numbers, **kwargs)
    import concurrent.futures as cf
    import multiprocessing

    t0 = time.monotonic()
    # Forking is fastest and safe while this process runs no threads (the CLI never imports
    # JAX); a caller that has JAX loaded (it starts threads) gets fresh interpreters instead.
    ctx = multiprocessing.get_context("spawn" if "jax" in sys.modules else "fork")
    with cf.ProcessPoolExecutor(max_workers=min(jobs, len(numbers)), mp_context=ctx) as pool:
        parts = list(pool.map(functools.partial(_grade_one, manifest, kwargs), numbers))
    return dataclasses.replace(parts[0], exercises=tuple(e for p in parts for e in p.exercises),
                               duration_s=time.monotonic() - t0)


def _grade_one(manifest: Manifest, kwargs: dict, number: int) -> RunResult:
    return grade(manifest, [number], **kwargs)


def _run_pytest(folder: Path, runs: dict[int, ExerciseRun]) -> dict:
    import pytest
    from pytest_jsonreport.plugin import JSONReport

    from grader import pytest_plugin

    (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    _forget_check_modules()  # a previous run in this process must not lend its modules
    pytest_plugin.STATE.clear()
    pytest_plugin.STATE.update(runs)
    json_report = JSONReport()
    args = [
        str(folder), "-c", str(folder / "pytest.ini"), "--rootdir", str(folder),
        "--noconftest", "-p", "no:cacheprovider", "-q", "--no-header", "--tb=no", "--import-mode=importlib",
        "--json-report-file=none", "-W", "ignore::DeprecationWarning",
    ]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        pytest.main(args, plugins=[json_report, pytest_plugin])
    _forget_check_modules()
    return json_report.report or {}


def _forget_check_modules() -> None:
    for name in [n for n in sys.modules if CHECK_MODULE_RE.match(n.rsplit(".", 1)[-1] + ".py")]:
        del sys.modules[name]


def _apply_requirements(ex: Exercise, checks: list[CheckResult]) -> list[CheckResult]:
    """A passed check whose ``requires`` did not all pass scores nothing (see grader.manifest)."""
    by_name = {c.name: c for c in checks}
    out = []
    for spec, result in zip(ex.checks, checks):
        missing = [r for r in spec.requires if not by_name[r].passed]
        if result.passed and missing:
            result = dataclasses.replace(
                result, status=FAILED, score=0,
                message=f"passed, but it only scores once {', '.join(f'`{m}`' for m in missing)} passes: "
                        f"this property is only worth something in a function that computes the right thing",
                hint=f"fix `{missing[0]}` first",
            )
        out.append(result)
    return out


def _check_name(nodeid: str) -> str:
    func = nodeid.split("::")[-1].split("[")[0]
    return func[len("test_"):] if func.startswith("test_") else func


def _exercise_result(run: ExerciseRun, report: dict, hidden_available: bool) -> ExerciseResult:
    ex = run.exercise
    items: dict[tuple[str, str], list[dict]] = {}
    for test in report.get("tests", []):
        fname = test["nodeid"].split("::")[0].rsplit("/", 1)[-1]
        m = CHECK_MODULE_RE.match(fname)
        if not m or int(m.group("num")) != ex.number:
            continue
        items.setdefault((m.group("vis"), _check_name(test["nodeid"])), []).append(test)
    collect_errors = [c for c in report.get("collectors", []) if c.get("outcome") == "failed"
                      and f"test_e{ex.number:02d}_" in c.get("nodeid", "")]
    checks = []
    for check in ex.checks:
        tests = items.get((check.visibility, check.name), [])
        if check.visibility == "hidden" and not hidden_available:
            checks.append(CheckResult(check.name, check.visibility, check.summary, NOT_RUN, 0, 0,
                                      message="hidden check: runs when your course grades your work"))
            continue
        duration = sum(t.get(ph, {}).get("duration", 0.0) for t in tests for ph in ("setup", "call", "teardown"))
        if not tests:
            msg = "grader error: no test implements this check"
            if collect_errors:
                msg = "grader error: the check's tests could not be loaded"
            checks.append(CheckResult(check.name, check.visibility, check.summary, ERROR, 0, check.points, message=msg))
            continue
        failed = [t for t in tests if t.get("outcome") != "passed"]
        if not failed:
            checks.append(CheckResult(check.name, check.visibility, check.summary, PASSED, check.points, check.points,
                                      duration_s=duration))
            continue
        fb = (failed[0].get("metadata") or {}).get("feedback") or {}
        status = ERROR if fb.get("status") == "error" else FAILED
        message = fb.get("message") or "this check failed"
        measured, expected, hint = fb.get("measured", ""), fb.get("expected", ""), fb.get("hint", "")
        if check.visibility == "hidden" and fb.get("raw"):
            # Never show a hidden test's raw assertion text: it may hold inputs or answers.
            message = f"this check failed; it verifies: {check.summary}"
            if status == ERROR:
                message = "grader error in this hidden check (reported to your instructor)"
        if len(tests) > 1:
            message = f"{message} [{len(failed)} of {len(tests)} cases failed]"
        checks.append(CheckResult(check.name, check.visibility, check.summary, status, 0, check.points,
                                  message=message, measured=measured, expected=expected, hint=hint,
                                  detail=fb.get("detail", ""), duration_s=duration))
    checks = _apply_requirements(ex, checks)
    return ExerciseResult(
        number=ex.number, slug=ex.slug, title=ex.title,
        files=tuple(str(run.module_path.parent / f) for f in ex.files),
        seed=run.seed, checks=tuple(checks), hidden_run=hidden_available,
        duration_s=run.sandbox.busy_s, output=run.sandbox.output,
    )

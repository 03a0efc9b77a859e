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
import hashlib
import io
import os
import re
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

from grader import __version__
from grader.manifest import Exercise, Manifest
from grader.results import ERROR, FAILED, NOT_RUN, PASSED, CheckResult, ExerciseResult, RunResult
from grader.sandbox import user as sandbox_user
from grader.sandbox.client import SUBMISSION_FAILURES, Sandbox, Zygote

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


def jax_version() -> str:
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
    zygote: Zygote | None = None,
) -> RunResult:
    """Grade the exercises ``numbers``.

    ``course_root`` holds the trusted ``exercises/`` (public tests); ``submission_root`` is
    the checkout being graded (defaults to ``course_root``); ``module_overrides`` maps an
    exercise number to a learner file elsewhere (fixtures); ``hidden_root`` holds
    ``<dir>/test_hidden.py`` (``None``: public checks only); ``zygote`` forks the
    sandboxes from a process that imported JAX already (``grade batch``).
    """
    t0 = time.monotonic()
    started_at = utc_now()
    submission_root = Path(submission_root or course_root)
    module_overrides = module_overrides or {}
    exercises = [manifest.get(n) for n in numbers]
    tmp = Path(tempfile.mkdtemp(prefix="grade-checks-"))
    runs: dict[int, ExerciseRun] = {}
    failed: dict[int, ExerciseResult] = {}  # exercises the grader itself failed on
    hidden_run = hidden_root is not None
    if sandbox_user.isolating():  # root: close the course's secrets to the sandbox user
        sandbox_user.protect([p for p in (hidden_root, course_root / "solutions", course_root / "fixtures") if p])
    try:
        for ex in exercises:
            if ex.number in module_overrides:
                module_path = Path(module_overrides[ex.number]).resolve()
                paths = [module_path.parent / f for f in ex.files]
            else:
                paths = ex.learner_paths(submission_root)
                module_path = paths[0]
            ex_seed = seed if seed is not None else derive_seed(ex, paths)
            try:
                runs[ex.number] = _start(ex, module_path, ex_seed, course_root, hidden_root, tmp, zygote)
            except Exception as exc:
                failed[ex.number] = grader_error_result(ex, paths, ex_seed, hidden_run, exc)
        try:
            report = _run_pytest(tmp, runs) if runs else {}
        except Exception as exc:
            for n, run in runs.items():
                failed[n] = grader_error_result(run.exercise, [run.module_path], run.seed, hidden_run, exc)
        results = []
        for ex in exercises:
            if ex.number not in failed:
                try:
                    failed[ex.number] = _exercise_result(runs[ex.number], report, hidden_run)
                except Exception as exc:
                    run = runs[ex.number]
                    failed[ex.number] = grader_error_result(ex, [run.module_path], run.seed, hidden_run, exc)
            results.append(failed[ex.number])
        results = tuple(results)
    finally:
        for run in runs.values():
            for worker in run.workers():
                worker.close()
        if "grader.pytest_plugin" in sys.modules:
            sys.modules["grader.pytest_plugin"].STATE.clear()
        shutil.rmtree(tmp, ignore_errors=True)
    return run_result(results, submission=submission_root, seed=seed, started_at=started_at,
                      duration_s=time.monotonic() - t0)


def run_result(exercises, *, submission, seed: int | None = None, started_at: str = "", duration_s: float = 0.0,
               error: str = "") -> RunResult:
    """A ``RunResult`` stamped with this grader's and the installed JAX's versions."""
    return RunResult(exercises=tuple(exercises), grader_version=__version__, jax_version=jax_version(),
                     seed_option=seed, duration_s=duration_s, started_at=started_at or utc_now(),
                     submission=str(submission), error=error)


def error_run(exercises: list[Exercise], submission: Path, *, seed: int | None = None, cause: BaseException | str,
              error: str = "") -> RunResult:
    """A run in which the grader failed on every one of ``exercises`` (hidden checks on)."""
    return run_result([grader_error_result(ex, ex.learner_paths(Path(submission)), seed, True, cause)
                       for ex in exercises], submission=submission, seed=seed, error=error)


def utc_now() -> str:
    import datetime

    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _start(ex: Exercise, module_path: Path, seed: int, course_root: Path, hidden_root: Path | None,
           tmp: Path, zygote: Zygote | None = None) -> ExerciseRun:
    """Copy the exercise's checks and start its workers (their JAX imports overlap the rest)."""
    public = ex.public_checks(course_root)
    if public.is_file():
        shutil.copyfile(public, tmp / f"test_e{ex.number:02d}_public.py")
    if hidden_root is not None:
        hidden = ex.hidden_checks(hidden_root)
        if not hidden.is_file():
            raise FileNotFoundError(f"the hidden checks of exercise {ex.number} are missing: no {hidden}")
        shutil.copyfile(hidden, tmp / f"test_e{ex.number:02d}_hidden.py")
    limits = dict(timeout_s=ex.timeout_s, memory_mb=ex.memory_mb, cpu_devices=ex.cpu_devices, zygote=zygote)
    run = ExerciseRun(ex, module_path, seed, Sandbox(module_path, **limits).start())
    if ex.clean_worker:
        run.clean = Sandbox.clean(**limits).start()
    return run


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
    started_at = utc_now()
    root = kwargs.get("submission_root") or kwargs["course_root"]
    with cf.ProcessPoolExecutor(max_workers=min(jobs, len(numbers)), mp_context=ctx) as pool:
        futures = [pool.submit(_grade_one, manifest, kwargs, n) for n in numbers]
        exercises = []
        for n, fut in zip(numbers, futures):
            try:
                exercises.extend(fut.result().exercises)
            except Exception as exc:  # the grading process died: still a result, never a hole
                ex = manifest.get(n)
                override = (kwargs.get("module_overrides") or {}).get(n)
                paths = [override] if override else ex.learner_paths(Path(root))
                exercises.append(grader_error_result(ex, paths, kwargs.get("seed"),
                                                     kwargs.get("hidden_root") is not None, exc))
    return run_result(exercises, submission=root, seed=kwargs.get("seed"), started_at=started_at,
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


def _private_text(fb: dict) -> str:
    parts = [fb.get("message", "")]
    parts += [f"{k}: {fb[k]}" for k in ("measured", "expected", "hint") if fb.get(k)]
    if fb.get("detail"):
        parts.append("traceback:\n" + fb["detail"])
    return "\n".join(p for p in parts if p)


def _file_for(name: str, files: tuple[str, ...]) -> str:
    return next((f for f in files if Path(f).name == name), "") if name else ""


def _check_result(check, tests: list[dict], hidden_available: bool, collect_error: bool,
                  files: tuple[str, ...]) -> CheckResult:
    """Fold one check's pytest items into its result, in the words its audience may read."""
    base = dict(name=check.name, visibility=check.visibility, summary=check.summary)
    if check.visibility == "hidden" and not hidden_available:
        return CheckResult(**base, status=NOT_RUN, score=0, max_score=0,
                           message="hidden check: runs when your course grades your work")
    if not tests:
        what = "the check's tests could not be loaded" if collect_error else "no test implements this check"
        return CheckResult(**base, status=ERROR, score=0, max_score=check.points,
                           message="grader error (reported to your instructor)", private=f"grader error: {what}")
    duration = sum(t.get(ph, {}).get("duration", 0.0) for t in tests for ph in ("setup", "call", "teardown"))
    failed = [t for t in tests if t.get("outcome") != "passed"]
    if not failed:
        return CheckResult(**base, status=PASSED, score=check.points, max_score=check.points, duration_s=duration)
    fb = (failed[0].get("metadata") or {}).get("feedback") or {}
    if not fb and failed[0].get("outcome") == "skipped":
        fb = {"status": "error", "message": "grader error: the check was skipped", "raw": True}
    status = ERROR if fb.get("status") == "error" else FAILED
    where = dict(file=_file_for(fb.get("file", ""), files), line=int(fb.get("line") or 0))
    cases = f" [{len(failed)} of {len(tests)} cases failed]" if len(tests) > 1 else ""
    if check.visibility == "hidden":
        # A hidden check says only what was written for it: its test's message, measured
        # and expected values (and a traceback that may quote inputs) are for the instructor.
        if status == ERROR:
            message = "grader error in this hidden check (reported to your instructor)"
        elif fb.get("kind") in SUBMISSION_FAILURES:  # the learner's own code failed: say how, not where
            message = SUBMISSION_FAILURES[fb["kind"]][0].format(exc_type=fb.get("exc_type") or "an exception",
                                                                name=Path(fb.get("file") or "").name)
        else:
            message = check.feedback or f"this check failed; it verifies: {check.summary}"
        hint = fb.get("hint", "") if fb.get("kind") else ""  # the generic advice for a kind of failure
        return CheckResult(**base, status=status, score=0, max_score=check.points, message=message + cases,
                           hint=hint, duration_s=duration, private=_private_text(fb), **where)
    message = fb.get("message") or "this check failed"
    if status == ERROR:
        return CheckResult(**base, status=status, score=0, max_score=check.points, duration_s=duration,
                           message="grader error in this check (reported to your instructor)",
                           private=_private_text(fb))
    return CheckResult(**base, status=status, score=0, max_score=check.points, message=message + cases,
                       measured=fb.get("measured", ""), expected=fb.get("expected", ""), hint=fb.get("hint", ""),
                       detail=fb.get("detail", ""), duration_s=duration, **where)


def _exercise_result(run: ExerciseRun, report: dict, hidden_available: bool) -> ExerciseResult:
    ex = run.exercise
    items: dict[tuple[str, str], list[dict]] = {}
    for test in report.get("tests", []):
        fname = test["nodeid"].split("::")[0].rsplit("/", 1)[-1]
        m = CHECK_MODULE_RE.match(fname)
        if not m or int(m.group("num")) != ex.number:
            continue
        items.setdefault((m.group("vis"), _check_name(test["nodeid"])), []).append(test)
    collect_error = any(c.get("outcome") == "failed" and f"test_e{ex.number:02d}_" in c.get("nodeid", "")
                        for c in report.get("collectors", []))
    files = tuple(str(run.module_path.parent / f) for f in ex.files)
    checks = [_check_result(check, items.get((check.visibility, check.name), []), hidden_available,
                            collect_error, files) for check in ex.checks]
    return ExerciseResult(
        number=ex.number, slug=ex.slug, title=ex.title, files=files,
        seed=run.seed, checks=tuple(_apply_requirements(ex, checks)), hidden_run=hidden_available,
        duration_s=run.sandbox.busy_s, output=run.sandbox.output,
    )


def grader_error_result(ex: Exercise, paths, seed: int | None, hidden_run: bool,
                        exc: BaseException | str) -> ExerciseResult:
    """The grader itself failed on this exercise: a result that says so (never a missing one).

    ``paths`` are the learner's files (the seed is derived from them when ``seed`` is None).
    The learner reads that it was the grader's fault; the traceback is kept for the
    instructor (``private``).
    """
    paths = [Path(p) for p in paths]
    files = tuple(map(str, paths))
    seed = seed if seed is not None else derive_seed(ex, paths)
    if isinstance(exc, BaseException):
        private = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    else:
        private = str(exc)
    checks = tuple(
        CheckResult(c.name, c.visibility, c.summary, NOT_RUN if c.visibility == "hidden" and not hidden_run else ERROR,
                    0, c.points if (hidden_run or c.visibility == "public") else 0,
                    message="not graded: the grader failed on this exercise (reported to your instructor)")
        for c in ex.checks
    )
    return ExerciseResult(number=ex.number, slug=ex.slug, title=ex.title, files=files, seed=seed, checks=checks,
                          hidden_run=hidden_run, private=private,
                          error="grader error: this exercise could not be graded (not your code's fault; "
                                "your instructor has the details)")

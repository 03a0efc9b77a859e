"""Grade exercises: sandboxes for learner code, pytest for the verdicts.

``grade(...)`` is the one entry point (the CLI, ``verify``, ``ci``, ``batch`` and the tests
call it):

1. For each selected exercise take a ``Snapshot`` of the learner's files
   (``grader.submission``: regular files only, read once), derive the seed from it, and
   start the sandboxes it needs -- all at once, so their JAX imports overlap: one for the
   public checks, one of its own for the hidden checks (so nothing the learner's code
   saw of a hidden input can reach a public check's message), and, where the manifest
   asks, a learner-free worker for trusted measurements.
2. Copy the check tests -- public ones from the course's ``exercises/``, hidden ones from
   the hidden root (normally ``solutions/``) -- into a private temporary folder.  Tests
   never come from the submission, so a submission cannot edit or shadow them.
3. Run pytest *in this trusted process* on that folder with conftest loading off,
   pytest-json-report collecting outcomes in memory (no report file anyone could write),
   and ``grader.pytest_plugin`` providing the fixtures and a deadline per check.
4. Fold the per-test outcomes into per-check results: a check passes when every test
   item for it passed; its points are all or nothing; a check whose requirements did not
   pass is ``blocked``; when the integrity guard accused the learner's code (an action
   aimed at the grader or its meter, with the file and line: ``grader.sandbox.guard``),
   every measured check scores 0 (``integrity``); what the guard refused quietly only
   explains a failed check's feedback.

Interrupted (SIGINT/SIGTERM) grading raises ``GradingInterrupted`` carrying what finished,
marked incomplete: nothing in it may count as a grade.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import io
import os
import shutil
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterable
from pathlib import Path

from grader import __version__
from grader.manifest import Exercise, Manifest
from grader.results import (
    BLOCKED,
    ERROR,
    FAILED,
    INTEGRITY,
    NOT_RUN,
    PASSED,
    CheckResult,
    ExerciseResult,
    RunResult,
)
from grader.sandbox import install, memo, outcomes, scratch
from grader.sandbox import user as sandbox_user
from grader.sandbox.client import SUBMISSION_FAILURES, Sandbox, Zygote, probes_of_exercise, take_spare_zygote
from grader.sandbox.outcomes import REFUSALS, Refusal
from grader.session import CHECK_MODULE_RE, ExerciseRun
from grader.submission import Snapshot, read_submission

#: Exception names a hidden check may quote: Python's own (a learner's class name can carry data).
BUILTIN_EXCEPTIONS = frozenset(n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException))


class GradingInterrupted(Exception):
    """SIGINT or SIGTERM stopped grading; ``partial`` holds what finished, incomplete."""

    def __init__(self, signum: int, partial: RunResult):
        super().__init__(signum)
        self.signum = signum
        self.partial = partial


def jax_version() -> str:
    try:
        from importlib.metadata import version

        return version("jax")
    except Exception:  # pragma: no cover
        return "unknown"


def snapshot_of(ex: Exercise, submission_root: Path, overrides: dict[int, Snapshot]) -> Snapshot:
    """The exercise's files: an override (a fixture, a single file) or the submission's folder."""
    if ex.number in overrides:
        return overrides[ex.number]
    return read_submission(Path(submission_root), ex.dir, ex.files)


def compile_cache_for(snapshot: Snapshot) -> Path | None:
    """A persistent XLA compile cache for a public-only grading on a learner's own machine.

    Keyed by the snapshot's contents, so one version of a file never sees what another
    wrote; only when not root and no hidden checks run (nothing that counts is at stake);
    ``GRADER_NO_CACHE=1`` turns it off."""
    from grader import cache

    return cache.compile_cache_folder(snapshot.digest()) if cache.usable() else None


def grade(
    manifest: Manifest,
    numbers: list[int],
    *,
    course_root: Path,
    submission_root: Path | None = None,
    snapshots: dict[int, Snapshot] | None = None,
    hidden_root: Path | None = None,
    seed: int | None = None,
    zygote: Zygote | None = None,
    on_check=None,
    only: dict[int, Iterable[str]] | None = None,
    first_failure: bool = False,
    course_cache: Path | None = None,
) -> RunResult:
    """Grade the exercises ``numbers``.

    ``course_root`` holds the trusted ``exercises/`` (public tests); ``submission_root`` is
    the checkout being graded (defaults to ``course_root``); ``snapshots`` gives an
    exercise's files directly (a fixture, one file, a commit's tree); ``hidden_root``
    holds ``<dir>/test_hidden.py`` (``None``: public checks only); ``zygote`` forks the
    sandboxes from a process that imported JAX already (``grade batch``, ``grade watch``);
    ``on_check(number, check_name)`` is called as each check starts (a terminal's status line);
    ``only`` runs just some checks of an exercise (with the checks they require; the others
    are ``not_run``, and a sandbox no selected check needs is never started): ``grade
    verify`` needs only the checks a known-wrong fixture declares it loses; ``first_failure``
    stops at the first check that does not pass (the checks after it are ``not_run``): what
    ``grade verify`` needs to show that some public check catches a fixture; ``course_cache``
    is a compile cache every worker of the grading shares with other gradings
    (``grader.cache.course_cache``): only for the course's own files, never a learner's.
    """
    t0 = time.monotonic()
    started_at = utc_now()
    submission_root = Path(submission_root or course_root)
    snapshots = snapshots or {}
    exercises = [manifest.get(n) for n in numbers]
    selections = {ex.number: _with_requirements(ex, (only or {}).get(ex.number)) for ex in exercises}
    scratch.sweep()  # what a killed grader left behind
    tmp = scratch.make("checks")
    runs: dict[int, ExerciseRun] = {}
    done: dict[int, ExerciseResult] = {}  # exercises the grader itself failed on, then all
    hidden_run = hidden_root is not None
    if sandbox_user.isolating():  # root: nothing of the course or the submission is open to sandbox users
        sandbox_user.protect([p for p in (course_root, hidden_root, submission_root) if p])
    interrupted = _Interrupts()
    own_zygote = None
    if zygote is None and os.environ.get("GRADER_NO_ZYGOTE") != "1":
        # one JAX import for all the workers of this grading: each is forked from the zygote,
        # the one `grade exercise N` started as the command began (grader.entry) if it fits
        probes = ",".join(probes_of_exercise(ex.number) for ex in exercises)
        workers = _workers_needed(exercises, course_root, hidden_root)
        zygote = own_zygote = take_spare_zygote(probes) if workers else None
        if zygote is None and workers >= 2:
            zygote = own_zygote = Zygote(probes=probes).start()
    _import_trusted_side()  # while the zygote (or the first worker) imports JAX
    try:
        with interrupted:
            for ex in exercises:
                snap = snapshot_of(ex, submission_root, snapshots)
                ex_seed = seed if seed is not None else snap.seed(ex.number)
                try:
                    runs[ex.number] = _start(ex, snap, ex_seed, course_root, hidden_root, tmp, zygote,
                                             selections[ex.number], course_cache)
                except Exception as exc:
                    done[ex.number] = grader_error_result(ex, snap, ex_seed, hidden_run, exc)
            try:
                report = _run_pytest(tmp, runs, on_check, first_failure) if runs else {}
            except KeyboardInterrupt:
                report = {}
            except Exception as exc:
                report = {}
                for n, run in runs.items():
                    done[n] = grader_error_result(run.exercise, run.snapshot, run.seed, hidden_run, exc)
        for ex in exercises:
            if ex.number not in done:
                run = runs[ex.number]
                try:
                    done[ex.number] = _exercise_result(run, report, hidden_run, first_failure)
                except Exception as exc:
                    done[ex.number] = grader_error_result(ex, run.snapshot, run.seed, hidden_run, exc)
    finally:
        workers = [worker for run in runs.values() for worker in run.workers()]
        for worker in workers:
            worker.kill()
        for worker in workers:
            worker.close()
        if own_zygote is not None:
            own_zygote.close()
        for n, run in runs.items():
            if n in done:
                done[n] = dataclasses.replace(done[n], timings=run.timings(), seeded=tuple(sorted(run.seeded)))
        if "grader.pytest_plugin" in sys.modules:
            sys.modules["grader.pytest_plugin"].STATE.clear()
        shutil.rmtree(tmp, ignore_errors=True)
    result = run_result([done[ex.number] for ex in exercises], submission=submission_root, seed=seed,
                        started_at=started_at, duration_s=time.monotonic() - t0)
    if interrupted.signum:
        raise GradingInterrupted(interrupted.signum, dataclasses.replace(result, incomplete=True))
    return result


def _import_trusted_side() -> None:
    """Import what this process needs to run checks (pytest, its JSON report, numpy): done
    while the zygote imports JAX, not after it."""
    import pytest  # noqa: F401
    import pytest_jsonreport.plugin  # noqa: F401

    from grader import pytest_plugin  # noqa: F401


def _workers_needed(exercises: list[Exercise], course_root: Path, hidden_root: Path | None) -> int:
    return sum(int(ex.public_checks(course_root).is_file()) + int(hidden_root is not None) + int(ex.clean_worker)
               for ex in exercises)


class _Interrupts:
    """While grading: SIGINT/SIGTERM stop pytest (KeyboardInterrupt) and are remembered, so
    the result is marked incomplete instead of counting the checks that finished."""

    def __init__(self) -> None:
        self.signum = 0
        self._old: dict = {}

    def __enter__(self) -> "_Interrupts":
        if threading.current_thread() is threading.main_thread():
            for s in (signal.SIGINT, signal.SIGTERM):
                self._old[s] = signal.signal(s, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        first = not self.signum
        self.signum = self.signum or signum
        if first:
            raise KeyboardInterrupt

    def __exit__(self, exc_type, exc, tb) -> bool:
        for s, handler in self._old.items():
            signal.signal(s, handler)
        return exc_type is KeyboardInterrupt and bool(self.signum)


def run_result(exercises, *, submission, seed: int | None = None, started_at: str = "", duration_s: float = 0.0,
               error: str = "", incomplete: bool = False) -> RunResult:
    """A ``RunResult`` stamped with this grader's and the installed JAX's versions."""
    return RunResult(exercises=tuple(exercises), grader_version=__version__, jax_version=jax_version(),
                     seed_option=seed, duration_s=duration_s, started_at=started_at or utc_now(),
                     submission=str(submission), error=error, incomplete=incomplete)


def error_run(exercises: list[Exercise], submission: Path, *, seed: int | None = None, cause: BaseException | str,
              error: str = "") -> RunResult:
    """A run in which the grader failed on every one of ``exercises`` (hidden checks on)."""
    return run_result([grader_error_result(ex, read_submission(Path(submission), ex.dir, ex.files), seed, True, cause)
                       for ex in exercises], submission=submission, seed=seed, error=error)


def utc_now() -> str:
    import datetime

    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _with_requirements(ex: Exercise, names: Iterable[str] | None) -> frozenset[str] | None:
    """``names`` and every check they require, directly or not (``None``: every check)."""
    if names is None:
        return None
    by_name = {c.name: c for c in ex.checks}
    unknown = sorted(set(names) - set(by_name))
    if unknown:
        raise ValueError(f"exercise {ex.number} has no check {', '.join(unknown)}")
    chosen, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name not in chosen:
            chosen.add(name)
            todo.extend(by_name[name].requires)
    return frozenset(chosen)


def reference_of(ex: Exercise, hidden_root: Path | None) -> Snapshot | None:
    """The reference solution's files (``<hidden root>/<dir>/<files>``), or None where the
    hidden root holds none (a learner's copy: public checks only)."""
    if hidden_root is None or not (Path(hidden_root) / ex.dir / ex.module_file).is_file():
        return None
    return read_submission(Path(hidden_root), ex.dir, ex.files)


def _start(ex: Exercise, snap: Snapshot, seed: int, course_root: Path, hidden_root: Path | None,
           tmp: Path, zygote: Zygote | None = None, only: frozenset[str] | None = None,
           course_cache: Path | None = None) -> ExerciseRun:
    """Copy the exercise's checks and start its workers (their JAX imports overlap the rest)."""
    wanted = {c.visibility for c in ex.checks if only is None or c.name in only}
    public = ex.public_checks(course_root)
    has_public = public.is_file() and "public" in wanted
    if has_public:
        shutil.copyfile(public, tmp / f"test_e{ex.number:02d}_public.py")
    if hidden_root is not None and "hidden" in wanted:
        hidden = ex.hidden_checks(hidden_root)
        if not hidden.is_file():
            raise FileNotFoundError(f"the hidden checks of exercise {ex.number} are missing: no {hidden}")
        shutil.copyfile(hidden, tmp / f"test_e{ex.number:02d}_hidden.py")
    limits = dict(timeout_s=ex.timeout_s, memory_mb=ex.memory_mb, cpu_devices=ex.cpu_devices, zygote=zygote,
                  probes=probes_of_exercise(ex.number), course_cache=course_cache)
    run = ExerciseRun(ex, snap, seed, only=only, limits=limits, reference_snapshot=reference_of(ex, hidden_root))
    if has_public:
        cache = compile_cache_for(snap) if hidden_root is None else None
        run.public = Sandbox(snap, compile_cache=cache, **limits)
    if hidden_root is not None and "hidden" in wanted:
        run.hidden = Sandbox(snap, **limits)
    if ex.clean_worker:
        run.clean = memo.learner_free(None, persist=memo.may_persist(hidden_root is None), **limits)
    if zygote is None:
        # a fresh worker imports JAX while this process imports and collects the checks; a
        # zygote's fork waits for the zygote's own import, so those start once the checks are
        # collected (grader.pytest_plugin.pytest_collection_finish), which overlaps the two
        for worker in run.workers():
            worker.start()
    return run


def grade_parallel(manifest: Manifest, numbers: list[int], *, jobs: int | None = None, on_result=None,
                   **kwargs) -> RunResult:
    """``grade`` with the exercises spread over ``jobs`` trusted worker processes.

    Each worker takes the next exercise from a queue and grades it with ``grade`` (its own
    sandbox as always); results come back as frozen data and are merged in order.  While
    one worker waits on its sandbox, the other core runs another exercise.  SIGINT/SIGTERM
    stop every worker and raise ``GradingInterrupted`` (what finished, incomplete).
    ``on_result(exercise_result)`` is called as each exercise finishes (a terminal shows it
    at once).
    """
    jobs = jobs or os.cpu_count() or 1
    if len(numbers) <= 1 or (jobs <= 1 and on_result is None):
        run = grade(manifest, numbers, **kwargs)
        for ex in run.exercises if on_result else ():
            on_result(ex)
        return run
    if jobs <= 1:
        return _grade_one_by_one(manifest, numbers, on_result, **kwargs)
    import concurrent.futures as cf
    import multiprocessing

    t0 = time.monotonic()
    # Forking is fastest and safe while this process runs no threads (the CLI never imports
    # JAX); a caller that has JAX loaded (it starts threads) gets fresh interpreters instead.
    ctx = multiprocessing.get_context("spawn" if "jax" in sys.modules else "fork")
    if ctx.get_start_method() == "fork":
        install.grader_base()  # made once, here: the pool's processes share it
    started_at = utc_now()
    root = kwargs.get("submission_root") or kwargs["course_root"]
    results: dict[int, ExerciseResult] = {}
    interrupted = _Interrupts()
    pool = cf.ProcessPoolExecutor(max_workers=min(jobs, len(numbers)), mp_context=ctx,
                                  initializer=_ignore_interrupts)
    try:
        with interrupted:
            futures = {pool.submit(_grade_one, manifest, kwargs, n): n for n in numbers}
            for fut in cf.as_completed(futures):
                n = futures[fut]
                try:
                    results[n] = fut.result().exercises[0]
                except Exception as exc:  # the grading process died: still a result, never a hole
                    ex = manifest.get(n)
                    snap = snapshot_of(ex, Path(root), kwargs.get("snapshots") or {})
                    results[n] = grader_error_result(ex, snap, kwargs.get("seed"),
                                                     kwargs.get("hidden_root") is not None, exc)
                if on_result is not None:
                    on_result(results[n])
    finally:
        if interrupted.signum:
            for proc in list(getattr(pool, "_processes", {}).values()):
                proc.terminate()  # their sandboxes die with them (parent-death signal)
        pool.shutdown(wait=not interrupted.signum, cancel_futures=True)
    done = [results[n] for n in numbers if n in results]
    result = run_result(done, submission=root, seed=kwargs.get("seed"), started_at=started_at,
                        duration_s=time.monotonic() - t0, incomplete=bool(interrupted.signum))
    if interrupted.signum:
        raise GradingInterrupted(interrupted.signum, result)
    return result


def _grade_one_by_one(manifest: Manifest, numbers: list[int], on_result, **kwargs) -> RunResult:
    """One exercise after another in this process (``-j 1``), each shown as it finishes,
    sharing one zygote."""
    t0, started_at = time.monotonic(), utc_now()
    done = []
    zygote = kwargs.pop("zygote", None) or (Zygote().start() if os.environ.get("GRADER_NO_ZYGOTE") != "1" else None)
    try:
        for n in numbers:
            try:
                run = grade(manifest, [n], zygote=zygote, **kwargs)
            except GradingInterrupted as stop:
                partial = run_result(done + list(stop.partial.exercises), submission=stop.partial.submission,
                                     seed=kwargs.get("seed"), started_at=started_at, incomplete=True)
                raise GradingInterrupted(stop.signum, partial) from None
            done.extend(run.exercises)
            on_result(run.exercises[0])
    finally:
        if zygote is not None:
            zygote.close()
    root = kwargs.get("submission_root") or kwargs["course_root"]
    return run_result(done, submission=root, seed=kwargs.get("seed"), started_at=started_at,
                      duration_s=time.monotonic() - t0)


def _ignore_interrupts() -> None:
    """In a pool worker: the parent decides what an interrupt means (it ends the workers)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


_pool_zygote: Zygote | None = None  # in a grading pool's worker process: one zygote for all its exercises


def _grade_one(manifest: Manifest, kwargs: dict, number: int) -> RunResult:
    """In a pool worker: grade one exercise, its sandboxes forked from this process's zygote
    (started for the first exercise, with every exercise's probes, and kept for the next:
    one JAX import per pool process instead of one per exercise).  It ends with the
    process (its parent-death signal; closed at a clean exit)."""
    global _pool_zygote
    if kwargs.get("zygote") is None and os.environ.get("GRADER_NO_ZYGOTE") != "1":
        if _pool_zygote is None or not _pool_zygote.alive:
            from multiprocessing import util

            _pool_zygote = Zygote().start()
            util.Finalize(_pool_zygote, _pool_zygote.close, exitpriority=10)
        kwargs = dict(kwargs, zygote=_pool_zygote)
    return grade(manifest, [number], **kwargs)


def _run_pytest(folder: Path, runs: dict[int, ExerciseRun], on_check=None, first_failure: bool = False) -> dict:
    import pytest
    from pytest_jsonreport.plugin import JSONReport

    from grader import pytest_plugin

    (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    _forget_check_modules()  # a previous run in this process must not lend its modules
    pytest_plugin.STATE.clear()
    pytest_plugin.STATE.update(runs)
    pytest_plugin.ON_CHECK = on_check
    json_report = JSONReport()
    args = [
        str(folder), "-c", str(folder / "pytest.ini"), "--rootdir", str(folder),
        "--noconftest", "-p", "no:cacheprovider", "-q", "--no-header", "--tb=no", "--import-mode=importlib",
        # only the plugins the verdicts need: no third-party plugin an installed package
        # registers (anyio, jaxtyping, xdist, ...) runs in the trusted process, or costs its import
        "-p", "pytest_metadata.plugin", "-p", "pytest_jsonreport.plugin",
        # pytest's unraisable-exception plugin runs full garbage collections at the end of every
        # session (0.2-1 s each in a process that has graded for a while: `grade verify`,
        # `grade batch`); what it reports (a __del__ that raised on the trusted side) is no verdict
        "-p", "no:unraisableexception",
        "--json-report-file=none", "-W", "ignore::DeprecationWarning",
    ] + (["-x"] if first_failure else [])
    autoload = os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = pytest.main(args, plugins=[json_report, pytest_plugin])
    finally:
        if autoload is None:
            os.environ.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
        else:
            os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = autoload
        pytest_plugin.ON_CHECK = None
    _forget_check_modules()
    if code == pytest.ExitCode.INTERRUPTED:
        raise KeyboardInterrupt
    return json_report.report or {}


def _forget_check_modules() -> None:
    for name in [n for n in sys.modules if CHECK_MODULE_RE.match(n.rsplit(".", 1)[-1] + ".py")]:
        del sys.modules[name]


def _apply_requirements(ex: Exercise, checks: list[CheckResult]) -> list[CheckResult]:
    """A check whose ``requires`` did not all pass scores nothing: it is blocked, whether its own
    test passed or failed.  A test that failed on a function the required check already found
    wrong usually failed for that reason (a structure judged on a program whose outputs are
    wrong, dropout judged through a wrong loss), and its own words would send the learner to
    the wrong code: the message says what to fix first and keeps the check's own words after it.
    A grader error, an accusation or a check that did not run keep their status."""
    by_name = {c.name: c for c in checks}
    out = []
    for spec, result in zip(ex.checks, checks):
        missing = [r for r in spec.requires if not by_name[r].passed]
        first = ", ".join(f"`{m}`" for m in missing)
        if missing and result.passed:
            result = dataclasses.replace(
                result, status=BLOCKED, score=0,
                message=f"this check's own test passed, but it scores only once {first} passes: what it measures "
                        f"counts only where that holds",
                hint=f"fix `{missing[0]}` first",
            )
        elif missing and result.status == FAILED:
            own = result.message.strip().rstrip(".")
            result = dataclasses.replace(
                result, status=BLOCKED, score=0,
                message=f"scores only once {first} passes, which did not: fix `{missing[0]}` first"
                        + (f" (judged on the function as it is, this check's own test also failed: {own})"
                           if own else ""),
                hint=f"fix `{missing[0]}` first",
            )
        out.append(result)
    return out


def _apply_integrity(ex: Exercise, checks: list[CheckResult], reasons: tuple[str, ...]) -> list[CheckResult]:
    """Measured checks score 0 once the learner's code was accused by the integrity guard
    (each reason names what it did, with its file and line: ``grader.sandbox.guard``)."""
    if not reasons:
        return checks
    # an accusation that makes JAX compile something else than what was traced voids the values too
    every = any(r.startswith(outcomes.VOIDS_EVERY_CHECK) for r in reasons)
    out = []
    for spec, result in zip(ex.checks, checks):
        if (spec.measured or every) and result.status not in (NOT_RUN, ERROR):
            result = dataclasses.replace(
                result, status=INTEGRITY, score=0,
                message="not scored: your code " + "; ".join(reasons[:3]) + " -- an action aimed at the grader or "
                        "at what it measures, so nothing measured in its process can be trusted",
                hint="remove that from your file: an exercise never needs it", measured="", expected="", detail="")
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


def _check_result(check, tests: list[dict], hidden_available: bool, collect_error: bool,
                  file: str, stopped: bool = False) -> CheckResult:
    """Fold one check's pytest items into its result, in the words its audience may read."""
    base = dict(name=check.name, visibility=check.visibility, summary=check.summary)
    if check.visibility == "hidden" and not hidden_available:
        return CheckResult(**base, status=NOT_RUN, score=0, max_score=0,
                           message="hidden check: runs when your course grades your work")
    if not tests and stopped:
        return CheckResult(**base, status=NOT_RUN, score=0, max_score=0,
                           message="not run: this grading stopped at the first check that did not pass")
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
    refused = _refusal_notes(fb.get("refused"), public=check.visibility != "hidden")
    where = dict(file=file if fb.get("file") else "", line=int(fb.get("line") or 0))
    cases = f" [{len(failed)} of {len(tests)} cases failed]" if len(tests) > 1 else ""
    if check.visibility == "hidden":
        # A hidden check says only what is true of the failure and names no input: the check's
        # diagnosis, or how the learner's code failed, or the manifest's line.  What the test
        # measured and expected, and any traceback, are for the instructor.
        hint = ""
        if status == ERROR:
            message = "grader error in this hidden check (reported to your instructor)"
        elif fb.get("kind") in SUBMISSION_FAILURES:  # the learner's own code failed: say how, not where
            exc_type = fb.get("exc_type") if fb.get("exc_type") in BUILTIN_EXCEPTIONS else "an exception"
            message = SUBMISSION_FAILURES[fb["kind"]][0].format(exc_type=exc_type, name=Path(file).name)
            hint = SUBMISSION_FAILURES[fb["kind"]][1]
        elif fb.get("diagnosis"):
            message, hint = fb["diagnosis"], fb.get("advice", "")
        else:
            message = check.feedback or f"this check failed; it verifies: {check.summary}"
        return CheckResult(**base, status=status, score=0, max_score=check.points, message=message + cases + refused,
                           hint=hint, duration_s=duration, private=_private_text(fb), **where)
    message = fb.get("message") or "this check failed"
    if status == ERROR:
        return CheckResult(**base, status=status, score=0, max_score=check.points, duration_s=duration,
                           message="grader error in this check (reported to your instructor)",
                           private=_private_text(fb))
    return CheckResult(**base, status=status, score=0, max_score=check.points, message=message + cases + refused,
                       measured=fb.get("measured", ""), expected=fb.get("expected", ""), hint=fb.get("hint", ""),
                       detail=fb.get("detail", ""), duration_s=duration, **where)


def _refusal_notes(refused, public: bool) -> str:
    """What the sandbox refused quietly while a failed check ran, as sentences to append to
    its message (``grader.sandbox.outcomes.Refusal``): a hidden check names neither the
    detail nor the line (both may depend on its inputs)."""
    if not isinstance(refused, list):
        return ""
    notes = []
    for item in refused[:4]:
        if isinstance(item, dict) and item.get("kind") in REFUSALS:
            text = Refusal(str(item["kind"]), str(item.get("detail", "")), str(item.get("file", "")),
                           int(item.get("line") or 0)).text(public)
            if text not in notes:
                notes.append(text)
    return "".join(f"\n{note}" for note in notes)


def _not_selected(check) -> CheckResult:
    return CheckResult(name=check.name, visibility=check.visibility, summary=check.summary, status=NOT_RUN,
                       score=0, max_score=0, message="not run: this grading ran a selection of the checks")


def _exercise_result(run: ExerciseRun, report: dict, hidden_available: bool,
                     first_failure: bool = False) -> ExerciseResult:
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
    file = str(run.module_path)
    # stopped at the first failure (first_failure): a check after it has no tests, and did not run
    stopped = first_failure and any(t.get("outcome") != "passed" for t in report.get("tests", []))
    checks = [_check_result(check, items.get((check.visibility, check.name), []), hidden_available,
                            collect_error, file, stopped) if run.runs(check.name) else _not_selected(check)
              for check in ex.checks]
    checks = _apply_integrity(ex, _apply_requirements(ex, checks), run.integrity)
    files = (file, *(str(run.module_path.parent / f) for f in ex.files[1:]))
    hidden_output = run.hidden.output if run.hidden is not None else ""
    return ExerciseResult(
        number=ex.number, slug=ex.slug, title=ex.title, files=files,
        seed=run.seed, checks=tuple(checks), hidden_run=hidden_available,
        duration_s=sum(w.busy_s for w in run.learner_sandboxes()),
        output=run.public.output if run.public is not None else "",
        private=f"printed during hidden checks:\n{hidden_output}" if hidden_output.strip() else "",
        integrity=run.integrity, content_digest=run.snapshot.digest(),
    )


def grader_error_result(ex: Exercise, snapshot: Snapshot | None, seed: int | None, hidden_run: bool,
                        exc: BaseException | str) -> ExerciseResult:
    """The grader itself failed on this exercise: a result that says so (never a missing one).

    The learner reads that it was the grader's fault; the traceback is kept for the
    instructor (``private``)."""
    files = (snapshot.display_path,) if snapshot is not None else tuple(ex.files)
    if seed is None:
        seed = snapshot.seed(ex.number) if snapshot is not None else 0
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
                          content_digest=snapshot.digest() if snapshot is not None else "",
                          error="grader error: this exercise could not be graded (not your code's fault; "
                                "your instructor has the details)")

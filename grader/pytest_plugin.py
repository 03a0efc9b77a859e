"""Pytest plugin loaded by the trusted runner (never by the learner's process).

Check tests are ordinary pytest tests.  The runner copies them to a private folder as
``test_eNN_public.py`` / ``test_eNN_hidden.py`` and registers this module with the
state of the run (``STATE``).  Fixtures available to check tests:

``submission``
    the ``Sandbox`` running the learner's files for this exercise -- the public checks'
    own, or the hidden checks' own: ``submission.call(name, *args)`` and
    ``submission.probe("module:fn", *args)`` return trusted plain data or raise
    ``SubmissionError``; ``submission.last_meter`` holds the compilations and traces the
    last request caused (see ``grader.testing``).
``seed`` / ``rng``
    the exercise's seed and a ``numpy.random.Generator`` seeded from it and the test's
    name (``grader.coverage.check_rng``), so inputs are drawn at grading time and
    reproducible with ``--seed``.
``truth``
    a clean worker (no learner code; manifest ``clean_worker = true``) whose probes
    measure what the live JAX does, in a fresh process beside the sandbox.
``reference``
    the reference solution in a sandbox of the learner's kind (``None`` where it is not
    available): what an honest solution costs for the same requests (``grader.testing``).
``without_jax``
    the learner's files in a worker where JAX does not exist (``grader.sandbox.nojax``).

Each check test gets a deadline on the trusted side too (``CHECK_DEADLINE_S`` beyond the
exercise's time budget): a check stuck in the grader's own code becomes a grader error
instead of a grading that never ends.  ``pytest_json_runtest_metadata`` hands the
structured feedback of a failure (see ``grader.feedback``) to pytest-json-report, whose
report the runner reads, with what the sandbox's guard refused quietly while the check
ran (``refused``: the learner then reads why their code got a ``PermissionError``).
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import numpy as np
import pytest

from grader.coverage import check_rng
from grader.feedback import CheckFailed
from grader.session import CHECK_MODULE_RE, ExerciseRun
from grader.sandbox.client import SUBMISSION_FAILURES, Sandbox, SubmissionError
from grader.sandbox.outcomes import IMPORT_REFUSALS, REFUSAL_EXCEPTIONS, REFUSED_MARK

STATE: dict[int, ExerciseRun] = {}
CHECK_DEADLINE_S = 60.0
_REFUSALS_AT: dict[str, int] = {}  # test id -> how many refusals its sandbox had reported when it started
ON_CHECK = None  # set by the runner: called with (exercise number, check name) as each check starts


class TrustedTimeout(Exception):
    """The grader's own side of a check ran past its deadline."""


def _run_for(node) -> tuple[ExerciseRun, str]:
    m = CHECK_MODULE_RE.match(Path(str(node.path)).name)
    if not m or int(m.group("num")) not in STATE:
        raise RuntimeError(f"{node.path} is not a check module of this run")
    return STATE[int(m.group("num"))], m.group("vis")


@pytest.fixture(scope="module")
def submission(request) -> Sandbox:
    run, visibility = _run_for(request.node)
    return run.sandbox_for(visibility)


@pytest.fixture(scope="module")
def truth(request) -> Sandbox:
    """A clean worker (no learner code) for measuring the truth in a fresh JAX process."""
    run, _ = _run_for(request.node)
    if run.clean is None:
        raise RuntimeError("set clean_worker = true in this exercise's manifest entry to use `truth`")
    return run.clean


@pytest.fixture(scope="module")
def reference(request) -> Sandbox | None:
    """The reference solution in a sandbox of the learner's kind, for the checks of this
    module's visibility (``grader.testing`` sends it the learner's requests); ``None`` where
    the reference is not available (public checks only)."""
    run, visibility = _run_for(request.node)
    return run.reference_for(visibility)


@pytest.fixture(scope="module")
def without_jax(request) -> Sandbox:
    """The learner's files in a worker where JAX does not exist (``grader.sandbox.nojax``)."""
    run, visibility = _run_for(request.node)
    return run.without_jax(visibility)


@pytest.fixture(scope="module")
def seed(request) -> int:
    return _run_for(request.node)[0].seed


@pytest.fixture
def rng(request, seed) -> np.random.Generator:
    # The node name includes parametrize ids, so each case draws its own inputs; the coverage
    # tests replay a check's draw with the same generator (grader.coverage.check_rng).
    return check_rng(seed, request.node.name)


def feedback_of(excinfo) -> dict:
    """Structured, learner-facing feedback for an exception raised by a check test."""
    exc = excinfo.value if excinfo is not None else None
    if isinstance(exc, CheckFailed):
        return {"status": "failed", **exc.as_dict()}
    if isinstance(exc, SubmissionError):
        hint = SUBMISSION_FAILURES.get(exc.kind, ("", "run the public checks locally and read the traceback below"))[1]
        return {"status": "failed", "message": exc.message, "measured": "", "expected": "", "hint": hint,
                "detail": exc.detail, "kind": exc.kind, "exc_type": exc.exc_type, "file": exc.file,
                "line": exc.line or 0}
    if isinstance(exc, AssertionError):
        return {"status": "failed", "message": str(exc)[:2000] or "an assertion failed", "measured": "",
                "expected": "", "hint": "", "raw": True}
    return {"status": "error", "message": f"grader error: {type(exc).__name__}: {str(exc)[:500]}",
            "measured": "", "expected": "", "hint": "", "raw": True}


def pytest_collection_modifyitems(session, config, items):
    """Leave out the tests of checks this grading does not run (``runner.grade(only=...)``)."""
    kept, left = [], []
    for item in items:
        try:
            run, visibility = _run_for(item)
        except RuntimeError:
            kept.append(item)
            continue
        name = item.name.split("[")[0]
        check = name[len("test_"):] if name.startswith("test_") else name
        if run.runs(check):
            kept.append(item)
            if "seed" in getattr(item, "fixturenames", ()):  # the closure: `rng` and module fixtures too
                run.seeded.add(check)
            for fixture in ("reference", "without_jax"):  # workers that start only for a check that uses them
                if fixture in getattr(item, "fixturenames", ()):
                    run.want(fixture, visibility)
        else:
            left.append(item)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = kept


def pytest_collection_finish(session):
    """Checks are in memory now: remove their files, then let learner code start importing."""
    for path in Path(str(session.config.rootpath)).glob("test_e*_*.py"):
        try:
            path.unlink()
        except OSError:
            pass
    for run in STATE.values():
        for worker in run.workers():
            worker.begin_import()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """A deadline for the whole of one check test (setup, call, teardown) on this side."""
    box = _sandbox_of(item)
    if box is not None:  # where this check's refusals start (grader.sandbox.outcomes)
        _REFUSALS_AT[item.nodeid] = len(box.refusals)
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        return (yield)
    try:
        run, _ = _run_for(item)
        budget = run.exercise.timeout_s + CHECK_DEADLINE_S
    except RuntimeError:
        budget = CHECK_DEADLINE_S

    def expire(signum, frame):
        raise TrustedTimeout(f"the grader's side of this check took over {budget:g} s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, budget)
    try:
        return (yield)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def pytest_runtest_logstart(nodeid, location):
    if ON_CHECK is None:
        return
    m = CHECK_MODULE_RE.match(nodeid.split("::")[0].rsplit("/", 1)[-1])
    if m:
        name = nodeid.split("::")[-1].split("[")[0]
        ON_CHECK(int(m.group("num")), name[len("test_"):] if name.startswith("test_") else name)


def _sandbox_of(item) -> Sandbox | None:
    try:
        run, visibility = _run_for(item)
        return run.sandbox_for(visibility)
    except RuntimeError:
        return None


def refusals_during(item, feedback: dict) -> list[dict]:
    """The quiet refusal that made the learner's code fail this check, as plain data for the
    runner: the last one the guard reported while the check ran (or while the learner's
    module was imported, for an import failure), when the learner's code failed with the
    exception a refusal raises.  A refusal a library handled (``platform`` asking ``uname``)
    is not mentioned."""
    box = _sandbox_of(item)
    if box is None or feedback.get("exc_type") not in REFUSAL_EXCEPTIONS or REFUSED_MARK not in feedback["message"]:
        return []
    seen = list(box.refusals[_REFUSALS_AT.get(item.nodeid, 0):])
    if feedback.get("kind") == "import_error":
        seen = list(box.import_refusals) + seen
    wanted = "ImportError" if feedback["exc_type"] in ("ImportError", "ModuleNotFoundError") else "PermissionError"
    seen = [r for r in seen if (r.kind in IMPORT_REFUSALS) == (wanted == "ImportError")]
    return [{"kind": r.kind, "detail": r.detail, "file": r.file, "line": r.line} for r in seen[-1:]]


def pytest_json_runtest_metadata(item, call):
    if call.excinfo is None:
        return {}
    feedback = feedback_of(call.excinfo)
    refused = refusals_during(item, feedback)
    if refused:
        feedback["refused"] = refused
    return {"feedback": feedback}

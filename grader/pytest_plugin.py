"""Pytest plugin loaded by the trusted runner (never by the learner's process).

Check tests are ordinary pytest tests.  The runner copies them to a private folder as
``test_eNN_public.py`` / ``test_eNN_hidden.py`` and registers this module with the
state of the run (``STATE``).  Fixtures available to check tests:

``submission``
    the ``Sandbox`` running the learner's file for this exercise: ``submission.call(name,
    *args)`` and ``submission.probe("module:fn", *args)`` return trusted plain data or
    raise ``SubmissionError``.
``seed`` / ``rng``
    the exercise's seed and a ``numpy.random.Generator`` seeded from it and the test's
    name, so inputs are drawn at grading time and reproducible with ``--seed``.
``learner_names``
    names of every function defined in the learner's file (for compile attribution).
``truth``
    a clean worker (no learner code; manifest ``clean_worker = true``) whose probes
    measure what the live JAX does, in a fresh process beside the sandbox.

``pytest_json_runtest_metadata`` hands the structured feedback of a failure (see
``grader.feedback``) to pytest-json-report, whose report the runner reads.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytest

from grader.compiles import defined_function_names
from grader.feedback import CheckFailed
from grader.runner import CHECK_MODULE_RE, ExerciseRun
from grader.sandbox.client import SUBMISSION_FAILURES, Sandbox, SubmissionError



STATE: dict[int, ExerciseRun] = {}


def _run_for(request) -> ExerciseRun:
    m = CHECK_MODULE_RE.match(Path(str(request.node.path)).name)
    if not m or int(m.group("num")) not in STATE:
        raise RuntimeError(f"{request.node.path} is not a check module of this run")
    return STATE[int(m.group("num"))]


@pytest.fixture(scope="module")
def submission(request) -> Sandbox:
    return _run_for(request).sandbox


@pytest.fixture(scope="module")
def truth(request) -> Sandbox:
    """A clean worker (no learner code) for measuring the truth in a fresh JAX process."""
    run = _run_for(request)
    if run.clean is None:
        raise RuntimeError("set clean_worker = true in this exercise's manifest entry to use `truth`")
    return run.clean


@pytest.fixture(scope="module")
def seed(request) -> int:
    return _run_for(request).seed


@pytest.fixture
def rng(request, seed) -> np.random.Generator:
    # The node name includes parametrize ids, so each case draws its own inputs.
    return np.random.default_rng([seed, zlib.crc32(request.node.name.encode())])


@pytest.fixture(scope="module")
def learner_names(request) -> frozenset[str]:
    path = _run_for(request).module_path
    try:
        return frozenset(defined_function_names(path.read_text(encoding="utf-8"), str(path)))
    except (OSError, SyntaxError, ValueError):
        return frozenset()


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


def pytest_json_runtest_metadata(item, call):
    if call.excinfo is None:
        return {}
    return {"feedback": feedback_of(call.excinfo)}

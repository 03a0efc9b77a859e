"""``pytest exercises/NN_topic``: an exercise's public checks under plain pytest.

Registered as the pytest plugin ``grade`` (an entry point in pyproject.toml), so in a
checkout of the course or of the learners' repository

    pytest exercises/03_per_example_grad_norms            # -k, -x, --lf, -v all work

runs that exercise's public checks against the learner's file in the very sandbox
``grade exercise`` uses: the same fixtures (``submission``, ``truth``, ``without_jax``, ``seed``, ``rng``; ``reference``
is ``None``: a learner's copy has no reference solution),
the same snapshot of the exercise's folder, the same integrity guard.  Only public checks
run this way (they carry no points); ``grade`` itself disables this plugin (``-p
no:grade``) and provides its own fixtures.

The fixtures appear only for test files that sit in an exercise's folder next to a
manifest (``exercises/manifest.toml``); anywhere else they are not defined, so this
plugin changes nothing for other projects' tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.coverage import check_rng

_RUNS: dict[Path, object] = {}  # exercise folder -> ExerciseRun (sandboxes live for the session)


def _exercise_for(path: Path):
    """(course root, Exercise) for a test file in ``exercises/<dir>/``, or None."""
    from grader.manifest import ManifestError, load

    folder = Path(path).resolve().parent
    manifest_path = folder.parent / "manifest.toml"
    if folder.parent.name != "exercises" or not manifest_path.is_file():
        return None
    try:
        manifest = load(manifest_path)
    except ManifestError:
        return None
    for ex in manifest.exercises:
        if ex.dir == folder.name:
            return folder.parents[1], ex
    return None


def _run(request):
    found = _exercise_for(request.node.path)
    if found is None:
        pytest.skip("not a check of an exercise of this course (no exercises/manifest.toml beside it)")
    root, ex = found
    key = root / "exercises" / ex.dir
    run = _RUNS.get(key)
    if run is None:
        from grader.runner import compile_cache_for
        from grader.sandbox import memo
        from grader.sandbox.client import Sandbox
        from grader.session import ExerciseRun
        from grader.submission import read_submission

        snap = read_submission(root, ex.dir, ex.files)
        limits = dict(timeout_s=ex.timeout_s, memory_mb=ex.memory_mb, cpu_devices=ex.cpu_devices)
        run = ExerciseRun(ex, snap, snap.seed(ex.number), limits=limits)
        run.public = Sandbox(snap, compile_cache=compile_cache_for(snap), **limits).start()
        if ex.clean_worker:
            run.clean = memo.learner_free(None, persist=memo.may_persist(True), **limits).start()
        for worker in run.workers():
            worker.begin_import()  # the public checks are the learner's own to read: nothing to hide
        _RUNS[key] = run
    return run


@pytest.fixture(scope="module")
def submission(request):
    return _run(request).public


@pytest.fixture(scope="module")
def truth(request):
    run = _run(request)
    if run.clean is None:
        raise RuntimeError("this exercise has no learner-free worker (manifest clean_worker)")
    return run.clean


@pytest.fixture(scope="module")
def reference(request):
    """The reference solution's sandbox: never here (a learner's copy has no solutions)."""
    return None


@pytest.fixture(scope="module")
def without_jax(request):
    run = _run(request)
    box = run.without_jax("public")
    box.begin_import()
    return box


@pytest.fixture(scope="module")
def seed(request) -> int:
    return _run(request).seed


@pytest.fixture
def rng(request, seed):
    return check_rng(seed, request.node.name)


def pytest_sessionfinish(session, exitstatus):
    for run in _RUNS.values():
        for worker in run.workers():
            worker.close()
    _RUNS.clear()

"""Measure (and, where needed, grade) submissions in N worker processes, one sandbox each.

Each worker process keeps a sandbox *zygote* (a process that imported JAX once and forks
a fresh sandbox per submission, as ``grade batch`` does; ``GRADER_NO_ZYGOTE=1`` starts
each sandbox afresh) and handles one ``Task`` at a time: grade the submission's exercise
with ``grader.runner.grade`` and/or measure its fingerprint.  Results come back as plain
data; a task the worker fails on comes back with ``error`` set, never as a hole.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import inspect
import multiprocessing
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

_STATE: dict[str, Any] = {}


@dataclasses.dataclass(frozen=True)
class Task:
    index: int  # the caller's handle
    exercise: int
    root: str  # the checkout holding exercises/<dir>/<file>
    module_path: str  # the learner's file to measure
    grade: bool
    fingerprint: bool


def _init(manifest_path: str, course: str, hidden: str, course_cache: str = "") -> None:
    """In each worker process: the manifest, a zygote for its sandboxes, and the compile cache
    shared by the course's own files when the caller measures only those (``run_all``)."""
    import multiprocessing.util

    from grader.manifest import load

    os.environ["GRADER_NO_CACHE"] = "1"  # each file is measured once: no compile cache to pile up
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")  # the workers are the parallelism
    _STATE.update(manifest=load(Path(manifest_path)), course=Path(course), hidden=Path(hidden) if hidden else None,
                  zygote=None, course_cache=Path(course_cache) if course_cache else None)
    if os.environ.get("GRADER_NO_ZYGOTE") != "1":
        try:
            from grader.sandbox.client import Zygote

            _STATE["zygote"] = Zygote().start()
            multiprocessing.util.Finalize(None, _STATE["zygote"].close, exitpriority=10)
        except Exception:  # noqa: BLE001 - no zygote: every sandbox starts afresh, slower but the same
            _STATE["zygote"] = None


def _grade(task: Task) -> dict[str, Any]:
    from grader import runner

    manifest = _STATE["manifest"]
    kwargs = dict(course_root=_STATE["course"], submission_root=Path(task.root), hidden_root=_STATE["hidden"],
                  seed=None, course_cache=_STATE["course_cache"])
    if _STATE["zygote"] is not None and "zygote" in inspect.signature(runner.grade).parameters:
        kwargs["zygote"] = _STATE["zygote"]
    run = runner.grade(manifest, [task.exercise], **kwargs)
    found = [e for e in run.exercises if e.number == task.exercise]
    if len(found) != 1:
        raise RuntimeError(f"grading returned {len(run.exercises)} results for one exercise")
    return found[0].to_dict(private=True)


def _measure(task: Task) -> dict[str, Any]:
    from grader.compare import fingerprint
    from grader.compare.specs import spec_for

    ex = _STATE["manifest"].get(task.exercise)
    spec = spec_for(ex.slug)
    if spec is None:
        raise RuntimeError(f"exercise {ex.number} has no fingerprint spec")
    return fingerprint.measure(ex, spec, Path(task.module_path), _STATE["zygote"], course_cache=_STATE["course_cache"])


def run_task(task: Task) -> dict[str, Any]:
    """One task in a worker process: ``{"index", "result"?, "fingerprint"?, "error"?}``."""
    out: dict[str, Any] = {"index": task.index}
    try:
        if task.grade:
            out["result"] = _grade(task)
        if task.fingerprint:
            out["fingerprint"] = _measure(task)
    except Exception as exc:  # noqa: BLE001 - a grader bug is reported per submission
        out["error"] = f"{type(exc).__name__}: {exc}"
    return out


def run_all(tasks: list[Task], *, jobs: int, manifest_path: Path, course: Path, hidden: Path | None,
            on_done: Callable[[dict[str, Any]], None] | None = None,
            course_cache: Path | None = None) -> Iterator[dict[str, Any]]:
    """Run ``tasks`` over ``jobs`` processes; yields each task's outcome as it finishes.

    ``course_cache`` (``grader.cache.course_cache``) is a compile cache every sandbox shares:
    only when every file is the course's own and honest -- the test suite's classes of
    solutions and known-wrong files -- never for a learner's (``grade compare`` passes none)."""
    if not tasks:
        return
    ctx = multiprocessing.get_context("spawn")  # the caller may run threads (progress bars)
    workers = max(1, min(jobs, len(tasks)))
    with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init,
                                initargs=(str(manifest_path), str(course), str(hidden or ""),
                                          str(course_cache or ""))) as pool:
        futures = [pool.submit(run_task, t) for t in tasks]
        try:
            for future in cf.as_completed(futures):
                try:
                    out = future.result()
                except Exception as exc:  # noqa: BLE001 - the worker process died
                    index = tasks[futures.index(future)].index
                    out = {"index": index, "error": f"the worker process failed: {type(exc).__name__}: {exc}"}
                if on_done:
                    on_done(out)
                yield out
        except BaseException:
            for f in futures:
                f.cancel()
            raise

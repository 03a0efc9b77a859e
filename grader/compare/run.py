"""`grade compare`'s pipeline: collect the solutions, grade and measure what is missing, group.

``analyse`` returns an ``Analysis``: every solution of the exercise with its outcome,
fingerprint, normalised source and approach key, plus the reference solution's.  The
reports (``grader.compare.model``) are pure functions of it.

Nothing is measured twice: solutions with the same content hash share one grading and
one fingerprint, and the cache in the gradebook file (``grader.compare.store``) keeps
them across runs.  Outcomes come, in this order, from the gradebook's gradings (same
files), compare's own cache, or a fresh grading with the course's hidden checks.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grader import __version__
from grader.compare import features as featmod
from grader.compare import fingerprint as fpmod
from grader.compare import source_norm, sources, workers
from grader.compare.sources import CompareUsageError, Solution
from grader.compare.specs import ExerciseSpec, spec_for
from grader.compare.store import Store, StoreError
from grader.manifest import Exercise, Manifest
from grader.results import ExerciseResult

Progress = Callable[[int, int], None]  # (done, total)


@dataclasses.dataclass
class Options:
    number: int
    sources: list[str]
    course: Path
    gradebook: Path | None = None  # outcomes to reuse and where the cache lives
    jobs: int = 0  # 0: one per core
    instructor: bool = False
    progress: Progress | None = None
    #: a compile cache shared by every sandbox (``grader.cache.course_cache``): for a class made
    #: of the course's own files only (the test suite's); ``grade compare`` never sets it
    course_cache: Path | None = None


@dataclasses.dataclass
class Reference:
    code: str | None
    fingerprint: dict[str, Any] | None
    source_fp: source_norm.SourceFingerprint
    key: str
    features: featmod.Features | None = None


@dataclasses.dataclass
class Analysis:
    exercise: Exercise
    spec: ExerciseSpec | None
    solutions: list[Solution]
    codes: list[str | None]
    fingerprints: list[dict[str, Any] | None]
    source_fps: list[source_norm.SourceFingerprint]
    keys: list[str]  # variant keys: the exact fingerprint
    labels: dict[str, str]  # variant key -> description
    features: list[featmod.Features | None]  # what a strategy is read from (None: nothing to read)
    unmeasured: list[str]  # why a solution has no features ("" when it has)
    reference: Reference
    stub_code: str | None
    notes: list[str]
    stats: dict[str, Any]  # cache hits, measured now, graded now, seconds
    instructor: bool

    @property
    def results(self) -> list[ExerciseResult | None]:
        return [s.result for s in self.solutions]


def jax_version() -> str:
    from grader.runner import jax_version as version

    return version()


def _cache_path(opts: Options, collected: sources.Collected) -> Path | None:
    """The gradebook that holds the cache: --gradebook (made a gradebook when new), else the first SOURCE one."""
    if opts.gradebook is None:
        return collected.gradebooks[0] if collected.gradebooks else None
    path = opts.gradebook
    if not path.resolve().parent.is_dir():
        raise CompareUsageError(f"--gradebook {path}: the folder {path.parent} does not exist")
    from grader.course.gradebook import Gradebook, GradebookError

    try:
        Gradebook(path).close()  # creates an empty gradebook, or checks an existing one
    except GradebookError as exc:
        raise CompareUsageError(f"cannot use {path} as the gradebook: {exc}") from None
    return path


def _outcomes_from_gradebook(path: Path, ex: Exercise, wanted: set[str]) -> dict[str, ExerciseResult]:
    """The latest grading of ``ex`` in the gradebook for each content hash in ``wanted``
    (graded by this grader and JAX)."""
    found: dict[str, tuple[str, ExerciseResult]] = {}
    version = (__version__, jax_version())
    with sources.open_gradebook(path) as book:
        for row in book.gradings(history=True, private=True):
            h = row["content_hash"]
            if row["exercise"] != ex.number or h not in wanted or (row["grader_version"], row["jax_version"]) != version:
                continue
            if h not in found or row["graded_at"] >= found[h][0]:
                try:
                    found[h] = (row["graded_at"], ExerciseResult.from_dict(row["result"]))
                except Exception:  # noqa: BLE001 - an unreadable grading is graded again
                    continue
    return {h: r for h, (_, r) in found.items()}


def _fill_outcomes(sols: list[Solution], ex: Exercise, books: list[Path], store: Store, digest: str) -> None:
    missing = {s.content_hash for s in sols if s.result is None and s.root is not None}
    for book in books:
        if not missing:
            break
        for h, result in _outcomes_from_gradebook(book, ex, missing).items():
            for s in sols:
                if s.result is None and s.content_hash == h:
                    s.result, s.outcome_origin = result, "gradebook"
        missing = {s.content_hash for s in sols if s.result is None and s.root is not None}
    for h, result in store.outcomes(ex.number, digest, missing).items():
        for s in sols:
            if s.result is None and s.content_hash == h:
                s.result, s.outcome_origin = ExerciseResult.from_dict(result), "compare cache"


def _reference(ex: Exercise, course: Path) -> tuple[Path, str | None, str]:
    path = course / "solutions" / ex.dir / ex.module_file
    try:
        code = path.read_text(encoding="utf-8")
    except OSError:
        return path, None, ""
    return path, code, "reference:" + hashlib.sha256(code.encode()).hexdigest()[:32]


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


@dataclasses.dataclass
class _Work:
    tasks: list[workers.Task]
    by_index: dict[int, str]  # task index -> content hash


def _plan(sols: list[Solution], ex: Exercise, spec: ExerciseSpec | None, cached: dict[str, dict],
          ref: tuple[Path, str | None, str]) -> _Work:
    tasks, by_index, seen = [], {}, set()
    for s in sols:
        if s.root is None or s.content_hash in seen:
            continue
        grade = s.result is None
        measure = spec is not None and s.content_hash not in cached
        if grade or measure:
            seen.add(s.content_hash)
            by_index[len(tasks)] = s.content_hash
            tasks.append(workers.Task(len(tasks), ex.number, str(s.root), str(s.module_path(ex)), grade, measure))
    ref_path, ref_code, ref_hash = ref
    if spec is not None and ref_code is not None and ref_hash not in cached:
        by_index[len(tasks)] = ref_hash
        tasks.append(workers.Task(len(tasks), ex.number, str(ref_path.parent), str(ref_path), False, True))
    return _Work(tasks, by_index)


def _error_result(ex: Exercise, message: str) -> ExerciseResult:
    return ExerciseResult(number=ex.number, slug=ex.slug, title=ex.title, files=tuple(ex.files), seed=0, checks=(),
                          hidden_run=True, error=message)


@dataclasses.dataclass
class _Sink:
    """Where finished tasks go: the solutions, the fingerprints by content hash, the store."""

    sols: list[Solution]
    ex: Exercise
    spec: ExerciseSpec | None
    store: Store
    checks_digest: str
    fingerprints: dict[str, dict]
    graded: int = 0
    measured: int = 0

    def outcome(self, h: str, out: dict[str, Any]) -> None:
        try:
            if "result" not in out:
                raise ValueError(out.get("error", "grading failed"))
            result = ExerciseResult.from_dict(out["result"])
            if not result.error:
                self.store.put_outcome(h, self.ex.number, self.checks_digest, out["result"])
        except Exception as exc:  # noqa: BLE001 - one submission's failure is its own row
            result = _error_result(self.ex, str(exc) if "result" not in out else f"{type(exc).__name__}: {exc}")
        for s in self.sols:
            if s.content_hash == h and s.result is None:
                s.result, s.outcome_origin = result, "graded now"
        self.graded += 1

    def fingerprint(self, h: str, out: dict[str, Any]) -> None:
        if self.spec is None:
            return
        fp = out.get("fingerprint")
        if fp is not None:
            try:
                self.store.put_fingerprint(h, self.ex.number, self.spec.digest(), fp)
            except Exception as exc:  # noqa: BLE001 - kept for this run only; the rest is reported
                fp = {"spec_digest": self.spec.digest(), "measurements": [],
                      "error": f"the measurement could not be kept: {type(exc).__name__}: {exc}"}
        else:
            fp = {"spec_digest": self.spec.digest(), "error": out.get("error", "not measured"), "measurements": []}
        self.fingerprints[h] = fp
        self.measured += 1


def _execute(work: _Work, sink: _Sink, opts: Options, manifest: Manifest) -> dict[str, int]:
    """Run the planned tasks over ``opts.jobs`` processes, handing each result to ``sink``."""
    hidden = opts.course / "solutions" if (opts.course / "solutions").is_dir() else None  # else public checks only
    total = len(work.tasks)
    if opts.progress:
        opts.progress(0, total)
    finished = workers.run_all(work.tasks, jobs=opts.jobs or os.cpu_count() or 1, manifest_path=manifest.path,
                               course=opts.course, hidden=hidden, course_cache=opts.course_cache)
    for done, out in enumerate(finished, start=1):
        task = work.tasks[out["index"]]
        h = work.by_index[out["index"]]
        if task.grade:
            sink.outcome(h, out)
        if task.fingerprint:
            sink.fingerprint(h, out)
        if opts.progress:
            opts.progress(done, total)
    return {"graded_now": sink.graded, "measured_now": sink.measured}


def analyse(opts: Options, manifest: Manifest) -> Analysis:
    """Collect, grade and measure what is missing, and fingerprint every solution of exercise N."""
    t0 = time.monotonic()
    ex = manifest.get(opts.number)
    spec = spec_for(ex.slug)
    with tempfile.TemporaryDirectory(prefix="grade-compare-") as workdir:
        collected = sources.collect(opts.sources, ex, gradebook=opts.gradebook, workdir=Path(workdir))
        if not collected.solutions:
            raise CompareUsageError(f"no submission of exercise {ex.number} in the SOURCEs given"
                                    + (f" ({'; '.join(collected.problems)})" if collected.problems else ""))
        cache_path = _cache_path(opts, collected)
        try:
            store = Store(cache_path, grader_version=__version__, jax_version=jax_version())
        except StoreError as exc:
            raise CompareUsageError(str(exc)) from None
        with store:
            sols = collected.solutions
            digest = sources.checks_digest(ex, opts.course, opts.course / "solutions")
            books = collected.gradebooks + ([opts.gradebook] if opts.gradebook and opts.gradebook not in
                                            collected.gradebooks and opts.gradebook.exists() else [])
            _fill_outcomes(sols, ex, books, store, digest)
            ref = _reference(ex, opts.course)
            hashes = {s.content_hash for s in sols if s.content_hash} | ({ref[2]} if ref[2] else set())
            cached = store.fingerprints(ex.number, spec.digest(), hashes) if spec else {}
            hits = len(cached)
            work = _plan(sols, ex, spec, cached, ref)
            counts = _execute(work, _Sink(sols, ex, spec, store, digest, cached), opts, manifest)
            codes = [s.code(ex) for s in sols]
    stub = _read(opts.course / "exercises" / ex.dir / ex.module_file)
    analysis = _assemble(ex, spec, sols, codes, cached, ref, stub, opts)
    analysis.notes += collected.problems + _notes(ex, spec, sols, cache_path)
    analysis.stats = {"solutions": len(sols), "fingerprints_from_cache": hits, **counts,
                      "cache": str(cache_path) if cache_path else None, "seconds": round(time.monotonic() - t0, 2)}
    return analysis


@dataclasses.dataclass
class _Read:
    """What is read from one solution on the trusted side."""

    source_fp: source_norm.SourceFingerprint
    key: str
    label: str
    features: featmod.Features | None
    unmeasured: str


def _read_one(spec: ExerciseSpec | None, fp: dict[str, Any] | None, code: str | None, stub: str | None,
              sol: Solution | None) -> _Read:
    sfp = source_norm.fingerprint(code, stub)
    if sol is not None and sol.root is None:
        why = "not measured: code not on this machine"
        return _Read(sfp, "unmeasured", why, None, why)
    if spec is not None and (fp is None or fp.get("error")):
        why = "could not be measured: " + str((fp or {}).get("error", "no fingerprint"))
        return _Read(sfp, "measure-failed", why, None, why)
    key, label = fpmod.approach_key(spec, fp, code, sfp), fpmod.describe(spec, fp, code, sfp)
    if spec is None:
        return _Read(sfp, key, label, None, label)  # no spec: the variant is all there is
    feats = featmod.features_of(spec, fp, code)
    return _Read(sfp, key, label, feats, "" if feats.measured else _why_nothing(feats))


def _why_nothing(feats: featmod.Features) -> str:
    states = sorted({p.state for _, p in feats.parts} | {p.state for _, p in feats.python})
    return "nothing measured: " + ", ".join(s.replace("_", " ") for s in states)


def read_safely(spec: ExerciseSpec | None, fp: dict[str, Any] | None, code: str | None, stub: str | None,
                sol: Solution | None = None) -> _Read:
    """``_read_one``, with any failure kept as this solution's own result: one hostile file
    (a syntax tree deep enough to exhaust recursion, facts of the wrong shape) never stops
    the class report."""
    try:
        return _read_one(spec, fp, code, stub, sol)
    except Exception as exc:  # noqa: BLE001 - reported on the solution's own row
        why = f"could not be analysed: {type(exc).__name__}: {str(exc)[:200]}"
        return _Read(source_norm.SourceFingerprint(False, "", "", 0, frozenset(), why), "analysis-failed", why,
                     None, why)


def _assemble(ex: Exercise, spec: ExerciseSpec | None, sols: list[Solution], codes: list[str | None],
              cached: dict[str, dict], ref: tuple[Path, str | None, str], stub: str | None, opts: Options) -> Analysis:
    fps = [cached.get(s.content_hash) if spec else None for s in sols]
    reads = [read_safely(spec, fp, code, stub, sol) for fp, code, sol in zip(fps, codes, sols)]
    labels: dict[str, str] = {}
    for r in reads:
        labels.setdefault(r.key, r.label)
    ref_fp = cached.get(ref[2]) if spec and ref[2] else None
    ref_read = read_safely(spec, ref_fp, ref[1], stub) if ref[1] is not None else None
    ref_key = ref_read.key if ref_read and ref_read.key not in ("measure-failed", "analysis-failed") else ""
    reference = Reference(ref[1], ref_fp, ref_read.source_fp if ref_read else source_norm.fingerprint(None, stub),
                          ref_key, ref_read.features if ref_read else None)
    return Analysis(ex, spec, sols, codes, fps, [r.source_fp for r in reads], [r.key for r in reads], labels,
                    [r.features for r in reads], [r.unmeasured for r in reads], reference, stub, [], {},
                    opts.instructor)


def _notes(ex: Exercise, spec: ExerciseSpec | None, sols: list[Solution], cache: Path | None) -> list[str]:
    notes = []
    if spec is None:
        notes.append(f"exercise {ex.number} ({ex.slug}) has no fingerprint spec (no grader/exercises/<pkg>/compare.py): "
                     f"approaches are grouped by normalised source only (nothing was measured in a sandbox)")
    else:
        notes.append(f"approach measured from: {spec.note}")
    if cache is None:
        notes.append("nothing is cached between runs: pass --gradebook FILE to keep fingerprints and outcomes")
    unmeasured = [s.label for s in sols if s.root is None]
    if unmeasured:
        notes.append(f"{len(unmeasured)} submissions have outcomes only (their code is not on this machine)")
    changed = [s.label for s in sols if s.note.startswith("its files changed")]
    if changed:
        notes.append(f"{len(changed)} submissions changed since they were graded: their outcome is of an earlier version")
    return notes

"""`grade batch`: grade many submissions at once and record every result in the gradebook.

A *submission* is a checkout of the course holding a learner's files:

* a folder, graded as it is on disk;
* a git repository, by path (bare or not) or URL: its objects are copied into a bare
  repository the grader owns, in a cache folder next to the gradebook (``grades.sqlite``
  -> ``grades.repos/``), and graded at the commit its HEAD names (recorded with each
  grading); uncommitted changes in a local repository do not count.  A repository on this
  machine (a path or ``file://``) is imported object by object -- git never runs in it,
  so nothing its configuration names runs -- and a URL is cloned shallow, at most
  ``gitsafe.MAX_REPOSITORY_BYTES`` on disk (``grader.gitsafe``).  A later batch fetches
  into the same clone.

``NAME=SOURCE`` names a submission; the name then is its identity in the gradebook, so
the same learner keeps one history even when their folder moves.  Otherwise the label is
the folder's (or repository's) name and the identity its absolute path or URL.

The work is split into *units*, one per (submission, exercise).  Each unit is graded by
``grader.runner.grade`` for that one exercise (one sandbox) in one of N worker processes;
this process alone writes to the gradebook, one transaction per finished unit.  A unit
is identified by its *unit key*: the submission's identity, a hash of the exercise's
files in the submission, the exercise number, the grader and JAX versions, and a digest
of the exercise's checks (manifest entry, public and hidden check files).  A unit whose
key is already in the gradebook is skipped unless ``regrade`` (or, for units whose last
grading was a grader error, ``retry_errors``); so a batch killed at any point and started
again loses nothing and grades nothing twice.

Stopping: the first SIGINT or SIGTERM stops the batch cleanly -- workers are told to
stop (each closes its sandboxes), finished units stay recorded, the report says
``interrupted``; a second signal stops at once.  The sandbox's persistent compile cache is
turned off in batch workers: each fork is graded once, so a per-folder cache would only
pile up on disk; and BLAS libraries run one thread each (``OMP_NUM_THREADS`` and friends,
unless set): the workers are the parallelism, and idle BLAS threads only cost CPU.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import hashlib
import json
import multiprocessing
import multiprocessing.connection
import os
import re
import shutil
import signal
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from grader import __version__
from grader.course.gradebook import Gradebook, GradebookError, Grading
from grader.manifest import Exercise, Manifest
from grader.results import ExerciseResult, RunResult
from grader import gitsafe
from grader.gitsafe import GitError
from grader.submission import Snapshot, changed_files, read_commit, read_submission

_URL = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*://|[\w.-]+@[\w.-]+:)")
_NAMED = re.compile(r"^(?P<name>[A-Za-z0-9][\w.@+-]*)=(?P<source>.+)$")
WORKER_STOPPED = 86  # exit status of a worker that stopped because it was told to
#: What the clones next to one gradebook may occupy in all (each is at most
#: ``gitsafe.MAX_REPOSITORY_BYTES``): past it, no further fork is fetched.
MAX_CACHE_BYTES = 4 << 30


class SourceError(ValueError):
    """A SUBMISSION argument names nothing gradable (a usage error); the message says why."""


class FetchError(RuntimeError):
    """A git submission could not be cloned or updated."""


class BatchInterrupted(Exception):
    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@dataclasses.dataclass(frozen=True)
class Spec:
    """A SUBMISSION argument, understood but not fetched yet."""

    label: str
    key: str  # identity in the gradebook
    source: str  # the folder, repository path or URL
    git: bool


@dataclasses.dataclass(frozen=True)
class Submission:
    label: str
    key: str
    source: str
    root: Path  # the checkout that is graded
    commit: str = ""  # git submissions: the commit graded


@dataclasses.dataclass(frozen=True)
class Unit:
    submission: Submission
    exercise: Exercise
    content_hash: str  # the snapshot's digest: exactly what is graded
    checks_digest: str
    key: str
    snapshot: Snapshot | None = None


@dataclasses.dataclass
class BatchReport:
    submissions: list[Submission]
    units: list[Unit]  # every unit of the batch, graded now or earlier
    graded: list[tuple[Unit, ExerciseResult]]
    skipped: list[Unit]
    fetch_errors: list[tuple[Spec, str]]
    jobs: int
    seconds: float = 0.0
    interrupted: int = 0  # the signal that stopped the batch, or 0
    unsaved: list = dataclasses.field(default_factory=list)  # (unit, run, why) the gradebook could not record
    unsaved_file: Path | None = None  # where they were kept instead

    @property
    def grader_errors(self) -> list[tuple[Unit, ExerciseResult]]:
        return [(u, r) for u, r in self.graded if r.error]


class Progress(Protocol):
    def start(self, total: int, skipped: int) -> None: ...
    def done(self, unit: Unit, result: ExerciseResult) -> None: ...
    def close(self) -> None: ...


# --- submissions ---------------------------------------------------------------------------

def is_url(text: str) -> bool:
    return bool(_URL.match(text))


def without_credentials(url: str) -> str:
    """``url`` without a user name or token (``https://user:token@host/...``): what may be
    recorded.  The original is only ever handed to git."""
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/@]*@", r"\1", url)


def describe_checkout(folder: Path) -> str:
    """``<origin URL>@<commit>`` for a git checkout (the commit alone without a remote), else
    the folder's path; read from the repository's files as data (``grader.gitsafe``)."""
    git_dir, _ = gitsafe.find_repository(folder)
    if git_dir is None:
        return str(folder)
    try:
        commit = gitsafe.read_head(git_dir)
    except (GitError, OSError):
        return str(folder)
    try:
        origin = without_credentials(gitsafe.origin_url(git_dir))
    except OSError:
        origin = ""
    return f"{origin or folder}@{commit}"


def _is_git_repository(path: Path) -> bool:
    return gitsafe.find_repository(path)[0] is not None


def locate(arg: str) -> Spec:
    """Understand one SUBMISSION argument (nothing is fetched yet); SourceError if it names
    nothing gradable."""
    name, source = "", arg
    if not Path(arg).exists():
        m = _NAMED.match(arg)
        if m:
            name, source = m.group("name"), m.group("source")
    if is_url(source):
        tail = source.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
        label = name or tail.removesuffix(".git") or source
        return Spec(label, f"name:{name}" if name else without_credentials(source.rstrip("/")), source, git=True)
    path = Path(source).expanduser()
    if not path.exists():
        raise SourceError(f"{source}: no such folder, and not a git URL (https://..., ssh://..., git@host:...)")
    if not path.is_dir():
        raise SourceError(f"{source} is a file; give a checkout folder or a git repository")
    path = path.resolve()
    label = name or path.name.removesuffix(".git") or str(path)
    return Spec(label, f"name:{name}" if name else str(path), str(path), git=_is_git_repository(path))


def locate_all(args: list[str]) -> list[Spec]:
    """Every argument located, duplicates (the same identity twice) dropped."""
    specs: dict[str, Spec] = {}
    for arg in args:
        spec = locate(arg)
        specs.setdefault(spec.key, spec)
    return list(specs.values())


def repo_cache(gradebook: Path) -> Path:
    """Where git submissions are cloned: ``grades.sqlite`` -> ``grades.repos/``."""
    return gradebook.resolve().parent / f"{gradebook.stem}.repos"


def clone_path(cache: Path, label: str, key: str) -> Path:
    """Where a git submission's objects are kept in ``cache`` (``grade compare`` finds them here)."""
    safe = re.sub(r"[^\w.-]+", "_", label)[:40] or "repo"
    return cache / f"{safe}-{hashlib.sha256(key.encode()).hexdigest()[:12]}.git"


def fetch(spec: Spec, cache: Path) -> Submission:
    """The checkout to grade for ``spec``: a folder as is, or a grader-owned bare repository
    holding a git submission's objects (made or brought up to date in ``cache``)."""
    if not spec.git:
        return Submission(spec.label, spec.key, spec.source, Path(spec.source))
    dest = clone_path(cache, spec.label, spec.key)
    private_folder(cache)
    from grader.sandbox.disk import usage

    if usage(cache, stop_bytes=MAX_CACHE_BYTES)[0] > MAX_CACHE_BYTES:
        raise FetchError(f"the clones in {cache} already take over {MAX_CACHE_BYTES >> 30} GiB, the most a batch "
                         f"keeps; remove the clones of forks no longer graded")
    local = gitsafe.local_path_of(spec.source) if is_url(spec.source) else Path(spec.source)
    try:
        if local is None:
            store, commit = gitsafe.fetch_remote(spec.source, dest)
            store.close()
        else:
            commit = _import(local, dest)
    except GitError as exc:
        raise FetchError(str(exc)) from None
    return Submission(spec.label, spec.key, spec.source, dest, commit)


def _import(folder: Path, dest: Path) -> str:
    """A fresh import of the local repository in ``folder`` replaces ``dest``; its commit."""
    git_dir, why = gitsafe.find_repository(folder)
    if git_dir is None:
        raise GitError(why or f"{folder} is not a git repository")
    partial = dest.with_name(dest.name + ".partial")  # an import cut short is never mistaken for one
    shutil.rmtree(partial, ignore_errors=True)
    try:
        store, commit = gitsafe.import_local(git_dir, partial)
        store.close()
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    shutil.rmtree(dest, ignore_errors=True)
    partial.rename(dest)
    return commit


def private_folder(path: Path) -> Path:
    """Make ``path`` (and missing parents) and close it to other users: clones and the
    gradebook hold every learner's work and every verdict."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def fetch_all(specs: list[Spec], cache: Path) -> tuple[list[Submission], list[tuple[Spec, str]]]:
    """Fetch every submission (git ones a few at a time); the ones that fail are listed
    with the reason, and the rest are graded."""
    import concurrent.futures as cf

    def one(spec: Spec) -> Submission | str:
        try:
            return fetch(spec, cache)
        except FetchError as exc:
            return str(exc)

    with cf.ThreadPoolExecutor(max_workers=4) as pool:
        outcomes = list(pool.map(one, specs))
    subs = [o for o in outcomes if isinstance(o, Submission)]
    errors = [(s, o) for s, o in zip(specs, outcomes) if isinstance(o, str)]
    return subs, errors


# --- units ---------------------------------------------------------------------------------

def _hash_file(h, path: Path, name: str) -> None:
    h.update(name.encode() + b"\0")
    if path.is_file() and not path.is_symlink():
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    else:
        h.update(b"<missing>")
    h.update(b"\0")


def snapshot_for(sub: Submission, ex: Exercise, store: gitsafe.Store | None = None) -> Snapshot:
    """What is graded of ``sub`` for ``ex``: its HEAD commit's files for a git submission
    (read from the grader-owned repository ``sub.root``), the folder as it is on disk
    otherwise (``grader.submission``)."""
    if sub.commit:
        try:
            if store is None:
                with gitsafe.Store(sub.root) as own:
                    return read_commit(own, sub.commit, ex.dir, ex.files)
            return read_commit(store, sub.commit, ex.dir, ex.files)
        except Exception as exc:  # noqa: BLE001 - git failed: graded as a missing file, with the reason
            from grader.submission import SnapshotProblem

            return Snapshot(f"{sub.source}@{sub.commit[:12]}", ex.module_file, {},
                            problem=SnapshotProblem("missing_file", f"the commit could not be read ({exc})"))
    return read_submission(sub.root, ex.dir, ex.files)


def content_hash(ex: Exercise, root: Path) -> str:
    """The digest of what grading sees of the folder ``root`` for ``ex`` (its snapshot)."""
    return read_submission(root, ex.dir, ex.files).digest()


def checks_digest(ex: Exercise, course_root: Path, hidden_root: Path) -> str:
    """A digest of what decides ``ex``'s verdicts: its manifest entry (files, limits,
    checks) and its public and hidden check files."""
    h = hashlib.sha256(b"grade-checks-v1\0")
    h.update(repr((ex.number, ex.files, ex.timeout_s, ex.memory_mb, ex.cpu_devices, ex.clean_worker,
                   ex.checks)).encode())
    for path in (ex.public_checks(course_root), ex.hidden_checks(hidden_root)):
        _hash_file(h, path, path.name)
    return h.hexdigest()[:32]


def unit_key(sub_key: str, number: int, content: str, checks: str, grader: str, jax: str) -> str:
    text = json.dumps(["grade-unit-v1", sub_key, number, content, checks, grader, jax])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def plan(subs: list[Submission], exercises: list[Exercise], course_root: Path, hidden_root: Path) -> list[Unit]:
    digests = {ex.number: checks_digest(ex, course_root, hidden_root) for ex in exercises}
    from grader.runner import jax_version

    jax = jax_version()
    units = []
    for sub in subs:
        with contextlib.ExitStack() as stack:
            store = stack.enter_context(gitsafe.Store(sub.root)) if sub.commit else None
            for ex in exercises:
                snap = snapshot_for(sub, ex, store)
                content = snap.digest()
                units.append(Unit(sub, ex, content, digests[ex.number],
                                  unit_key(sub.key, ex.number, content, digests[ex.number], __version__, jax), snap))
    return units


def uncommitted_changes(report: "BatchReport") -> dict[str, list[str]]:
    """Per local git checkout of the batch: the exercise files on its disk that differ from
    the commit graded (the changes do not count).  Compared from files the grader read
    itself (``submission.changed_files``); git never runs in the checkout."""
    out: dict[str, list[str]] = {}
    for unit in report.units:
        sub = unit.submission
        if not sub.commit or is_url(sub.source) or unit.snapshot is None or unit.snapshot.problem is not None:
            continue
        git_dir, _ = gitsafe.find_repository(Path(sub.source))
        if git_dir is None or git_dir == Path(sub.source):  # bare: no work tree
            continue
        on_disk = read_submission(Path(sub.source), unit.exercise.dir, unit.exercise.files)
        names = changed_files(unit.snapshot, on_disk)
        if names:
            out.setdefault(sub.label, []).extend(f"{unit.exercise.dir}/{n}" for n in names)
    return out


# --- workers -------------------------------------------------------------------------------

def _worker_main(conn) -> None:
    """A grading process: grades the units it is sent, one at a time, until told to stop.

    SIGINT is ignored (the batch decides what a Ctrl-C means); SIGTERM stops it: a grading
    under way is abandoned (its sandboxes closed) and nothing more is sent back.
    """
    state = {"grading": False, "stop": False}

    def on_term(signum, frame):
        state["stop"] = True
        if state["grading"]:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, on_term)
    os.environ["GRADER_NO_CACHE"] = "1"
    from grader.sandbox.client import BLAS_THREAD_VARS, Zygote

    for var in BLAS_THREAD_VARS:  # the workers are the parallelism: no BLAS thread pools competing for cores
        os.environ.setdefault(var, "1")
    manifests: dict[str, Manifest] = {}
    # One JAX import for all this process's sandboxes; GRADER_NO_ZYGOTE=1 starts each afresh.
    zygote = Zygote() if os.environ.get("GRADER_NO_ZYGOTE") == "1" else Zygote().start()
    try:
        stopped = _serve_jobs(conn, state, manifests, zygote)
    finally:
        zygote.close()
    if stopped:
        raise SystemExit(WORKER_STOPPED)


def _serve_jobs(conn, state: dict, manifests: dict, zygote) -> bool:
    """Grade the units sent until there are no more (False) or this worker is stopped (True)."""
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return False
        if job is None:
            return False
        if state["stop"]:
            return True
        state["grading"] = True
        try:
            run = _grade_unit(job, manifests, zygote)
        except KeyboardInterrupt:
            run = None
        finally:
            state["grading"] = False
        if state["stop"] or run is None:
            return True
        try:
            conn.send(run)
        except (OSError, ValueError):
            return False


def _grade_unit(job: dict, manifests: dict[str, Manifest], zygote=None) -> RunResult:
    from grader import runner
    from grader.manifest import load

    if job["manifest"] not in manifests:
        manifests[job["manifest"]] = load(Path(job["manifest"]))
    manifest = manifests[job["manifest"]]
    root = Path(job["submission"])
    try:
        return runner.grade(manifest, [job["number"]], course_root=Path(job["course"]), submission_root=root,
                            snapshots={job["number"]: job["snapshot"]}, hidden_root=Path(job["hidden"]), seed=None,
                            zygote=zygote)
    except Exception as exc:  # a bug in the grader: still a result, never a hole
        return _error_run(manifest.get(job["number"]), root, exc, job.get("snapshot"))


def _error_run(ex: Exercise, root: Path, exc: BaseException | str, snapshot: Snapshot | None = None) -> RunResult:
    from grader import runner

    return runner.run_result([runner.grader_error_result(ex, snapshot, None, True, exc)], submission=root)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


@dataclasses.dataclass
class _Slot:
    proc: multiprocessing.process.BaseProcess
    conn: multiprocessing.connection.Connection
    unit: Unit | None = None


class _Workers:
    """N grading processes fed one unit at a time; yields (unit, RunResult) as they finish."""

    def __init__(self, jobs: int, job_for, stop_signal):
        self.jobs = jobs
        self.job_for = job_for
        self.stop_signal = stop_signal  # () -> the signal number asking to stop, or 0
        self.ctx = multiprocessing.get_context("spawn")  # this process may run threads (progress)
        self.slots: list[_Slot] = []

    def _spawn(self) -> _Slot:
        parent, child = self.ctx.Pipe()
        proc = self.ctx.Process(target=_worker_main, args=(child,), daemon=True, name="grade-batch-worker")
        proc.start()
        child.close()
        return _Slot(proc, parent)

    def run(self, units: list[Unit]) -> Iterator[tuple[Unit, RunResult]]:
        pending = collections.deque(units)
        try:
            self.slots = [self._spawn() for _ in range(min(self.jobs, len(units)))]
            while pending or any(s.unit for s in self.slots):
                if self.stop_signal():
                    raise BatchInterrupted(self.stop_signal())
                for slot in self.slots:
                    if slot.unit is None and pending:
                        slot.unit = pending.popleft()
                        try:
                            slot.conn.send(self.job_for(slot.unit))
                        except (OSError, ValueError):  # it died idle: the unit goes to a fresh one
                            self._replace(slot)
                            slot.conn.send(self.job_for(slot.unit))
                busy = [s for s in self.slots if s.unit is not None]
                ready = multiprocessing.connection.wait([s.conn for s in busy] + [s.proc.sentinel for s in busy],
                                                        timeout=0.2)
                for slot in busy:
                    if slot.conn in ready or slot.proc.sentinel in ready:
                        unit, slot.unit = slot.unit, None
                        yield unit, self._receive(slot, unit)
        finally:
            self._stop()

    def _receive(self, slot: _Slot, unit: Unit) -> RunResult:
        try:
            if slot.conn.poll():
                return slot.conn.recv()
        except Exception:  # noqa: BLE001 - a message cut short by the worker's death
            pass
        slot.proc.join(5)
        code = slot.proc.exitcode
        if code == WORKER_STOPPED:  # it was told to stop (e.g. SIGTERM sent to the whole group)
            raise BatchInterrupted(signal.SIGTERM)
        if code is None:
            how = "sent back something that is not a result"
        elif code < 0:
            how = f"was killed by signal {_signal_name(-code)}"
        else:
            how = f"exited with status {code}"
        self._replace(slot)
        return _error_run(unit.exercise, unit.submission.root, f"the grading process {how} while grading this unit",
                          unit.snapshot)

    def _replace(self, slot: _Slot) -> None:
        """A fresh worker in place of a dead (or confused) one."""
        if slot.proc.is_alive():
            slot.proc.kill()
        slot.proc.join()
        slot.conn.close()
        fresh = self._spawn()
        slot.proc, slot.conn = fresh.proc, fresh.conn

    def _stop(self) -> None:
        for slot in self.slots:
            if slot.proc.is_alive():
                if slot.unit is None:
                    with contextlib.suppress(OSError, ValueError):
                        slot.conn.send(None)
                else:
                    slot.proc.terminate()  # the worker abandons its grading and closes its sandboxes
        deadline = time.monotonic() + 15
        for slot in self.slots:
            slot.proc.join(max(0.0, deadline - time.monotonic()))
            if slot.proc.is_alive():
                slot.proc.kill()
                slot.proc.join()
            slot.conn.close()
        self.slots = []


# --- the batch -----------------------------------------------------------------------------

@contextlib.contextmanager
def _exclusive(gradebook: Path) -> Iterator[None]:
    """One batch at a time per gradebook (the lock goes with the process, even on SIGKILL)."""
    import fcntl

    lock_path = gradebook.with_name(gradebook.name + ".lock")
    with os.fdopen(os.open(lock_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600), "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise GradebookError(f"another `grade batch` is writing to {gradebook}; wait for it to finish") from None
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[dict]:
    """SIGINT/SIGTERM set ``state["signum"]``; a second one raises KeyboardInterrupt."""
    state = {"signum": 0}
    if threading.current_thread() is not threading.main_thread():
        yield state
        return

    def handler(signum, frame):
        if state["signum"]:
            raise KeyboardInterrupt
        state["signum"] = signum

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield state
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def run_batch(manifest: Manifest, specs: list[Spec], *, course_root: Path, hidden_root: Path, gradebook: Path,
              hidden_digest: str = "", numbers: list[int] | None = None, jobs: int | None = None,
              regrade: bool = False, retry_errors: bool = False, progress: Progress | None = None) -> BatchReport:
    """Grade every (submission, exercise) of ``specs`` not yet in ``gradebook`` and record them.

    Raises GradebookError when the gradebook cannot be used; a submission that cannot be
    fetched is listed in the report (``fetch_errors``) and the others are graded.
    """
    t0 = time.monotonic()
    gradebook = Path(gradebook)
    exercises = [manifest.get(n) for n in numbers] if numbers else list(manifest.exercises)
    jobs = max(1, jobs or os.cpu_count() or 1)
    with _stop_on_signals() as stop, Gradebook(gradebook) as book, _exclusive(gradebook):
        book.check_writable()  # before any grading work: a gradebook that cannot record wastes it all
        subs, fetch_errors = fetch_all(specs, repo_cache(gradebook))
        units = plan(subs, exercises, course_root, hidden_root)
        done = set() if regrade else book.unit_keys() - (book.failed_unit_keys() if retry_errors else set())
        todo = [u for u in units if u.key not in done]
        report = BatchReport(subs, units, [], [u for u in units if u.key in done], fetch_errors, jobs)

        def job_for(unit: Unit) -> dict:
            return {"manifest": str(manifest.path), "course": str(course_root), "submission": str(unit.submission.root),
                    "number": unit.exercise.number, "hidden": str(hidden_root), "snapshot": unit.snapshot}

        if progress:
            progress.start(len(todo), len(report.skipped))
        try:
            if stop["signum"]:
                raise BatchInterrupted(stop["signum"])
            workers = _Workers(jobs, job_for, lambda: stop["signum"])
            with contextlib.closing(workers.run(todo)) as finished:
                for unit, run in finished:
                    try:
                        result = _record(book, unit, run, hidden_digest)
                    except sqlite3.Error as exc:  # the disk filled up, the file went read-only...
                        result = _the_exercise(run, unit)
                        report.unsaved.append((unit, run, str(exc)))
                    report.graded.append((unit, result))
                    if progress:
                        progress.done(unit, result)
        except BatchInterrupted as exc:
            report.interrupted = int(exc.signum)
        finally:
            if progress:
                progress.close()
            if report.unsaved:
                report.unsaved_file = _keep_unsaved(gradebook, report.unsaved)
    report.seconds = time.monotonic() - t0
    return report


def _keep_unsaved(gradebook: Path, unsaved: list) -> Path:
    """Gradings the gradebook could not record, kept in a private JSON file beside it
    (``grade gradebook import`` reads it once the gradebook works again; signed like
    ``grade ci``'s results when the course keeps a key: ``grader.course.result_file``)."""
    from grader.course import result_file

    stamp = time.strftime("%Y%m%dT%H%M%S")
    path = gradebook.with_name(f"{gradebook.name}.unsaved-{stamp}.json")
    data = [result_file.sign(dataclasses.replace(run, submission=unit.submission.label).to_dict(private=True))
            for unit, run, _ in unsaved]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1)
    return path


def _record(book: Gradebook, unit: Unit, run: RunResult, hidden_digest: str) -> ExerciseResult:
    result = _the_exercise(run, unit)
    sub = unit.submission
    book.add(Grading(
        result=result, submission=sub.label, submission_key=sub.key, source=without_credentials(sub.source),
        commit=sub.commit,
        content_hash=unit.content_hash, unit_key=unit.key, grader_version=run.grader_version,
        jax_version=run.jax_version, hidden_digest=hidden_digest, checks_digest=unit.checks_digest,
        graded_at=run.started_at, origin="batch",
    ))
    return result


def _the_exercise(run: RunResult, unit: Unit) -> ExerciseResult:
    found = [e for e in run.exercises if e.number == unit.exercise.number]
    if len(found) == 1:
        return found[0]
    return _error_run(unit.exercise, unit.submission.root, f"grading returned {len(run.exercises)} results for one "
                      f"exercise", unit.snapshot).exercises[0]

"""`grade verify`: prove that every check in the suite can fail, and that nothing cheap passes.

For each exercise it grades, with the hidden checks on:

* the reference solution          -> full marks;
* the untouched stub              -> 0, every check saying "not implemented";
* each ``fixtures/<dir>/<name>/`` -> kind "wrong": each check in ``must_fail`` loses its
                                     points; kind "cheat": 0 in total.  A fixture with
                                     ``base = "solution"`` (or ``"stub"``) holds only the
                                     mistake: its file is appended to that base, so the
                                     definitions it holds replace the base's;
* each generic cheat in ``fixtures/cheats/<trick>/`` applied to the stub -> 0 in total;
* each known-wrong fixture again, with the public checks only, stopping at the first one that
  fails (``runner.grade(first_failure=True)``) -> a public check fails (status ``failed`` or
  ``integrity``: a grader error, or a check blocked by one, catches nothing): public checks
  must catch every kind of mistake on their fixed inputs, or a learner
  hears "public checks pass" and moves on with a wrong file.  Only a fixture that over-fits
  the public inputs (a hard-coded answer), or gets wrong something no public check can ask
  without giving the answer away, may pass them all, and its ``fixture.toml`` says why
  (``passes_public = "..."``);

and checks statically that every exercise has a statement, at least two hints, at least
three known-wrong fixtures, that every fixture names real checks, and that the exercise's
requirement map ties every requirement of its statement to a check and a fixture
(``grader.course.requirements``).  Gradings run in
parallel worker processes (each a normal ``runner.grade`` call); every case is graded from
a snapshot built in memory (``grader.submission``), never from a file written for it.

A check's hidden inputs are drawn from the seed, so one seed proves little: ``seeds=K``
grades every reference solution and every known-wrong fixture at K seeds (fixed: the same K
every run, and the same for every file of an exercise), and each must hold at every one of
them -- full marks for a solution, the declared checks lost for a fixture.  That every seed
draws the cases a check needs is proven for all seeds by the coverage tests
(``grader.coverage``); these K show that the checks catch the mistakes on real draws.  Cheats,
whose tricks do not depend on the draws, are graded at the first of them (``CHEAT_SEED``).
A later seed's grading waits for the first seed's, which says which checks drew from the seed
(their tests ask for ``seed`` or ``rng``: ``ExerciseResult.seeded``): where none did, the later
grading would repeat the first on the same inputs and is not run; a solution's later seeds
run only the checks that drew (``repeat``).

The seeds are shared so that work is: the gradings of one exercise at one seed ask the
reference solution and the clean worker the same questions, which a pool process answers
once (``grader.sandbox.memo``), and compile the same programs (the solution's, where a
fixture keeps its code; the clean worker's truth), which one compile cache for the whole
run holds (``grader.cache.course_cache``; not given to cheats).  Measured on exercise 7 at
two seeds: 170 s with the file's own seed and no shared cache, 105 s now.

A verdict needs only the checks it rests on, so only those run (``runner.grade(only=...)``):
a known-wrong fixture runs the checks it declares it loses (and what they require), a
cheat every check that scores; solutions and stubs run everything.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import dataclasses
import multiprocessing
import os
import time
import tomllib
from pathlib import Path
from typing import Callable

from grader import cache
from grader.course import requirements
from grader.manifest import Exercise, Manifest
from grader.results import ERROR, FAILED, INTEGRITY, NOT_RUN
from grader.submission import Snapshot, from_source, read_folder

MIN_WRONG_FIXTURES = 3
MIN_HINTS = 2


@dataclasses.dataclass(frozen=True)
class Case:
    number: int
    label: str  # "solution", "stub", "fixture:<name>", "public:<fixture name>", "cheat:<trick>"
    expect: str  # "full", "zero", "not_implemented", "must_fail", "public_fails"
    snapshot: Snapshot
    must_fail: tuple[str, ...] = ()
    seed: int | None = None  # None: the seed the snapshot gives
    only: tuple[str, ...] | None = None  # the checks the verdict rests on (None: all of them)
    public_fails_too: bool = False  # "must_fail" that runs a public check: also judged as "public_fails"
    repeat_of: str = ""  # a later seed's case: the label of the first seed's (graded first; see `repeat`)


@dataclasses.dataclass
class Outcome:
    case: Case
    ok: bool
    problem: str = ""
    score: int = 0
    max_score: int = 0
    seconds: float = 0.0
    workers_cpu_s: float = 0.0  # CPU its sandboxes used (grader.session.ExerciseRun.timings)
    cpu_by_role: dict[str, float] = dataclasses.field(default_factory=dict)  # the same, by worker role
    seeded: tuple[str, ...] = ()  # the checks that ran and drew from the seed (ExerciseResult.seeded)
    fixed_cpu: tuple[float, float] = (0.0, 0.0)  # of workers_cpu_s: the workers' start-up, the learner's imports


@dataclasses.dataclass
class Report:
    outcomes: list[Outcome]
    static_problems: list[str]
    seconds: float
    #: later-seed cases not graded: nothing their first seed's grading ran drew from the seed, so
    #: they would have repeated it exactly (the grader is deterministic)
    repeats_skipped: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.static_problems and all(o.ok for o in self.outcomes)

    def to_dict(self) -> dict:
        return {
            "ok": self.ok,
            "seconds": round(self.seconds, 1),
            "static_problems": self.static_problems,
            "repeats_skipped": self.repeats_skipped,
            "cases": [
                {"exercise": o.case.number, "case": o.case.label, "expect": o.case.expect, "ok": o.ok,
                 "score": o.score, "max_score": o.max_score, "problem": o.problem, "seconds": round(o.seconds, 2),
                 "workers_cpu_s": round(o.workers_cpu_s, 2),
                 "start_cpu_s": round(o.fixed_cpu[0], 2), "import_cpu_s": round(o.fixed_cpu[1], 2),
                 "cpu_by_role": {role: round(s, 2) for role, s in o.cpu_by_role.items()}}
                for o in self.outcomes
            ],
        }


def read_fixture(folder: Path) -> dict:
    return tomllib.loads((folder / "fixture.toml").read_text(encoding="utf-8"))


BASES = {"solution": "solutions", "stub": "exercises"}


def fixture_source(ex: Exercise, course: Path, folder: Path) -> str | None:
    """The full learner file a fixture stands for, or ``None`` when its file is whole already.

    ``base + "\n\n" + mistake``: later definitions win in Python, so the fixture's file only
    needs the functions that differ -- the same way generic cheats are applied to stubs.
    """
    base = read_fixture(folder).get("base")
    if base is None:
        return None
    if base not in BASES:
        raise ValueError(f"{folder}/fixture.toml: base must be one of {sorted(BASES)}, not {base!r}")
    base_text = (course / BASES[base] / ex.dir / ex.module_file).read_text(encoding="utf-8")
    mistake = (folder / ex.module_file).read_text(encoding="utf-8")
    return f"{base_text}\n\n# ---- the fixture's own code (fixtures/{ex.dir}/{folder.name}) ----\n{mistake}"


def verify_seeds(k: int) -> list[int]:
    """The seeds of ``--seeds k``: k fixed seeds (the same every run, for every file)."""
    import hashlib

    return [int.from_bytes(hashlib.sha256(f"grade-verify-seed:{i}".encode()).digest()[:4], "big")
            for i in range(1, max(k, 1) + 1)]


#: Cheats (generic and an exercise's own) are graded at one seed -- what they try does not
#: depend on the draws -- the first of the fixtures' (what a pool process remembers already).
CHEAT_SEED = verify_seeds(1)[0]


def cases_for(ex: Exercise, course: Path, seeds: int = 1) -> tuple[list[Case], list[str]]:
    problems = []
    stub = course / "exercises" / ex.dir / ex.module_file
    solution = read_folder(course / "solutions" / ex.dir, (), (ex.module_file,))
    solution = from_source(str(course / "solutions" / ex.dir / ex.module_file), ex.module_file, solution.source())
    stub_snap = from_source(str(stub), ex.module_file, stub.read_bytes() if stub.is_file() else b"")
    all_seeds = verify_seeds(seeds)
    cases = [Case(ex.number, "solution" + _at(i, seed), "full", solution, seed=seed, repeat_of="solution" if i else "")
             for i, seed in enumerate(all_seeds)]
    cases.append(Case(ex.number, "stub", "not_implemented", stub_snap, seed=all_seeds[0]))
    readme = course / "exercises" / ex.dir / "README.md"
    if not readme.is_file() or len(readme.read_text(encoding="utf-8").strip()) < 200:
        problems.append(f"exercise {ex.number}: no statement (exercises/{ex.dir}/README.md)")
    if len(ex.hints) < MIN_HINTS or not all(h.strip() for h in ex.hints):
        problems.append(f"exercise {ex.number}: needs at least {MIN_HINTS} non-empty hints")
    wrong = 0
    check_names = {c.name for c in ex.checks}
    scoring = tuple(c.name for c in ex.checks if c.points > 0)  # what a cheat must not earn
    public_checks = tuple(c.name for c in ex.checks if c.visibility == "public")
    for folder in sorted((course / "fixtures" / ex.dir).glob("*/")):
        if not (folder / "fixture.toml").is_file():
            continue
        meta = read_fixture(folder)
        kind = meta.get("kind")
        path = str(folder / ex.module_file)
        try:
            whole = fixture_source(ex, course, folder)
        except ValueError as exc:
            problems.append(str(exc))
            continue
        source = whole.encode("utf-8") if whole is not None else (folder / ex.module_file).read_bytes()
        snap = from_source(path, ex.module_file, source)
        if kind == "wrong":
            must_fail = tuple(meta.get("must_fail", []))
            unknown = [m for m in must_fail if m not in check_names]
            if not must_fail or unknown:
                problems.append(f"fixture {folder.name} (exercise {ex.number}): must_fail {list(must_fail)} "
                                f"must name checks of the exercise")
                continue
            wrong += 1
            # public inputs are fixed: one grading says whether a public check catches it -- the
            # fixture's grading at the first seed, when it declares a public check lost
            public_asked = public_checks and not str(meta.get("passes_public", "")).strip()
            public_too = bool(public_asked and set(must_fail) & set(public_checks))
            cases += [Case(ex.number, f"fixture:{folder.name}{_at(i, seed)}", "must_fail", snap, must_fail, seed,
                           only=must_fail, public_fails_too=public_too and i == 0,
                           repeat_of=f"fixture:{folder.name}" if i else "")
                      for i, seed in enumerate(all_seeds)]
            if public_asked and not public_too:
                cases.append(Case(ex.number, f"public:{folder.name}", "public_fails", snap, seed=all_seeds[0],
                                  only=public_checks))
        elif kind == "cheat":
            cases.append(Case(ex.number, f"cheat:{folder.name}", "zero", snap, seed=CHEAT_SEED, only=scoring))
        else:
            problems.append(f"fixture {folder}: kind must be 'wrong' or 'cheat'")
    problems += requirements.check_exercise(ex, course)
    if wrong < MIN_WRONG_FIXTURES:
        problems.append(f"exercise {ex.number}: {wrong} known-wrong fixtures; at least {MIN_WRONG_FIXTURES} needed")
    stub_text = stub.read_bytes() if stub.is_file() else b""
    for trick in sorted((course / "fixtures" / "cheats").glob("*/")):
        if not (trick / "cheat.py").is_file():
            continue
        extra = {p.name: p.read_bytes() for p in trick.iterdir() if p.name not in ("cheat.py", "fixture.toml")}
        source = stub_text + b"\n\n" + (trick / "cheat.py").read_bytes()
        cases.append(Case(ex.number, f"cheat:{trick.name}", "zero",
                          from_source(str(trick / "cheat.py"), ex.module_file, source, extra), seed=CHEAT_SEED,
                          only=scoring))
    return cases, problems


def _at(i: int, seed: int) -> str:
    """A case's label names its seed after the first (``fixture:x``, ``fixture:x@seed=123``)."""
    return "" if i == 0 else f"@seed={seed}"


_ZYGOTE = None  # one per grading-pool process: every case's sandboxes fork from it
_COURSE_CACHE: str | None = None  # the pool's shared compile cache (grader.cache.course_cache), or None


def _start_zygote(compile_cache: str | None = None) -> None:
    """Pool initializer: import JAX once in this worker process's zygote; remember the pool's
    compile cache."""
    import atexit
    import signal

    from grader.sandbox.client import Zygote

    global _ZYGOTE, _COURSE_CACHE
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what an interrupt means
    _COURSE_CACHE = compile_cache
    _ZYGOTE = Zygote().start()
    atexit.register(_ZYGOTE.close)


@contextlib.contextmanager
def grading_pool(jobs: int):
    """Processes that grade the course's own files (``grade verify``, the test suite's course
    gradings) with ``grade_course_file``: each forks its sandboxes from a zygote of its own,
    and all of them share one compile cache (``grader.cache.course_cache``; off with
    ``GRADER_NO_CACHE=1``)."""
    shared = cache.course_cache() if os.environ.get("GRADER_NO_CACHE") != "1" else contextlib.nullcontext()
    with shared as folder, cf.ProcessPoolExecutor(
            max_workers=jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_start_zygote,
            initargs=(str(folder) if folder else None,)) as pool:
        yield pool


def grade_course_file(manifest: Manifest, numbers: list[int], *, cheat: bool = False, **kwargs):
    """In a ``grading_pool`` process: ``runner.grade`` with this process's zygote and the pool's
    compile cache -- never for a cheat (a folder every sandbox user writes is a channel between
    gradings: harmless only when each graded file is the course's own and honest)."""
    from grader import runner

    zygote = _ZYGOTE if _ZYGOTE is not None and _ZYGOTE.alive else None
    shared = Path(_COURSE_CACHE) if _COURSE_CACHE and not cheat else None
    return runner.grade(manifest, numbers, zygote=zygote, course_cache=shared, **kwargs)


_MANIFESTS: dict = {}  # manifest path -> Manifest, in a grading-pool process (one verify run reads one)


def _run_case(manifest_path: str, course: str, case: Case) -> Outcome:
    """Runs in a grading-pool process."""
    from grader.manifest import load
    from grader.sandbox import memo

    t0 = time.monotonic()
    manifest = _MANIFESTS.get(manifest_path)
    if manifest is None:  # read once per pool process: parsing it costs more than a cheap grading's checks
        manifest = _MANIFESTS[manifest_path] = load(Path(manifest_path))
    course_root = Path(course)
    run = grade_course_file(manifest, [case.number], cheat=case.expect == "zero", course_root=course_root,
                            hidden_root=course_root / "solutions", snapshots={case.number: case.snapshot},
                            seed=case.seed, only={case.number: case.only} if case.only is not None else None,
                            first_failure=case.expect == "public_fails")
    ex = run.exercises[0]
    problem = audit = ""
    if memo.audit_mismatches:  # GRADER_MEMO_AUDIT=1: a remembered answer the live worker did not give
        audit = "remembered answers differ from the live worker's: " + "; ".join(memo.audit_mismatches)[:2000] + "; "
        memo.audit_mismatches.clear()
    if case.expect == "full":
        bad = [c for c in ex.checks if not c.passed and (case.only is None or c.status != NOT_RUN)]
        if bad:
            problem = "; ".join(_why(c) for c in bad)
    elif case.expect == "not_implemented":
        if ex.score:
            problem = f"the stub scores {ex.score}"
        loud = [c.name for c in ex.checks if "not implemented" not in c.message]
        if loud:
            problem += f" checks not saying 'not implemented': {loud}"
    elif case.expect == "must_fail":
        # a grader error is not a verdict: the check must really fail (or be blocked, or zeroed)
        caught = {c.name for c in ex.checks if not c.passed and c.status != ERROR}
        missed = [m for m in case.must_fail if m not in caught]
        errors = [c.name for c in ex.checks if c.name in missed and c.status == ERROR]
        if missed:
            problem = f"not caught by {missed}" + (f" (grader error in {errors})" if errors else "")
    elif case.expect == "zero":
        if ex.score:
            problem = f"scores {ex.score}/{ex.max_score}: " + ", ".join(c.name for c in ex.checks if c.score)
    if case.expect == "public_fails" or case.public_fails_too:
        if not any(c.status in (FAILED, INTEGRITY) for c in ex.checks if c.visibility == "public"):
            problem += ("; " if problem else "") + ("passes every public check: a learner with this mistake is told the public checks pass; "
                        "make a public check catch it, or say why none can (fixture.toml passes_public)")
    problem = audit + problem
    return Outcome(case, not problem, problem.strip(), ex.score, ex.max_score, time.monotonic() - t0,
                   sum(t.get("cpu_s", 0.0) for t in ex.timings.values()),
                   {role: t.get("cpu_s", 0.0) for role, t in ex.timings.items()}, ex.seeded,
                   (sum(t.get("start_cpu_s", 0.0) for t in ex.timings.values()),
                    sum(t.get("import_cpu_s", 0.0) for t in ex.timings.values())))


def repeat(case: Case, first: Outcome) -> Case | None:
    """What a later seed's case must grade, given its first seed's outcome: nothing (``None``)
    when no check that ran there drew from the seed -- every input, and so the verdict, would
    be the same (the grader is deterministic; ``test_same_submission_same_result``); for a
    solution, only the checks that drew (the others passed at the first seed on the same
    inputs; what they require runs with them); for a fixture, the same checks again."""
    if not first.seeded:
        return None
    if case.expect == "full":
        return dataclasses.replace(case, only=first.seeded)
    return case


def _why(check) -> str:
    """A failed check in the instructor's words: its message, and for a hidden check the
    private text (what the learner's process printed before it crashed, the traceback)."""
    text = f"{check.name}: {check.status}: {check.message} {check.measured}".strip()
    private = " | ".join(line.strip() for line in (check.private or check.detail or "").splitlines() if line.strip())
    return text + (f" [private: {private[-600:]}]" if private and private not in text else "")


def verify(manifest: Manifest, course: Path, *, numbers: list[int] | None = None, jobs: int | None = None,
           progress: Callable[[str], None] | None = None, seeds: int = 1) -> Report:
    t0 = time.monotonic()
    cases, problems = [], []
    for ex in manifest.exercises:
        if numbers and ex.number not in numbers:
            continue
        c, p = cases_for(ex, course, seeds)
        cases += c
        problems += p
    outcomes: list[Outcome] = []
    skipped: list[str] = []
    # a later seed's case waits for its first seed's outcome, which says what it must grade (`repeat`)
    later: dict[tuple[int, str], list[Case]] = {}
    for c in cases:
        if c.repeat_of:
            later.setdefault((c.number, c.repeat_of), []).append(c)
    with grading_pool(jobs or os.cpu_count() or 1) as pool:
        def submit(c: Case):
            return pool.submit(_run_case, str(manifest.path), str(course), c)

        pending = {submit(c): c for c in cases if not c.repeat_of}
        while pending:
            done, _ = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
            for fut in done:
                case = pending.pop(fut)
                try:
                    outcome = fut.result()
                except Exception as exc:  # a grader crash is a verify failure, not a crash of verify
                    outcome = Outcome(case, False, f"grader error: {type(exc).__name__}: {exc}")
                outcomes.append(outcome)
                for again in later.pop((case.number, case.label), []):
                    narrowed = repeat(again, outcome)
                    if narrowed is None:
                        skipped.append(f"exercise {again.number} {again.label}")
                    else:
                        pending[submit(narrowed)] = narrowed
                if progress:
                    mark = "ok  " if outcome.ok else "FAIL"
                    progress(f"{mark} exercise {case.number} {case.label:<32} {outcome.score}/{outcome.max_score}"
                             f"  {outcome.problem}")
    outcomes.sort(key=lambda o: (o.case.number, o.case.label))
    return Report(outcomes, problems, time.monotonic() - t0, sorted(skipped))


def print_report(report: Report) -> None:
    from rich.console import Console

    console = Console()
    for p in report.static_problems:
        console.print(f"[red]problem:[/] {p}")
    failed = [o for o in report.outcomes if not o.ok]
    for o in failed:
        console.print(f"[red]FAIL[/] exercise {o.case.number} {o.case.label}: {o.problem}")
    n = len(report.outcomes)
    per: dict[int, list[float]] = {}
    for o in report.outcomes:
        total = per.setdefault(o.case.number, [0.0, 0.0])
        total[0] += o.seconds
        total[1] += o.workers_cpu_s
    console.print("[dim]time by exercise (gradings' wall s / their sandboxes' CPU s): " + ", ".join(
        f"{number}: {wall:.0f}/{cpu:.0f}" for number, (wall, cpu) in sorted(per.items())) + "[/]")
    roles: dict[str, float] = {}
    for o in report.outcomes:
        for role, cpu in o.cpu_by_role.items():
            roles[role] = roles.get(role, 0.0) + cpu
    if roles:
        console.print("[dim]sandbox CPU s by worker: " + ", ".join(
            f"{role} {cpu:.0f}" for role, cpu in sorted(roles.items(), key=lambda t: -t[1])) + "[/]")
        start = sum(o.fixed_cpu[0] for o in report.outcomes)
        imports = sum(o.fixed_cpu[1] for o in report.outcomes)
        console.print(f"[dim]of which the workers' start-up {start:.0f}, the learners' imports {imports:.0f}[/]")
    verdict = "[green]suite verified[/]" if report.ok else "[red]suite NOT verified[/]"
    if report.repeats_skipped:
        console.print(f"[dim]{len(report.repeats_skipped)} later-seed gradings not repeated: nothing their "
                      "first seed's grading ran drew from the seed[/]")
    console.print(f"{verdict}: {n - len(failed)}/{n} gradings as expected, "
                  f"{len(report.static_problems)} static problems, {report.seconds:.0f} s")

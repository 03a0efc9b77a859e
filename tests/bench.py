"""`make bench`: how long grading takes, measured against a bare JAX start-up.

The floor is a fresh `python -c "import jax; jax.jit(lambda x: x + 1)(1.0)"`: no grader can
start faster than JAX can.  Then `grade exercise N` for every N and `grade all`, each on a
checkout holding the reference solutions (the full amount of grading work), each run
REPEAT times in a fresh process.  The sandbox's persistent compile cache is warm after the
first run, as it is for a learner re-grading; the last row turns it off (GRADER_NO_CACHE=1).
Prints medians and each as a ratio to the floor, with the targets (every exercise <= 1.5x;
all <= 4x for six exercises plus 0.4x for each further one), and writes
bench-results/latest.json.

Then `grade watch`'s save-to-verdict latency on a learner's copy (public checks only), for
every exercise, driven through a pseudo-terminal (target <= 0.5 s).

Then `grade batch` throughput: BENCH_FORKS synthetic forks of the course (the reference
solutions, the stubs, known-wrong fixtures, generic cheats; every exercise in each) graded
into a fresh gradebook with -j 1 and with -j 2, one after the other in this run; reported
as submissions graded per minute, with the target speed-up from 1 to 2 workers (>= 1.7x),
under "batch" in the same file.  Each row also gives the CPU time the batch used and so
the cores it kept busy: one worker already keeps more than one core busy (XLA compiles on
more than one thread, the sandbox works while the trusted side runs its checks, and some
exercises run a second, clean JAX process), which bounds the speed-up on a machine with
few cores: with 1.2 cores busy at -j 1, two cores can give at most about 1.7x.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REPEAT = int(os.environ.get("BENCH_REPEAT", "3"))
TARGET_EXERCISE = 1.5  # x the floor, every exercise
TARGET_WATCH_S = 0.5   # save to verdict in `grade watch`


def target_all(exercises: int) -> float:
    """`grade all`: 4x the floor for six exercises, at most +0.4x for each further one."""
    return 4.0 + 0.4 * max(0, exercises - 6)
BENCH_FORKS = int(os.environ.get("BENCH_FORKS", "6"))
TARGET_BATCH_SPEEDUP = 1.7
BIN = Path(sys.executable).parent


def timed(cmd: list[str], **kw) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, **kw)
    return time.perf_counter() - t0


def median_of(cmd: list[str], **kw) -> float:
    timed(cmd, **kw)  # warm the disk cache once
    return statistics.median(timed(cmd, **kw) for _ in range(REPEAT))


def solutions_checkout() -> Path:
    sys.path.insert(0, str(REPO))
    from grader.manifest import load

    dst = Path(tempfile.mkdtemp(prefix="grade-bench-"))
    for ex in load(REPO / "exercises" / "manifest.toml").exercises:
        (dst / "exercises" / ex.dir).mkdir(parents=True)
        for f in ex.files:
            shutil.copy(REPO / "solutions" / ex.dir / f, dst / "exercises" / ex.dir / f)
    return dst, [ex.number for ex in load(REPO / "exercises" / "manifest.toml").exercises]


def synthetic_forks(n: int) -> tuple[Path, list[str]]:
    """``n`` checkouts: solutions, stubs, then alternately a known-wrong fixture and a generic
    cheat for every exercise (the k-th of each, so no two forks are alike)."""
    sys.path.insert(0, str(REPO))
    from grader.course import verify
    from grader.manifest import load

    exercises = load(REPO / "exercises" / "manifest.toml").exercises
    cheats = sorted(p for p in (REPO / "fixtures" / "cheats").glob("*/") if (p / "cheat.py").is_file())
    root = Path(tempfile.mkdtemp(prefix="grade-bench-forks-"))
    forks = []
    for i in range(n):
        kind = ["solution", "stub", "wrong", "cheat"][min(i, 2 + i % 2)]
        fork = root / f"{kind}-{i}"
        for ex in exercises:
            folder = fork / "exercises" / ex.dir
            folder.mkdir(parents=True)
            stub = (REPO / "exercises" / ex.dir / ex.module_file).read_text(encoding="utf-8")
            if kind in ("solution", "stub"):
                base = REPO / ("solutions" if kind == "solution" else "exercises") / ex.dir
                for f in ex.files:
                    shutil.copy(base / f, folder / f)
                continue
            if kind == "wrong":
                wrong = [p for p in sorted((REPO / "fixtures" / ex.dir).glob("*/"))
                         if verify.read_fixture(p).get("kind") == "wrong"]
                pick = wrong[(i // 2) % len(wrong)]
                text = verify.fixture_source(ex, REPO, pick) or (pick / ex.module_file).read_text(encoding="utf-8")
            else:
                trick = cheats[(i // 2) % len(cheats)]
                text = stub + "\n\n" + (trick / "cheat.py").read_text(encoding="utf-8")
                for extra in trick.iterdir():
                    if extra.name not in ("cheat.py", "fixture.toml"):
                        shutil.copy(extra, folder / extra.name)
            (folder / ex.module_file).write_text(text, encoding="utf-8")
        forks.append(str(fork))
    return root, forks


def bench_watch(sub: Path, numbers: list[int], saves: int = 3) -> dict:
    """Save-to-verdict latency of `grade watch` on a learner's copy (public checks only):
    for every exercise, the solution is saved ``saves`` times (a new comment each time, so
    its content and seed change as an edit's would) and the clock runs from the write to
    the "graded in" line on the terminal."""
    sys.path.insert(0, str(REPO / "tests"))
    from pty_terminal import Terminal

    from grader.manifest import load

    manifest = load(REPO / "exercises" / "manifest.toml")

    env = {**os.environ, "TERM": "xterm", "COLUMNS": "120", "LINES": "60"}
    rows = []
    for n in numbers:
        term = Terminal([str(BIN / "grade"), "watch", str(n), "--submission", str(sub), "--public-only", "--stay"],
                        REPO, env)
        try:
            term.wait_for(r"graded in [\s\S]*quit", timeout=180)
            ex = manifest.get(n)
            path = sub / "exercises" / ex.dir / ex.module_file
            base = path.read_text(encoding="utf-8")
            times = []
            for k in range(saves):
                term.buf = b""
                t0 = time.monotonic()
                path.write_text(base + f"\n# edit {k}\n", encoding="utf-8")
                term.wait_for(r"graded in [\s\S]*quit", timeout=180)
                times.append(time.monotonic() - t0)
            path.write_text(base, encoding="utf-8")
            term.type(b"q")
            term.close()
        finally:
            if term.proc.poll() is None:
                term.proc.kill()
        rows.append({"exercise": n, "median_s": round(statistics.median(times), 3), "max_s": round(max(times), 3)})
    return {"saves": saves, "target_s": TARGET_WATCH_S, "rows": rows}


def children_cpu() -> float:
    """CPU seconds used so far by finished child processes (and theirs): what a batch cost."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def bench_batch(numbers: list[int]) -> dict:
    root, forks = synthetic_forks(BENCH_FORKS)
    rows = []
    try:
        for jobs in (1, 2):
            book = root / f"grades-j{jobs}.sqlite"
            cpu0 = children_cpu()
            secs = timed([str(BIN / "grade"), "batch", *forks, "--gradebook", str(book), "-j", str(jobs), "--quiet"])
            cpu = children_cpu() - cpu0
            db = sqlite3.connect(book)
            units, errors = db.execute("SELECT count(*), count(NULLIF(error, '')) FROM gradings").fetchone()
            db.close()
            if units != len(forks) * len(numbers) or errors:
                raise RuntimeError(f"grade batch -j {jobs} recorded {units} gradings ({errors} grader errors); "
                                   f"expected {len(forks) * len(numbers)} without errors")
            rows.append({"jobs": jobs, "seconds": round(secs, 2), "units": units,
                         "submissions_per_minute": round(len(forks) * 60 / secs, 2),
                         "cpu_s": round(cpu, 1), "cores_busy": round(cpu / secs, 2)})
    finally:
        shutil.rmtree(root, ignore_errors=True)
    speedup = rows[1]["submissions_per_minute"] / rows[0]["submissions_per_minute"]
    return {"forks": len(forks), "rows": rows, "speedup": round(speedup, 2), "target_speedup": TARGET_BATCH_SPEEDUP}


def main() -> int:
    grade = str(BIN / "grade")
    sub, numbers = solutions_checkout()
    rows = []
    try:
        floor = median_of([sys.executable, "-c", "import jax; jax.jit(lambda x: x + 1)(1.0)"])
        rows.append(("floor: import jax + one jit", floor, None))
        for n in numbers:
            rows.append((f"grade exercise {n}", median_of([grade, "exercise", str(n), "--submission", str(sub)]),
                         TARGET_EXERCISE))
        rows.append(("grade all", median_of([grade, "all", "--submission", str(sub)]), target_all(len(numbers))))
        cold = dict(os.environ, GRADER_NO_CACHE="1")
        rows.append(("grade all, no compile cache", median_of([grade, "all", "--submission", str(sub)], env=cold), None))
    finally:
        shutil.rmtree(sub, ignore_errors=True)
    print(f"{'what':<30} {'median s':>9} {'x floor':>8} {'target':>7}")
    ok = True
    for name, secs, target in rows:
        ratio = secs / floor
        verdict = "" if target is None else ("ok" if ratio <= target else "SLOW")
        ok &= verdict != "SLOW"
        tgt = "" if target is None else f"<={target:g}x"
        print(f"{name:<30} {secs:>9.2f} {ratio:>7.2f}x {tgt:>7} {verdict}")
    out = REPO / "bench-results"
    out.mkdir(exist_ok=True)
    (out / "latest.json").write_text(json.dumps(
        {"cores": os.cpu_count(), "repeat": REPEAT, "floor_s": floor,
         "rows": [{"name": n, "median_s": round(s, 3), "ratio": round(s / floor, 2), "target": t} for n, s, t in rows]},
        indent=2))
    print(f"({os.cpu_count()} cores, median of {REPEAT} runs each; written to bench-results/latest.json)")
    sub, _ = solutions_checkout()
    try:
        watch = bench_watch(sub, numbers)
    finally:
        shutil.rmtree(sub, ignore_errors=True)
    print(f"\ngrade watch on a learner's copy, save to verdict (median of {watch['saves']} saves; "
          f"target <= {TARGET_WATCH_S} s):")
    for r in watch["rows"]:
        verdict = "ok" if r["median_s"] <= TARGET_WATCH_S else "SLOW"
        print(f"  exercise {r['exercise']:>2}: {r['median_s']:.2f} s (slowest {r['max_s']:.2f} s) {verdict}")
    batch = bench_batch(numbers)
    print(f"\ngrade batch, {batch['forks']} synthetic forks of every exercise, once each:")
    for r in batch["rows"]:
        print(f"  -j {r['jobs']}: {r['seconds']:>7.2f} s  {r['submissions_per_minute']:>6.2f} submissions/minute"
              f"  ({r['cpu_s']:.0f} CPU s: {r['cores_busy']:.2f} cores busy)")
    fast = batch["speedup"] >= TARGET_BATCH_SPEEDUP
    print(f"  speed-up 1 -> 2 workers: {batch['speedup']:.2f}x (target >= {TARGET_BATCH_SPEEDUP}x) "
          f"{'ok' if fast else 'SLOW'}")
    results = json.loads((out / "latest.json").read_text())
    results["batch"] = batch
    results["watch"] = watch
    (out / "latest.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`make bench`: how long grading takes, measured against a bare JAX start-up.

The floor is a fresh `python -c "import jax; jax.jit(lambda x: x + 1)(1.0)"`: no grader can
start faster than JAX can.  Then `grade exercise N` for every N and `grade all`, each on a
checkout holding the reference solutions (the full amount of grading work), each run
REPEAT times in a fresh process.  The sandbox's persistent compile cache is warm after the
first run, as it is for a learner re-grading; the last row turns it off (GRADER_NO_CACHE=1).  Prints medians and each as a ratio to the floor, with
the targets (exercise <= 2.5x, all <= 8x), and writes bench-results/latest.json.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REPEAT = int(os.environ.get("BENCH_REPEAT", "3"))
TARGET_EXERCISE, TARGET_ALL = 2.5, 8.0
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
        rows.append(("grade all", median_of([grade, "all", "--submission", str(sub)]), TARGET_ALL))
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
    return 0


if __name__ == "__main__":
    sys.exit(main())

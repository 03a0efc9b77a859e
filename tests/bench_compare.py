"""`make bench` (compare part): `grade compare` on 200 submissions of exercise 3, 2 workers.

The submissions are generated: eight base files (the reference, two other idioms, four
known-wrong fixtures, the stub), each copied with every local name renamed and its
comments rewritten (``tests/compare_class/build.rename_copy``), so all 200 files differ
byte for byte and each must be fingerprinted.  Their outcomes are put in a gradebook
first, as `grade batch` would leave them (each base file graded once, every copy's result
imported with `grade gradebook import`): not timed.

Timed, each in a fresh process (`grade compare 3 grades.sqlite -j 2 --json`):

* cold: nothing cached, every file measured in a sandbox (target: under 2 minutes);
* warm: the same command again, everything from the cache (target: under 5 s).

``BENCH_COMPARE_GRADING=1`` also times compare on the 200 folders with a fresh cache and
no outcomes (it grades each file too; no target).  Prints the numbers as JSON and writes
them to ``bench-results/compare.json``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

SUBMISSIONS = int(os.environ.get("BENCH_COMPARE_SUBMISSIONS", "200"))
JOBS = 2
TARGET_COLD_S, TARGET_WARM_S = 120.0, 5.0
BASES = ("reference", "idiom-ravel", "idiom-closure", "fixture-python_loop", "fixture-squared_norms",
         "fixture-not_jitted", "fixture-batch_mean_gradient", "stub")


def make_forks(root: Path) -> dict[str, tuple[Path, str]]:
    """SUBMISSIONS forks: label -> (folder, the base variant it copies)."""
    from compare_class import build

    folder, file = build.EXERCISE_DIRS[3]
    stub = (REPO / "exercises" / folder / file).read_text()
    bases = {v.name: v for v in build.variants(3) if v.name in BASES}
    forks = {}
    for k in range(SUBMISSIONS):
        base = bases[BASES[k % len(BASES)]]
        label = f"learner-{k:03d}"
        target = root / label / "exercises" / folder / file
        target.parent.mkdir(parents=True)
        target.write_text(build.rename_copy(base.text, f"b{k}x", stub))
        forks[label] = (root / label, base.name)
    return forks


def base_outcomes(root: Path, forks: dict[str, tuple[Path, str]]) -> dict[str, object]:
    """Each base variant graded once (compare's own grading, on one copy of each)."""
    from grader.compare import run
    from grader.manifest import load

    manifest = load(REPO / "exercises" / "manifest.toml")
    first = {}
    for label, (path, base) in forks.items():
        first.setdefault(base, (label, path))
    analysis = run.analyse(run.Options(3, [str(p) for _, p in first.values()], REPO, jobs=JOBS), manifest)
    by_label = {s.label: s.result for s in analysis.solutions}
    return {base: by_label[Path(path).name] for base, (_, path) in first.items()}


def fill_gradebook(book: Path, forks: dict[str, tuple[Path, str]], outcomes: dict[str, object], tmp: Path) -> None:
    from click.testing import CliRunner

    from grader import __version__
    from grader.course.cli import gradebook_group
    from grader.results import RunResult
    from grader.runner import jax_version

    runner = CliRunner()
    for label, (path, base) in forks.items():
        run_result = RunResult(exercises=(outcomes[base],), grader_version=__version__, jax_version=jax_version(),
                               seed_option=None, started_at="2025-01-01T00:00:00+00:00", submission=str(path))
        file = tmp / f"{label}.json"
        file.write_text(json.dumps(run_result.to_dict(private=True)))
        out = runner.invoke(gradebook_group, ["import", "--gradebook", str(book), "--submission", label, str(file)])
        if out.exit_code != 0:
            raise SystemExit(f"could not fill the gradebook: {out.output}")


def timed_compare(args: list[str]) -> tuple[float, dict]:
    cmd = [sys.executable, "-c", "from grader.compare.cli import compare_cmd; compare_cmd()", "3", *args,
           "-j", str(JOBS), "--json", "--quiet"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"grade compare failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return seconds, json.loads(proc.stdout)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-compare-") as tmp_name:
        tmp = Path(tmp_name)
        forks = make_forks(tmp / "forks")
        outcomes = base_outcomes(tmp, forks)
        book = tmp / "grades.sqlite"
        (tmp / "results").mkdir()
        fill_gradebook(book, forks, outcomes, tmp / "results")
        cold_s, cold = timed_compare([str(book)])
        warm_s, warm = timed_compare([str(book)])
        result = {
            "benchmark": "grade compare", "exercise": 3, "submissions": SUBMISSIONS, "jobs": JOBS,
            "cpu_count": os.cpu_count(),
            "cold_s": round(cold_s, 2), "warm_s": round(warm_s, 2),
            "cold_measured": cold["stats"]["measured_now"], "warm_measured": warm["stats"]["measured_now"],
            "warm_from_cache": warm["stats"]["fingerprints_from_cache"],
            "strategies": len(cold["strategies"]), "variants": len(cold["variants"]),
            "outcome_groups": len(cold["outcome_groups"]),
            "targets": {"cold_s": TARGET_COLD_S, "warm_s": TARGET_WARM_S},
            "ok": cold_s < TARGET_COLD_S and warm_s < TARGET_WARM_S,
        }
        if os.environ.get("BENCH_COMPARE_GRADING") == "1":
            folders = [str(path) for path, _ in forks.values()]
            grading_s, graded = timed_compare([*folders, "--gradebook", str(tmp / "fresh.sqlite")])
            result["cold_with_grading_s"] = round(grading_s, 2)
            result["cold_with_grading_graded"] = graded["stats"]["graded_now"]
    out = REPO / "bench-results"
    out.mkdir(exist_ok=True)
    (out / "compare.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

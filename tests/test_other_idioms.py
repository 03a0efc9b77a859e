"""A right file in another idiom never loses points.

``tests/other_idioms/<exercise dir>/<idiom>.py`` holds whole learner files for exercises 1, 5
and 6, each right but written unlike the reference solution (other key representations and
jit layouts, fori_loop / cond-in-scan / while-state scans, other jaxpr walks and answers
typed in or computed).  Each is graded with the hidden checks at the seeds ``grade verify
--seeds 3`` uses -- its own and two fixed others -- and must get full marks at every one.

One ``runner.grade`` call grades one idiom of each exercise at once (their sandboxes start
together), so the nine files need nine gradings, spread over the cores like ``grade verify``.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
from pathlib import Path

import pytest

from grader import runner
from grader.manifest import load
from grader.submission import from_source
from grader.verify import verify_seeds

REPO = Path(__file__).resolve().parents[1]
MANIFEST_PATH = REPO / "exercises" / "manifest.toml"
IDIOMS = REPO / "tests" / "other_idioms"
EXERCISES = (1, 5, 6)
SEEDS = verify_seeds(3)  # None: the seed the file itself gives


def idiom_files():
    manifest = load(MANIFEST_PATH)
    return {n: sorted((IDIOMS / manifest.get(n).dir).glob("*.py")) for n in EXERCISES}


def _grade(group: dict[int, str], seed: int | None) -> list[tuple[int, str, int | None, int, int, list[str]]]:
    """Runs in a worker process: one grading of one idiom per exercise."""
    manifest = load(MANIFEST_PATH)
    snapshots = {n: from_source(path, manifest.get(n).module_file, Path(path).read_bytes()) for n, path in group.items()}
    run = runner.grade(manifest, sorted(group), course_root=REPO, hidden_root=REPO / "solutions",
                       snapshots=snapshots, seed=seed)
    return [(ex.number, group[ex.number], ex.seed, ex.score, ex.max_score,
             [f"{c.name}: {c.status}: {c.message}" for c in ex.checks if not c.passed] + ([ex.error] if ex.error else []))
            for ex in run.exercises]


@pytest.fixture(scope="module")
def outcomes():
    files = idiom_files()
    groups = [{n: str(files[n][i]) for n in EXERCISES} for i in range(3)]
    jobs = [(group, seed) for group in groups for seed in SEEDS]
    ctx = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(max_workers=min(len(jobs), os.cpu_count() or 1), mp_context=ctx) as pool:
        return [row for rows in pool.map(_grade, *zip(*jobs)) for row in rows]


def test_three_idioms_per_exercise():
    for n, files in idiom_files().items():
        assert len(files) == 3, f"exercise {n}: {files}"


def test_every_idiom_gets_full_marks_at_every_seed(outcomes):
    assert len(outcomes) == 3 * len(EXERCISES) * len(SEEDS)
    lost = [f"exercise {n} {Path(path).name} seed {seed}: {score}/{max_score}: {problems}"
            for n, path, seed, score, max_score, problems in outcomes if score != max_score or problems]
    assert not lost, "\n".join(lost)

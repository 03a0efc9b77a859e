"""A right file in another idiom never loses points.

``tests/other_idioms/<exercise dir>/<idiom>.py`` holds whole learner files, each right but
written unlike the reference solution: for exercises 1, 5 and 6 other key representations
and jit layouts, fori_loop / cond-in-scan / while-state scans, other jaxpr walks and
answers typed in or computed; for 7-12 (written from the statements alone) other param
layouts, losses, optax/equinox routes, HLO parsers, timers and remat layouts.

Exercises 1, 5 and 6 (three idioms or more each) are graded at every seed ``grade verify
--seeds 3`` uses, with one grading call grading one idiom of each at once.  The later
exercises are heavier (optax, equinox, several compiles per check), so each of their idioms is graded once, alone, at one of those seeds, the
seeds taken in turn; they were also graded at all three when they were written.  Every
grading must give full marks.  They run in ``grade verify``'s grading pool and share its compile
cache (``grader.cache.course_cache``): every file here is the course's own and honest.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from grader.course import verify
from grader.course.verify import verify_seeds
from grader.manifest import load
from grader.submission import from_source

REPO = Path(__file__).resolve().parents[1]
MANIFEST_PATH = REPO / "exercises" / "manifest.toml"
IDIOMS = REPO / "tests" / "other_idioms"
EXERCISES = (1, 5, 6)  # every idiom at every seed
SEEDS = verify_seeds(3)


def idiom_files(numbers=None):
    """{exercise number: its idiom files}, for every exercise with a folder here."""
    manifest = load(MANIFEST_PATH)
    found = {ex.number: sorted((IDIOMS / ex.dir).glob("*.py")) for ex in manifest.exercises}
    return {n: files for n, files in found.items() if files and (numbers is None or n in numbers)}


def _grade(group: dict[int, str], seed: int) -> list[tuple[int, str, int, int, int, list[str]]]:
    """Runs in a worker process: one grading of one idiom per exercise."""
    manifest = load(MANIFEST_PATH)
    snapshots = {n: from_source(path, manifest.get(n).module_file, Path(path).read_bytes()) for n, path in group.items()}
    run = verify.grade_course_file(manifest, sorted(group), course_root=REPO, hidden_root=REPO / "solutions",
                                   snapshots=snapshots, seed=seed)
    return [(ex.number, group[ex.number], ex.seed, ex.score, ex.max_score,
             [f"{c.name}: {c.status}: {c.message}" + (f" [private: {(c.private or '')[-800:]}]" if c.status == "error" else "")
              for c in ex.checks if not c.passed] + ([ex.error] if ex.error else []))
            for ex in run.exercises]


@pytest.fixture(scope="module")
def outcomes():
    files = idiom_files(EXERCISES)
    groups = [{n: str(files[n][i]) for n in EXERCISES if i < len(files[n])}
              for i in range(max(len(f) for f in files.values()))]
    jobs = [(group, seed) for group in groups for seed in SEEDS]
    # the later exercises: each idiom alone, at one seed, the seeds taken in turn
    later = [(n, path) for n, paths in idiom_files().items() if n not in EXERCISES for path in paths]
    jobs += [({n: str(path)}, SEEDS[i % len(SEEDS)]) for i, (n, path) in enumerate(later)]
    # as `grade verify` does: one JAX import per pool process (its zygote), not one per grading
    with verify.grading_pool(min(len(jobs), os.cpu_count() or 1)) as pool:
        return [row for rows in pool.map(_grade, *zip(*jobs)) for row in rows]


def test_idioms_cover_the_exercises_they_claim():
    files = idiom_files()
    assert all(len(files[n]) >= 3 for n in EXERCISES), files
    assert set(files) >= {1, 5, 6, 7, 8, 9, 10, 11, 12} and all(len(f) >= 2 for f in files.values())


def test_every_idiom_gets_full_marks(outcomes):
    later = sum(len(f) for n, f in idiom_files().items() if n not in EXERCISES)
    assert len(outcomes) == sum(len(idiom_files(EXERCISES)[n]) for n in EXERCISES) * len(SEEDS) + later
    lost = [f"exercise {n} {Path(path).name} seed {seed}: {score}/{max_score}: {problems}"
            for n, path, seed, score, max_score, problems in outcomes if score != max_score or problems]
    assert not lost, "\n".join(lost)

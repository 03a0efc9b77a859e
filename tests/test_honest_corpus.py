"""Honest code is never called a cheat: every reference solution, combined with the
everyday Python a learner writes, gets full marks and no ``integrity`` verdict.

The variants are built here from the solutions and the idioms of ``tests/honest_corpus.py``
(namedtuple, typing, enum, dataclasses, logging, warnings, traceback, socket/platform,
files next to the learner's file, tempfile/pickle, timers, functools, inspect, threads,
matplotlib, SciPy, JAX's profiler and debugging tools, a ``__main__`` block, ...), each used
at import time and inside the graded calls.  The idioms are spread over ``BUNDLES``
variants per exercise, every idiom in one of them, so each exercise meets every idiom:
one grading per exercise and bundle (19 x 9 = 171 gradings; at least 150 is asserted).

What a grading runs: each exercise's cheapest *measured* hidden checks (the ones an
integrity verdict would zero: compile counts, jaxpr and HLO measurements in the learner's
process) with what they require -- ``SELECTED``.  An accusation is recorded for the whole
sandbox, whichever check was running, so these catch it as well as a full grading would.

Group testing: each exercise is graded once with *every* idiom at once (19 gradings, in
``grade verify``'s grading pool of two processes, each with its own zygote, sharing its compile
cache: every variant is the course's own honest code).  Only when an
exercise loses something is it graded again with the idioms spread over ``BUNDLES``
variants, so the failure names the idiom that caused it.  The pass path proves the same
claim as grading every bundle (each solution meets every idiom, at import and in the graded
calls) in a ninth of the gradings.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import honest_corpus as hc
from grader.course import verify

REPO = Path(__file__).resolve().parents[1]
BUNDLES = 9
#: exercise -> hidden checks graded (their requirements run too): cheap, measured, calling the learner's functions
SELECTED = {
    1: ("predicts_weak_types", "predicts_cache_reuse"),
    2: ("compiles_at_most_buckets",),
    3: ("one_compile_per_shape",),
    4: ("weights_really_sharded",),
    5: ("no_python_unrolling",),
    6: ("counts_inside_every_construct",),
    7: ("metric_does_not_grow_with_batch",),
    8: ("grads_mirror_the_model",),
    9: ("export_batch_is_symbolic",),
    10: ("unfused_match_module",),
    11: ("predicts_dot_cost", "analyze_matches_live"),  # not the timing checks: a loaded machine makes them noisy
    12: ("momentum_step_compiles_once",),
    13: ("dense_is_a_pytree", "pure_step_writes_no_globals"),
    14: ("switch_compiles_once", "safe_sqrt_gradient_finite"),  # apply_branch is a jit object: idioms run in safe_sqrt
    15: ("init_mlp_keys_independent", "noise_one_draw_per_batch"),  # JAX's key-reuse checker, a jaxpr
    16: ("hvp_never_forms_the_hessian", "softmax_keeps_only_its_output"),
    17: ("predicts_batch_split", "fsdp_gathers_weights"),
    18: ("megatron_one_all_reduce",),
    19: ("softmax_kernel_layout",),
}

def _grade(numbers: list[int], idioms_of: tuple[int, int]) -> list[tuple]:
    """Runs in a grading-pool process: the exercises ``numbers``, each with bundle ``idioms_of[0]``
    of ``hc.bundles(idioms_of[1])`` (``(0, 1)``: every idiom), graded in one ``runner.grade`` call."""
    from grader.manifest import load
    from grader.submission import from_source

    manifest = load(REPO / "exercises" / "manifest.toml")
    index, of = idioms_of
    idioms = hc.bundles(of)[index]
    snapshots = {}
    for ex in hc.exercises(REPO):
        if ex.number not in numbers:
            continue
        text, files = hc.variant(REPO, ex, idioms)
        snapshots[ex.number] = from_source(str(REPO / "honest" / f"bundle{index}of{of}" / ex.dir / ex.file), ex.file,
                                           text.encode(), {k: v.encode() for k, v in files.items()})
    t0 = time.monotonic()
    run = verify.grade_course_file(manifest, sorted(snapshots), course_root=REPO, hidden_root=REPO / "solutions",
                                   snapshots=snapshots, only={n: list(SELECTED[n]) for n in snapshots})
    names = ", ".join(i.name for i in idioms)
    return [(ex.number, names, ex.score, ex.max_score, list(ex.integrity),
             [f"{c.name}: {c.status}: {c.message}" for c in ex.checks if c.status not in ("passed", "not_run")],
             [c.name for c in ex.checks if c.status == "passed"], "HV-CALLED" in ex.private + ex.output,
             time.monotonic() - t0) for ex in run.exercises]


def _lost(row) -> bool:
    n, _, score, max_score, integrity, problems, passed, called, _ = row
    return score != max_score or bool(integrity) or bool(problems) or not set(SELECTED[n]) <= set(passed) or not called


@pytest.fixture(scope="module")
def gradings():
    """Every exercise with every idiom; an exercise that lost anything, again bundle by bundle."""
    t0 = time.monotonic()
    numbers = [ex.number for ex in hc.exercises(REPO)]
    with verify.grading_pool(min(2, os.cpu_count() or 1)) as pool:
        halves = [numbers[0::2], numbers[1::2]]
        rows = [row for rows in pool.map(_grade, halves, [(0, 1)] * 2) for row in rows]
        failing = sorted(row[0] for row in rows if _lost(row))
        diagnosis = []
        if failing:  # name the idiom: the failing exercises again, one bundle of idioms at a time
            diagnosis = [row for rows in pool.map(_grade, [failing] * BUNDLES, [(i, BUNDLES) for i in range(BUNDLES)])
                         for row in rows]
    print(f"\nhonest corpus: {len(rows)} gradings with every idiom, {len(diagnosis)} to diagnose, "
          f"{time.monotonic() - t0:.0f} s")
    return rows, diagnosis


def test_the_corpus_covers_every_idiom_with_every_solution():
    assert len(hc.IDIOMS) >= 14
    assert hc.bundles(1) == [hc.IDIOMS]  # what each exercise is graded with first
    bundles = hc.bundles(BUNDLES)  # what names the culprit
    assert sorted(i.name for b in bundles for i in b) == sorted(i.name for i in hc.IDIOMS)
    assert all(b for b in bundles)
    text, _ = hc.variant(REPO, hc.exercises(REPO)[0], hc.IDIOMS)
    assert all(i.name in text for i in hc.IDIOMS)


def test_every_honest_variant_gets_full_marks_and_no_accusation(gradings):
    rows, diagnosis = gradings
    assert sorted(row[0] for row in rows) == [ex.number for ex in hc.exercises(REPO)]
    lost = [f"exercise {n} with every idiom: {score}/{max_score}; integrity {integrity}; {problems}; "
            f"passed {passed}; the graded calls ran the idioms: {called}"
            for n, _, score, max_score, integrity, problems, passed, called, _ in filter(_lost, rows)]
    culprits = [f"  exercise {n} with only {names}: {score}/{max_score}; integrity {integrity}; {problems}"
                for n, names, score, max_score, integrity, problems, _, _, _ in filter(_lost, diagnosis)]
    assert not lost, "\n".join(lost + ["bundle by bundle:"] + (culprits or ["  no bundle alone loses anything: "
                                                                             "the idioms together do"]))

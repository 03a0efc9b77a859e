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
sandbox, whichever check was running, so these catch it as well as a full grading would;
a full grading of every exercise with all the idioms at once was run when the corpus was
written.  Gradings go through a pool of processes, each with its own zygote, one bundle of
every exercise per ``runner.grade`` call.  Cost: about 170 CPU-seconds in all
(measured with a cgroup while the machine ran other work), so about a minute and a half
on two free cores.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
import time
from pathlib import Path

import pytest

import honest_corpus as hc

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

_STATE: dict = {}


def _start_worker() -> None:
    from multiprocessing.util import Finalize

    from grader.sandbox.client import Zygote

    _STATE["zygote"] = Zygote().start()
    Finalize(None, _STATE["zygote"].close, exitpriority=10)  # pool workers leave through os._exit


def _grade_bundle(index: int) -> list[tuple]:
    """Runs in a pool process: bundle ``index`` applied to every exercise, graded at once."""
    from grader import runner
    from grader.manifest import load
    from grader.submission import from_source

    manifest = load(REPO / "exercises" / "manifest.toml")
    idioms = hc.bundles(BUNDLES)[index]
    snapshots = {}
    for ex in hc.exercises(REPO):
        text, files = hc.variant(REPO, ex, idioms)
        snapshots[ex.number] = from_source(str(REPO / "honest" / f"bundle{index}" / ex.dir / ex.file), ex.file,
                                           text.encode(), {k: v.encode() for k, v in files.items()})
    t0 = time.monotonic()
    run = runner.grade(manifest, sorted(snapshots), course_root=REPO, hidden_root=REPO / "solutions",
                       snapshots=snapshots, zygote=_STATE.get("zygote"),
                       only={n: list(checks) for n, checks in SELECTED.items()})
    names = ", ".join(i.name for i in idioms)
    return [(ex.number, names, ex.score, ex.max_score, list(ex.integrity),
             [f"{c.name}: {c.status}: {c.message}" for c in ex.checks if c.status not in ("passed", "not_run")],
             [c.name for c in ex.checks if c.status == "passed"], "HV-CALLED" in ex.private + ex.output,
             time.monotonic() - t0) for ex in run.exercises]


@pytest.fixture(scope="module")
def gradings():
    ctx = multiprocessing.get_context("spawn")
    t0 = time.monotonic()
    with cf.ProcessPoolExecutor(max_workers=min(2, os.cpu_count() or 1), mp_context=ctx,
                                initializer=_start_worker) as pool:
        rows = [row for rows in pool.map(_grade_bundle, range(BUNDLES)) for row in rows]
    print(f"\nhonest corpus: {len(rows)} gradings in {time.monotonic() - t0:.0f} s")
    return rows


def test_the_corpus_covers_every_idiom_with_every_solution():
    assert len(hc.IDIOMS) >= 14
    bundles = hc.bundles(BUNDLES)
    assert sorted(i.name for b in bundles for i in b) == sorted(i.name for i in hc.IDIOMS)
    assert all(b for b in bundles) and len(hc.exercises(REPO)) * BUNDLES >= 150


def test_every_honest_variant_gets_full_marks_and_no_accusation(gradings):
    assert len(gradings) == len(hc.exercises(REPO)) * BUNDLES
    lost = [f"exercise {n} with {names}: {score}/{max_score}; integrity {integrity}; {problems}"
            for n, names, score, max_score, integrity, problems, _, _, _ in gradings
            if score != max_score or integrity or problems]
    assert not lost, "\n".join(lost)
    for n, names, _, _, _, _, passed, called, _ in gradings:
        assert set(SELECTED[n]) <= set(passed), (n, names, passed)
        assert called, f"exercise {n} with {names}: the graded calls never ran the idioms"

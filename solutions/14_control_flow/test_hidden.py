"""Hidden checks for exercise 14: indices, vectors and square-root inputs drawn at grading time.

Every draw holds each case its check claims (``COVERAGE``; ``ensure`` checks it on every draw):
every branch index and indices below and above the range; sums of both signs, never within 0.2
of zero; negative inputs, exact zeros, tiny and ordinary positive inputs.  References are NumPy,
in float64.  The answers of part D are judged against what the installed JAX does, measured in
the clean worker at grading time (``ex14_control_flow:truth_answers``).

The compile-count checks use vector lengths no other check uses, so the compilations they
count happen during their own requests, and each has a count floor (``grader.traced_work``):
the function, traced, must hold a ``cond`` and its branches' work, since NumPy on the host
beside a trivial jit compiles once per shape too; the gradient check of part B reuses the value check's
inputs (and so its compiled programs).
"""

import numpy as np

from grader.coverage import Coverage, check_rng, ensure
from grader.exercises.ex14_control_flow.judges import (
    draw_indices,
    draw_piecewise_inputs,
    draw_sqrt_input,
    expect_piecewise_in_jax,
    expect_switch_in_jax,
    index_label,
    judge_answers,
    judge_piecewise_gradients,
    judge_piecewise_values,
    judge_sqrt_gradient,
    judge_sqrt_values,
    judge_switch,
    judge_piecewise_structure,
    judge_switch_structure,
    sign_label,
    sqrt_labels,
)
from grader.testing import count_compiles, expect_compiles

INDEX_CASES = {"index_0", "index_1", "index_2", "below_range", "above_range"}
SIGN_CASES = {"positive_sum", "negative_sum"}
SQRT_CASES = {"negative", "zero", "tiny_positive", "positive"}


def switch_case(rng):
    return draw_indices(rng), rng.normal(size=int(rng.integers(2, 7))).astype(np.float32)


def piecewise_case(rng):
    return draw_piecewise_inputs(rng)


COVERAGE = {
    "switch_matches": Coverage(required=INDEX_CASES, labels=lambda rng: {index_label(i) for i in switch_case(rng)[0]},
                               test="test_switch_matches"),
    "switch_compiles_once": Coverage(required=INDEX_CASES, labels=lambda rng: {index_label(i) for i in draw_indices(rng)},
                                     test="test_switch_compiles_once"),
    "piecewise_matches": Coverage(required=SIGN_CASES, labels=lambda rng: {sign_label(x) for x in piecewise_case(rng)},
                                  test="test_piecewise_matches"),
    "safe_sqrt_matches": Coverage(required=SQRT_CASES, labels=lambda rng: sqrt_labels(draw_sqrt_input(rng)),
                                  test="test_safe_sqrt_matches"),
    "safe_sqrt_gradient_finite": Coverage(required=SQRT_CASES, labels=lambda rng: sqrt_labels(draw_sqrt_input(rng)),
                                          test="test_safe_sqrt_gradient_finite"),
}


# --- part A: lax.switch ---------------------------------------------------------------------------

def test_switch_matches(submission, rng):
    indices, x = switch_case(rng)
    ensure("switch_matches", INDEX_CASES, {index_label(i) for i in indices})
    judge_switch(submission.probe("ex14_control_flow:switch_values", indices, x), indices, x)


def test_switch_compiles_once(submission, reference, rng):
    indices = draw_indices(rng)
    ensure("switch_compiles_once", INDEX_CASES, {index_label(i) for i in indices})
    x = rng.normal(size=int(rng.integers(8, 12))).astype(np.float32)  # a length no other check uses
    _, compiles = count_compiles(submission, reference, "apply_branch", [{"args": [i, x]} for i in indices])
    expect_compiles(compiles, at_least=1, at_most=1, what="apply_branch (every index, one shape)",
                    hint="keep index traced: one compiled program holds all three branches",
                    advice="keep index an ordinary traced argument (not static) and let lax.switch choose the branch "
                           "at run time: every index must share one compiled program")
    expect_switch_in_jax(submission, compiles, x)  # the count floor: the compiled program is apply_branch's own work


def test_switch_runs_one_branch(submission, rng):
    x = rng.normal(size=int(rng.integers(2, 7))).astype(np.float32)
    judge_switch_structure(submission.probe("ex14_control_flow:switch_structure", x), x)  # one trace: structure and value


# --- part B: lax.cond -------------------------------------------------------------------------------

def test_piecewise_matches(submission, rng):
    xs = piecewise_case(rng)
    ensure("piecewise_matches", SIGN_CASES, {sign_label(x) for x in xs})
    judge_piecewise_values(submission.probe("ex14_control_flow:piecewise_values", xs), xs)


def test_piecewise_gradient_matches(submission, seed):
    # the inputs of piecewise_matches (its generator's draws, covered there): nothing compiles twice
    xs = piecewise_case(check_rng(seed, "test_piecewise_matches"))
    ensure("piecewise_gradient_matches", SIGN_CASES, {sign_label(x) for x in xs})
    judge_piecewise_gradients(submission.probe("ex14_control_flow:piecewise_values", xs), xs)


def test_piecewise_compiles_once(submission, reference, rng):
    xs = draw_piecewise_inputs(rng, n=int(rng.integers(10, 14)))  # a length no other check uses
    _, compiles = count_compiles(submission, reference, "piecewise", [{"args": [x]} for x in xs])
    expect_compiles(compiles, at_least=1, at_most=1, what="piecewise (sums of both signs, one shape)",
                    hint="jit piecewise itself and let lax.cond choose inside the compiled program",
                    advice="jit piecewise itself, with lax.cond inside: inputs of either sign must share one compiled "
                           "program (a Python if outside jit needs one program per branch)")
    expect_piecewise_in_jax(submission, compiles, xs[0])  # the count floor: the compiled program does piecewise's work
    judge_piecewise_structure(submission.probe("ex14_control_flow:piecewise_structure", xs[0]), xs[0])  # one branch runs


# --- part C: a square root with a finite gradient ---------------------------------------------------

def test_safe_sqrt_matches(submission, rng):
    x = draw_sqrt_input(rng)
    ensure("safe_sqrt_matches", SQRT_CASES, sqrt_labels(x))
    judge_sqrt_values(submission.probe("ex14_control_flow:safe_sqrt_values", x), x)


def test_safe_sqrt_gradient_finite(submission, rng):
    x = draw_sqrt_input(rng)
    ensure("safe_sqrt_gradient_finite", SQRT_CASES, sqrt_labels(x))
    judge_sqrt_gradient(submission.probe("ex14_control_flow:safe_sqrt_values", x), x)


# --- part D: questions, against the live JAX -----------------------------------------------------------

def test_answers_match_live_jax(submission, truth):
    judge_answers(submission.call("answers"), truth.probe("ex14_control_flow:truth_answers"))

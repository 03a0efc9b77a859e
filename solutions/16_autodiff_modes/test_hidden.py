"""Hidden checks for exercise 16: functions, points, directions, shapes, clip ranges, logits and
cotangents drawn at grading time.

Every draw holds each case its check claims (``COVERAGE``; ``ensure`` checks it on every draw): a
diagonal and a dense Hessian; a wide and a tall Jacobian; cotangent entries below, inside and
above the clip range, on 1-D and 2-D inputs; ordinary logits, logits of +-1e4 and rows all near
-1e4, 1-D and 2-D.  References are exact derivatives in float64 NumPy
(``grader/exercises/ex16_autodiff/functions.py``); what jax.jacfwd, jax.jacrev and the reference hvp cost is
measured by XLA's cost analysis in the clean worker at every grading.

The structural checks reuse the draws of the value check beside them (``check_rng``), so they
measure the very calls that were shown right.
"""

import numpy as np

from grader.coverage import Coverage, check_rng, ensure
from grader.exercises.ex16_autodiff.judges import (
    HESSIAN_SIZE,
    clip_labels,
    draw_clip_cases,
    draw_composed_case,
    draw_hessian_case,
    draw_hvp_cases,
    draw_jacobian_cases,
    draw_softmax_cases,
    hessian_label,
    judge_clip,
    judge_clip_composed,
    judge_hvp,
    judge_hvp_program,
    judge_jacobian_cost,
    judge_jacobian_values,
    judge_softmax,
    judge_softmax_residuals,
    shape_label,
    softmax_labels,
)

COVERAGE = {
    "hvp_matches": Coverage(required={"diagonal_hessian", "dense_hessian"},
                            labels=lambda rng: {hessian_label(c["name"]) for c in draw_hvp_cases(rng)},
                            test="test_hvp_matches"),
    "jacobian_matches": Coverage(required={"wide", "tall"},
                                 labels=lambda rng: {shape_label(c) for c in draw_jacobian_cases(rng)},
                                 test="test_jacobian_matches"),
    "clip_gradient_matches": Coverage(required={"below", "inside", "above", "1d", "2d"},
                                      labels=lambda rng: clip_labels(draw_clip_cases(rng)),
                                      test="test_clip_gradient_matches"),
    "softmax_matches": Coverage(required={"ordinary", "huge", "very_negative", "1d", "2d"},
                                labels=lambda rng: softmax_labels(*draw_softmax_cases(rng)),
                                test="test_softmax_matches"),
}


# --- part A: hvp ------------------------------------------------------------------------------------

def test_hvp_matches(submission, rng):
    cases = draw_hvp_cases(rng)
    ensure("hvp_matches", COVERAGE["hvp_matches"].required, {hessian_label(c["name"]) for c in cases})
    judge_hvp(submission.probe("ex16_autodiff:hvp_values", cases), cases)


def test_hvp_never_forms_the_hessian(submission, truth, rng):
    case = draw_hessian_case(rng)
    facts = submission.probe("ex16_autodiff:hvp_program", case["name"], case["params"], case["x"], case["v"])
    reference = truth.probe("ex16_autodiff:truth_hvp_work", case["name"], case["params"], HESSIAN_SIZE)
    judge_hvp_program(facts, reference, case)


# --- part B: jacobian -------------------------------------------------------------------------------

def test_jacobian_matches(submission, rng):
    cases = draw_jacobian_cases(rng)
    ensure("jacobian_matches", COVERAGE["jacobian_matches"].required, {shape_label(c) for c in cases})
    judge_jacobian_values(submission.probe("ex16_autodiff:jacobian_values", cases), cases)


def test_jacobian_picks_the_cheaper_mode(submission, truth, seed):
    cases = draw_jacobian_cases(check_rng(seed, "test_jacobian_matches"))  # the calls shown right there
    ensure("jacobian_picks_the_cheaper_mode", {"wide", "tall"}, {shape_label(c) for c in cases})
    got = submission.probe("ex16_autodiff:jacobian_values", cases)
    judge_jacobian_cost(got, truth.probe("ex16_autodiff:truth_jacobian_flops", cases), cases)


# --- part C: clip_gradient --------------------------------------------------------------------------

def test_clip_gradient_matches(submission, rng):
    cases = draw_clip_cases(rng)
    ensure("clip_gradient_matches", COVERAGE["clip_gradient_matches"].required, clip_labels(cases))
    judge_clip(submission.probe("ex16_autodiff:clip_values", cases), cases)


def test_clip_gradient_composes(submission, rng):
    case = draw_composed_case(rng)
    got = submission.probe("ex16_autodiff:clip_composed", case["lo"], case["hi"], case["xs"], case["ws"])
    judge_clip_composed(got, case)


# --- part D: softmax --------------------------------------------------------------------------------

def test_softmax_matches(submission, rng):
    cases, labels = draw_softmax_cases(rng)
    ensure("softmax_matches", COVERAGE["softmax_matches"].required, softmax_labels(cases, labels))
    judge_softmax(submission.probe("ex16_autodiff:softmax_values", cases), cases, labels)


def test_softmax_keeps_only_its_output(submission, seed):
    cases, _ = draw_softmax_cases(check_rng(seed, "test_softmax_matches"))
    judge_softmax_residuals(submission.probe("ex16_autodiff:softmax_values", cases), cases)

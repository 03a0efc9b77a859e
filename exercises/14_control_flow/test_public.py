"""Public checks for exercise 14 (run by `grade exercise 14`; they carry no points).

Fixed, readable inputs: x = [0.5, 1.0, -0.25] (and its negation) for the switch and the cond,
[-2, -0.0, 0, 1e-30, 0.25, 4] for the square root.  The hidden checks test the same properties
on inputs drawn at grading time; the answers to part D are judged there against what the
installed JAX does (here only their form, and the two that part A's check shows anyway).
"""

import numpy as np

from grader.exercises.ex14_control_flow.judges import (
    expect_piecewise_in_jax,
    expect_switch_in_jax,
    judge_answers,
    judge_piecewise_gradients,
    judge_piecewise_structure,
    judge_piecewise_values,
    judge_sqrt_gradient,
    judge_sqrt_values,
    judge_switch,
    judge_switch_structure,
)
from grader.testing import count_compiles, expect_compiles

X = np.float32([0.5, 1.0, -0.25])


def test_switch_small(submission, reference):
    indices = [-1, 0, 1, 2, 3]
    outputs, compiles = count_compiles(submission, reference, "apply_branch", [{"args": [i, X]} for i in indices])
    judge_switch(outputs, indices, X)
    judge_switch_structure(submission.probe("ex14_control_flow:switch_structure", X), X)  # one trace: structure and value
    expect_compiles(compiles, at_least=1, at_most=1, what="apply_branch (indices -1, 0, 1, 2, 3)",
                    hint="keep index an ordinary traced argument (not static) and let lax.switch choose")
    expect_switch_in_jax(submission, compiles, X)  # the count floor: one compile of a function that does the work


def test_piecewise_small(submission, reference):
    xs = [X, -X]  # sums 1.25 and -1.25
    _, compiles = count_compiles(submission, reference, "piecewise", [{"args": [x]} for x in xs])
    got = submission.probe("ex14_control_flow:piecewise_values", xs)  # the values again, and the gradients
    judge_piecewise_values(got, xs)
    judge_piecewise_gradients(got, xs)
    expect_compiles(compiles, at_least=1, at_most=1, what="piecewise (sums of both signs)",
                    hint="jit piecewise itself and let lax.cond choose inside it")
    expect_piecewise_in_jax(submission, compiles, X)  # the count floor: one compile of a function that does the work
    judge_piecewise_structure(submission.probe("ex14_control_flow:piecewise_structure", X), X)  # one branch runs


def test_safe_sqrt_small(submission):
    x = np.float32([-2.0, -0.0, 0.0, 1e-30, 0.25, 4.0])
    got = submission.probe("ex14_control_flow:safe_sqrt_values", x)
    judge_sqrt_values(got, x)
    judge_sqrt_gradient(got, x)


def test_answers_small(submission, truth):
    keys = ["switch_index_minus_1", "switch_index_5"]
    judge_answers(submission.call("answers"), truth.probe("ex14_control_flow:truth_answers", keys), keys=keys)

"""Public checks for exercise 16 (run by `grade exercise 16`; they carry no points).

Fixed, readable inputs: hvp of f(x) = 0.25 sum(x^4) + 0.5 (a.x)^2 with a = (1, 2, 3, 4, 5) / 5 at
x = (1, -1, 0.5, 2, 0), v = (1, 0, 0, 0, 1), and of sum(c sin x), and its program at n = 1024
(x from -1 to 1, v all ones: no value of the Hessian's size, the work of a few gradients);
jacobian of tanh(W x + b) for a wide W (4 x 128) and a tall one (128 x 4) with entries
0.01 * (i - j); clip_gradient on x = (1, 2, 3, 4) with cotangent weights (-3, 0.5, 4, -0.2) and
[lo, hi] = [-1, 1], also under jit(vmap(grad)); softmax of (1e4, -1e4, 0, 9999), of
(0.5, 1, 2, -1) and of rows near -1e4.  The hidden checks test the same properties on inputs
drawn at grading time.
"""

import numpy as np

from grader.exercises.ex16_autodiff.judges import (
    HESSIAN_SIZE,
    judge_clip,
    judge_clip_composed,
    judge_hvp,
    judge_hvp_program,
    judge_jacobian_cost,
    judge_jacobian_values,
    judge_softmax,
    judge_softmax_residuals,
)

A = np.float32([1, 2, 3, 4, 5]) / np.float32(5)


def test_hvp_small(submission, truth):
    x, v = np.float32([1, -1, 0.5, 2, 0]), np.float32([1, 0, 0, 0, 1])
    cases = [{"name": "quartic", "params": {"a": A}, "x": x, "v": v},
             {"name": "sine", "params": {"c": np.float32([1, -2, 0.5, 3, 1])}, "x": x, "v": v}]
    judge_hvp(submission.probe("ex16_autodiff:hvp_values", cases), cases)
    a = (np.arange(HESSIAN_SIZE, dtype=np.float32) / HESSIAN_SIZE).astype(np.float32)
    big = {"name": "quartic", "params": {"a": a}, "x": np.linspace(-1, 1, HESSIAN_SIZE, dtype=np.float32),
           "v": np.ones(HESSIAN_SIZE, np.float32)}
    facts = submission.probe("ex16_autodiff:hvp_program", "quartic", big["params"], big["x"], big["v"])
    judge_hvp_program(facts, truth.probe("ex16_autodiff:truth_hvp_work", "quartic", big["params"], HESSIAN_SIZE), big)


def _layer(m: int, n: int) -> dict:
    w = (0.01 * (np.arange(m)[:, None] - np.arange(n)[None, :])).astype(np.float32)
    return {"name": "tanh_layer", "params": {"W": w, "b": np.zeros(m, np.float32)},
            "x": np.linspace(-1, 1, n, dtype=np.float32), "m": m}


def test_jacobian_small(submission, truth):
    cases = [_layer(4, 128), _layer(128, 4)]  # wide, tall
    got = submission.probe("ex16_autodiff:jacobian_values", cases)
    judge_jacobian_values(got, cases)
    judge_jacobian_cost(got, truth.probe("ex16_autodiff:truth_jacobian_flops", cases), cases)


def test_clip_gradient_small(submission):
    cases = [{"lo": -1.0, "hi": 1.0, "x": np.float32([1, 2, 3, 4]), "w": np.float32([-3, 0.5, 4, -0.2])},
             {"lo": -0.5, "hi": 2.0, "x": np.float32([[1, 2], [3, 4]]), "w": np.float32([[-3, 0.5], [4, -0.2]])}]
    judge_clip(submission.probe("ex16_autodiff:clip_values", cases), cases)
    case = {"lo": -1.0, "hi": 1.0, "xs": np.float32([[1, 2, 3, 4], [5, 6, 7, 8]]),
            "ws": np.float32([[-3, 0.5, 4, -0.2], [2, -2, 0.1, 1]])}
    judge_clip_composed(submission.probe("ex16_autodiff:clip_composed", case["lo"], case["hi"], case["xs"],
                                         case["ws"]), case)


def test_softmax_small(submission):
    cases = [{"x": np.float32([1e4, -1e4, 0, 9999]), "g": np.float32([1, 2, 3, 4])},
             {"x": np.float32([0.5, 1, 2, -1]), "g": np.float32([1, -1, 0.5, 2])},
             {"x": np.float32([[-1e4, -1e4 + 1, -1e4 - 1], [-1e4 + 2, -1e4, -1e4]]),
              "g": np.float32([[1, 0, -1], [0.5, 2, 1]])}]
    labels = ["huge", "ordinary", "very_negative"]
    got = submission.probe("ex16_autodiff:softmax_values", cases)
    judge_softmax(got, cases, labels)
    judge_softmax_residuals(got, cases)

"""Public checks for exercise 13 (run by `grade exercise 13`; they carry no points).

They use fixed, readable inputs: the tree of the course text's exercise ({"a": f32[3], "b":
[f32[2, 2], f32[2]]}) and one mixed tree holding a tuple, None, a namedtuple and a dict whose keys
are not in sorted order; one small Dense layer per activation; a five-step run of pure_step.  The
hidden checks test the same properties on trees, layers and runs drawn at grading time.
"""

import numpy as np

from grader.exercises.ex13_pytrees import trees
from grader.exercises.ex13_pytrees.judges import (
    ACTIVATIONS,
    dense_compiles,
    draw_run,
    judge_dense_pytree,
    judge_dense_values,
    judge_globals,
    judge_norm,
    judge_ravel,
    judge_run,
    judge_shapes,
    pure_run_compiles,
)
from grader.testing import expect_compiles


def leaf(*values, shape=None):
    arr = np.asarray(values, np.float32)
    return {"kind": "array", "value": arr.reshape(shape) if shape is not None else arr}


def course_tree():
    """{"a": zeros(3), "b": [ones((2, 2)), ones(2)]} (the course text's pytree exercise)."""
    return {"kind": "dict", "items": [
        ["a", leaf(0, 0, 0)],
        ["b", {"kind": "list", "items": [leaf(1, 1, 1, 1, shape=(2, 2)), leaf(1, 1)]}]]}


def mixed_tree():
    """{"w": Layer(w=[1, 2], b=3.0), "b": (None, [4, 5, 6]), "a": [{"scale": -1.0}, None]}:
    keys out of sorted order, a namedtuple whose fields are not sorted, None, a 0-d leaf."""
    return {"kind": "dict", "items": [
        ["w", {"kind": "namedtuple", "name": "Layer", "items": [leaf(1, 2), leaf(3, shape=())]}],
        ["b", {"kind": "tuple", "items": [{"kind": "none"}, leaf(4, 5, 6)]}],
        ["a", {"kind": "list", "items": [{"kind": "dict", "items": [["scale", leaf(-1, shape=())]]},
                                        {"kind": "none"}]}]]}


def test_tree_shapes_small(submission):
    for desc in (course_tree(), mixed_tree()):
        judge_shapes(submission.probe("ex13_pytrees:shapes_of", desc), desc)


def test_global_norm_small(submission):
    for desc in (course_tree(), mixed_tree()):
        judge_norm(submission.probe("ex13_pytrees:norm_of", desc), desc)


def test_ravel_small(submission):
    for desc in (course_tree(), mixed_tree()):
        n = sum(np.asarray(leaf["value"]).size for leaf in trees.jax_leaves(desc))
        new_vec = np.arange(10, 10 + n, dtype=np.float32)  # unravel gets a new vector: 10, 11, 12, ...
        judge_ravel(submission.probe("ex13_pytrees:ravel_of", desc, new_vec), desc, new_vec)


def dense_case(rng, d_in=3, d_out=2, batch=4):
    return {"w": rng.normal(size=(d_in, d_out)).astype(np.float32), "b": np.linspace(0.5, -0.5, d_out).astype(np.float32),
            "x": rng.normal(size=(batch, d_in)).astype(np.float32),
            "cotangent": np.ones((batch, d_out), np.float32)}


def test_dense_small(submission, reference):
    rng = np.random.default_rng(13)
    # Compilations first, on the shapes the views below use (so those find apply compiled): three
    # layers with new values and one activation compile once; a new activation once more.
    first = dense_compiles(submission, reference, [{**dense_case(rng), "activation": "tanh"} for _ in range(3)])
    second = dense_compiles(submission, reference, [{**dense_case(rng), "activation": "relu"}])
    for activation in ACTIVATIONS:
        case = dense_case(rng)
        other = "relu" if activation != "relu" else "tanh"
        view = submission.probe("ex13_pytrees:dense_view", case["w"], case["b"], activation, case["x"],
                                case["cotangent"], other)
        judge_dense_pytree(view, case, activation)
        judge_dense_values(view, case, activation)
    expect_compiles(first, at_least=1, at_most=1, what="apply (three layers, new values, activation 'tanh')",
                    hint="jit apply once, at module level; the layer is an ordinary argument")
    expect_compiles(second, at_least=1, at_most=1, what="apply (the same shapes, activation 'relu')",
                    hint="a new value of a static field is a new tree structure: exactly one more compile")


def test_pure_step_small(submission, reference):
    run = draw_run(np.random.default_rng(7), d=3, steps=5)
    got, compiles = pure_run_compiles(submission, reference, run)
    judge_run(got, run)
    judge_globals(got)
    expect_compiles(compiles, at_least=1, at_most=1,
                    what="pure_step (five steps, five learning rates)",
                    hint="jit pure_step once and keep lr an ordinary (traced) argument, not static")

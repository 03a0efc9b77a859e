"""Hidden checks for exercise 13: trees, layers and training runs drawn at grading time.

Every tree is drawn afresh (``trees.draw_tree``) and holds, wherever the draw puts them, a dict
whose keys are not in sorted order, lists, tuples, the namedtuple ``Layer`` (fields w, b: not
sorted) and another, ``None``, a 0-d leaf and a path three containers deep; ``COVERAGE`` says so
and ``ensure`` checks it on every draw.  References are NumPy, in float64, on the trusted side.

Each check that counts compilations or watches the module's globals uses shapes no other check
uses, so whatever it watches really traces and compiles during its own request.
"""

import numpy as np

from grader.coverage import Coverage, check_rng, ensure
from grader.exercises.ex13_pytrees import trees
from grader.exercises.ex13_pytrees.judges import (
    ACTIVATIONS,
    dense_compiles,
    draw_dense,
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


def _tree_coverage(test):
    return Coverage(required=trees.TREE_CATEGORIES, labels=lambda rng: trees.tree_labels(trees.draw_tree(rng)),
                    test=test)


COVERAGE = {
    "tree_shapes_match": _tree_coverage("test_tree_shapes_match"),
    "global_norm_matches": _tree_coverage("test_global_norm_matches"),
    "ravel_round_trips": _tree_coverage("test_ravel_round_trips"),
}


def drawn_tree(check, rng):
    desc = trees.draw_tree(rng)
    ensure(check, COVERAGE[check].required, trees.tree_labels(desc))
    return desc


# --- part A: functions of any pytree ---------------------------------------------------------------

def test_tree_shapes_match(submission, rng):
    desc = drawn_tree("tree_shapes_match", rng)
    judge_shapes(submission.probe("ex13_pytrees:shapes_of", desc), desc)


def test_global_norm_matches(submission, rng):
    desc = drawn_tree("global_norm_matches", rng)
    judge_norm(submission.probe("ex13_pytrees:norm_of", desc), desc)


def test_ravel_round_trips(submission, rng):
    desc = drawn_tree("ravel_round_trips", rng)
    n = sum(np.asarray(leaf["value"]).size for leaf in trees.jax_leaves(desc))
    new_vec = rng.normal(size=n).astype(np.float32)
    judge_ravel(submission.probe("ex13_pytrees:ravel_of", desc, new_vec), desc, new_vec)


# --- part B: a registered dataclass ---------------------------------------------------------------

def dense_views(submission, rng):
    """One drawn layer per activation (every activation, every time), and its view."""
    out = []
    for activation in ACTIVATIONS:
        case = draw_dense(rng)
        other = str(rng.choice([a for a in ACTIVATIONS if a != activation]))
        out.append((activation, case, submission.probe("ex13_pytrees:dense_view", case["w"], case["b"], activation,
                                                       case["x"], case["cotangent"], other)))
    return out


def test_dense_is_a_pytree(submission, rng):
    for activation, case, view in dense_views(submission, rng):
        judge_dense_pytree(view, case, activation)


def test_dense_apply_matches(submission, seed):
    # the layers of dense_is_a_pytree (its generator's draws): the compiled gradients are shared
    for activation, case, view in dense_views(submission, check_rng(seed, "test_dense_is_a_pytree")):
        judge_dense_values(view, case, activation)


def test_dense_compiles_once_per_activation(submission, reference, rng):
    d_in, d_out, batch = int(rng.integers(7, 10)), int(rng.integers(7, 10)), int(rng.integers(6, 9))  # shapes of its own
    first, second = (str(a) for a in rng.permutation(ACTIVATIONS)[:2])
    calls = [{**draw_dense(rng, d_in, d_out, batch), "activation": first} for _ in range(3)]
    expect_compiles(dense_compiles(submission, reference, calls), at_least=1, at_most=1,
                    what="apply (three layers with new values, one activation)",
                    hint="jit apply once at module level; new values of w, b and x never compile again",
                    advice="jit apply once, at module level, with the layer an ordinary argument: new values of "
                           "the arrays must not compile again")
    calls = [{**draw_dense(rng, d_in, d_out, batch), "activation": second},
             {**draw_dense(rng, d_in, d_out, batch), "activation": first}]
    expect_compiles(dense_compiles(submission, reference, calls), at_least=1, at_most=1,
                    what="apply (a new activation, then the first one again)",
                    hint="a new static activation is a new tree structure: exactly one more compile, and going back "
                         "to an activation seen before compiles nothing",
                    advice="a new value of the static activation must compile exactly once more, and an activation "
                           "seen before must compile nothing: keep the activation a static field of the layer")


# --- part C: the pure step -------------------------------------------------------------------------

def test_pure_step_matches(submission, rng):
    run = draw_run(rng)
    judge_run(submission.probe("ex13_pytrees:pure_run", run["w"], run["batches"], run["lrs"]), run)


def test_pure_step_writes_no_globals(submission, rng):
    run = draw_run(rng, d=int(rng.integers(6, 9)))  # a size no other check uses: the step traces here
    judge_globals(submission.probe("ex13_pytrees:pure_run", run["w"], run["batches"], run["lrs"]))


def test_pure_step_compiles_once(submission, reference, rng):
    run = draw_run(rng, d=int(rng.integers(9, 12)))  # a size no other check uses
    _, compiles = pure_run_compiles(submission, reference, run)
    expect_compiles(compiles, at_least=1, at_most=1,
                    what="pure_step (one run, a new learning rate every call)",
                    hint="jit pure_step once and keep lr traced (not static): a new learning rate must not compile",
                    advice="jit pure_step once, at module level, and keep lr an ordinary traced argument (not in "
                           "static_argnums): a run with a new learning rate every step compiles once")

"""Exercise 13's trusted side, against the live JAX: the tree descriptions' leaf order is
``jax.tree.leaves``' own, the references equal what JAX computes, and the verdicts catch the
mistakes they name."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grader.exercises.ex13_pytrees import judges, trees
from grader.feedback import CheckFailed


def _describe(value):
    return trees.describe(value, np.asarray)


@pytest.mark.parametrize("seed", range(12))
def test_description_order_is_jax_order(seed):
    desc = trees.draw_tree(np.random.default_rng(seed))
    tree = trees.build(desc, jnp.asarray)
    want = [np.asarray(leaf) for leaf in jax.tree.leaves(tree)]
    got = [np.asarray(leaf["value"]) for leaf in trees.jax_leaves(desc)]
    assert len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(got, want))
    assert trees.difference(_describe(tree), desc) is None  # build and describe round-trip
    shapes = jax.tree.map(lambda leaf: leaf.shape, tree)
    assert trees.difference(_describe(shapes), judges.expected_shapes(desc)) is None
    assert judges.reference_norm(desc) == pytest.approx(float(jnp.sqrt(sum(jnp.sum(l ** 2) for l in want))), rel=1e-5)
    from jax.flatten_util import ravel_pytree

    vec, unravel = ravel_pytree(tree)
    assert np.array_equal(np.asarray(vec), judges.expected_vec(desc))
    new = np.arange(vec.size, dtype=np.float32)
    assert trees.difference(_describe(unravel(jnp.asarray(new))), judges.expected_unravel(desc, new), atol=0) is None
    assert trees.TREE_CATEGORIES <= trees.tree_labels(desc)


def test_difference_names_the_kind_of_node():
    desc = trees.draw_tree(np.random.default_rng(3))
    tree = trees.build(desc, jnp.asarray)

    def as_plain(t):  # namedtuples become tuples, everything else kept
        if isinstance(t, tuple):
            return tuple(as_plain(v) for v in t)
        if isinstance(t, list):
            return [as_plain(v) for v in t]
        if isinstance(t, dict):
            return {k: as_plain(v) for k, v in t.items()}
        return t

    assert trees.difference(_describe(as_plain(tree)), desc)[2] == "namedtuple"
    no_none = jax.tree.map(lambda x: x, tree, is_leaf=lambda x: x is None)
    assert trees.difference(_describe(no_none), desc) is None
    with_zero = jax.tree.map(lambda x: 0.0 if x is None else x, tree, is_leaf=lambda x: x is None)
    assert trees.difference(_describe(with_zero), desc)[2] == "none"
    lists = jax.tree.map(lambda leaf: list(leaf.shape), tree)
    assert trees.difference(_describe(lists), judges.expected_shapes(desc))[2] == "shape"


def test_norm_feedback_names_known_wrong_formulas():
    desc = trees.draw_tree(np.random.default_rng(5))
    leaves = [np.asarray(l["value"], np.float64) for l in trees.jax_leaves(desc)]
    wrong = np.float32(sum(np.sqrt(np.sum(v ** 2)) for v in leaves))
    with pytest.raises(CheckFailed, match="norm") as err:
        judges.judge_norm({"kind": "array", "value": np.asarray(wrong)}, desc)
    assert "own norms" in err.value.advice
    judges.judge_norm({"kind": "array", "value": np.float32(judges.reference_norm(desc)).reshape(())}, desc)


def test_ravel_feedback_tells_order_from_values():
    desc = {"kind": "dict", "items": [["z", {"kind": "array", "value": np.float32([1, 2])}],
                                      ["a", {"kind": "array", "value": np.float32([3])}]]}
    new = np.float32([7, 8, 9])
    good = {"vec": {"kind": "array", "value": np.float32([3, 1, 2])},
            "unraveled": judges.expected_unravel(desc, new)}
    judges.judge_ravel(good, desc, new)
    with pytest.raises(CheckFailed) as err:
        judges.judge_ravel({**good, "vec": {"kind": "array", "value": np.float32([1, 2, 3])}}, desc, new)
    assert "order" in err.value.diagnosis
    with pytest.raises(CheckFailed):
        judges.judge_ravel({**good, "unraveled": judges.expected_unravel(desc, np.float32([3, 1, 2]))}, desc, new)


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class _Dense:
    w: jax.Array
    b: jax.Array
    activation: str = dataclasses.field(metadata=dict(static=True))


@pytest.mark.parametrize("activation", judges.ACTIVATIONS)
def test_dense_reference_is_jax(activation):
    case = judges.draw_dense(np.random.default_rng(1))
    acts = {"tanh": jnp.tanh, "relu": jax.nn.relu, "sigmoid": jax.nn.sigmoid}
    layer = _Dense(jnp.asarray(case["w"]), jnp.asarray(case["b"]), activation)
    x, cot = jnp.asarray(case["x"]), jnp.asarray(case["cotangent"])
    apply = lambda lyr: acts[lyr.activation](x @ lyr.w + lyr.b[None, :])  # noqa: E731
    g = jax.grad(lambda lyr: jnp.sum(apply(lyr) * cot))(layer)
    ref = judges.reference_dense(case, activation)
    np.testing.assert_allclose(np.asarray(apply(layer)), ref["output"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(g.w), ref["grad_w"], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(g.b), ref["grad_b"], rtol=1e-4, atol=1e-5)


def test_run_reference_is_gradient_descent_and_catches_a_per_trace_counter():
    run = judges.draw_run(np.random.default_rng(2))
    loss = lambda w, x, y: 0.5 * jnp.mean((x @ w - y) ** 2)  # noqa: E731
    w, states = jnp.asarray(run["w"]), []
    for b, lr in zip(run["batches"], run["lrs"]):
        w = w - lr * jax.grad(loss)(w, jnp.asarray(b["x"]), jnp.asarray(b["y"]))
        states.append(w)
    for got, want in zip(states, judges.reference_run(run)):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-5)
    good = {"states": [{"w": {"kind": "array", "value": np.asarray(s)},
                        "count": {"kind": "array", "value": np.int32(t + 1).reshape(())}} for t, s in enumerate(states)],
            "globals_changed": []}
    judges.judge_run(good, run)
    stuck = {**good, "states": [{**s, "count": {"kind": "array", "value": np.int32(min(t + 1, 2)).reshape(())}}
                                for t, s in enumerate(good["states"])]}
    with pytest.raises(CheckFailed) as err:
        judges.judge_run(stuck, run)
    assert "traces" in err.value.diagnosis

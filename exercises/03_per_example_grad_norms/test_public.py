"""Public checks for exercise 3 (run by `grade exercise 3`; they carry no points).

The hidden checks test the same properties on other shapes, batch sizes and models.
"""

import jax
import jax.numpy as jnp
import numpy as np

from grader.feedback import CheckFailed, expect_array, expect_close
from grader.testing import expect_compiles


def make_params(rng, sizes):
    layers = [{"w": rng.normal(size=(a, b)).astype(np.float32) / np.sqrt(a), "b": rng.normal(size=b).astype(np.float32)}
              for a, b in zip(sizes[:-2], sizes[1:-1])]
    out = {"w": rng.normal(size=sizes[-2:]).astype(np.float32), "b": rng.normal(size=sizes[-1]).astype(np.float32)}
    return {"layers": layers, "out": out}


def loss(params, x, y):  # the model of the stub, written out here so the check does not trust the learner's copy
    h = x
    for layer in params["layers"]:
        h = jnp.tanh(h @ layer["w"] + layer["b"])
    return 0.5 * jnp.sum((h @ params["out"]["w"] + params["out"]["b"] - y) ** 2)


def one_at_a_time(params, xs, ys):
    g = jax.grad(loss)
    return np.array([np.sqrt(sum(float(jnp.sum(leaf ** 2)) for leaf in jax.tree.leaves(g(params, x, y))))
                     for x, y in zip(xs, ys)], dtype=np.float32)


def test_matches_reference_small(submission, rng):
    params = make_params(rng, [3, 5, 2])
    xs = rng.normal(size=(4, 3)).astype(np.float32)
    ys = rng.normal(size=(4, 2)).astype(np.float32)
    out = expect_array(submission.call("per_example_grad_norms", params, xs, ys), shape=(4,), dtype="float32",
                       what="per_example_grad_norms(params, xs, ys)")
    expect_close(out, one_at_a_time(params, xs, ys), rtol=1e-4, atol=1e-5, reveal=True,
                 what="per_example_grad_norms(params, xs, ys)",
                 hint="each entry is sqrt(sum of squares of ALL gradient leaves) for that one example")


def test_compiles_once_for_one_shape(submission, rng, learner_names):
    params = make_params(rng, [3, 4, 2])
    calls = [{"args": [params, rng.normal(size=(4, 3)).astype(np.float32), rng.normal(size=(4, 2)).astype(np.float32)]}
             for _ in range(3)]
    record = submission.probe("generic:count_compiles", "per_example_grad_norms", calls)["compiles"]
    expect_compiles(record, learner_names, at_least=1, at_most=1, what="per_example_grad_norms")

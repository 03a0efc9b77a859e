"""Hidden checks for exercise 3: fresh models, shapes and batch sizes drawn at grading time.

The reference is hand-written backprop in NumPy: independent of JAX, and no compiles here.
Each batch size of `matches_one_at_a_time` gets a model of its own depth (1, 2 and 3 hidden
layers), so every run sees a one-layer model and deeper ones; widths and sizes are drawn.
A failed check tells the learner what is true of the failure (``diagnosis``/``advice``),
never a drawn shape or value.
"""

import numpy as np
import pytest

from grader.coverage import Coverage
from grader.feedback import CheckFailed, describe
from grader.exercises.ex03_grad_norms.judges import expect_compiles_per_shape, expect_no_batch_loop, \
    expect_norms_in_jax, expect_params_not_mapped, traced_summary
from grader.testing import count_compiles, probe_both

DEPTH = {1: 1, 5: 2, 16: 3}  # hidden layers of the model each batch size is checked on


def random_model(rng, d_in, d_out, depth=None):
    """A model of ``depth`` hidden layers (random, 1-3, when None) of random widths: a nested
    dict/list pytree."""
    depth = int(rng.integers(1, 4)) if depth is None else depth
    widths = [d_in] + [int(w) for w in rng.integers(2, 9, size=depth)]
    layers = [{"w": (rng.normal(size=(a, b)) / np.sqrt(a)).astype(np.float32), "b": rng.normal(size=b).astype(np.float32)}
              for a, b in zip(widths[:-1], widths[1:])]
    out = {"w": rng.normal(size=(widths[-1], d_out)).astype(np.float32), "b": rng.normal(size=d_out).astype(np.float32)}
    return {"layers": layers, "out": out}


def reference_norms(params, xs, ys):
    """Per-example gradient norms by vectorised hand-written backprop (float64 NumPy)."""
    xs, ys = xs.astype(np.float64), ys.astype(np.float64)
    hs = [xs]
    for layer in params["layers"]:
        hs.append(np.tanh(hs[-1] @ layer["w"] + layer["b"]))
    d = hs[-1] @ params["out"]["w"] + params["out"]["b"] - ys           # [B, d_out]
    total = np.sum(hs[-1] ** 2, 1) * np.sum(d ** 2, 1) + np.sum(d ** 2, 1)  # |outer(h, d)|^2 = |h|^2 |d|^2
    dh = d @ params["out"]["w"].T
    for layer, h_in, h_out in zip(reversed(params["layers"]), reversed(hs[:-1]), reversed(hs[1:])):
        dz = dh * (1 - h_out ** 2)
        total += np.sum(h_in ** 2, 1) * np.sum(dz ** 2, 1) + np.sum(dz ** 2, 1)
        dh = dz @ layer["w"].T
    return np.sqrt(total).astype(np.float32)


def draw_case(rng, batch):
    d_in, d_out = int(rng.integers(2, 7)), int(rng.integers(2 if batch > 1 else 1, 4))
    params = random_model(rng, d_in, d_out, DEPTH[batch])
    xs = rng.normal(size=(batch, d_in)).astype(np.float32)
    ys = rng.normal(size=(batch, d_out)).astype(np.float32)
    return params, xs, ys


def case_labels(batch):
    def labels(rng):
        params, xs, ys = draw_case(rng, batch)
        out = {f"hidden layers: {len(params['layers'])}", f"batch: {xs.shape[0]}"}
        if ys.shape[1] > 1:
            out.add("several outputs")
        return out
    return labels


COVERAGE = {
    # each batch size is its own test item with its own generator; the deepest model is the one
    # a walk over only some leaves (or only the first layer) cannot get right
    "matches_one_at_a_time": Coverage(required={"hidden layers: 3", "batch: 16", "several outputs"},
                                      labels=case_labels(16), test="test_matches_one_at_a_time[16]"),
}


def grad_of_mean_norm(params, xs, ys):
    """The norm of the gradient of the batch-MEAN loss, the same number for every example (a mistake)."""
    per = reference_norms(params, xs, ys)  # only for its shape; the mean gradient is computed below
    xs, ys = xs.astype(np.float64), ys.astype(np.float64)
    hs = [xs]
    for layer in params["layers"]:
        hs.append(np.tanh(hs[-1] @ layer["w"] + layer["b"]))
    d = (hs[-1] @ params["out"]["w"] + params["out"]["b"] - ys) / xs.shape[0]
    total = np.sum((hs[-1].T @ d) ** 2) + np.sum(d.sum(0) ** 2)
    dh = d @ params["out"]["w"].T
    for layer, h_in, h_out in zip(reversed(params["layers"]), reversed(hs[:-1]), reversed(hs[1:])):
        dz = dh * (1 - h_out ** 2)
        total += np.sum((h_in.T @ dz) ** 2) + np.sum(dz.sum(0) ** 2)
        dh = dz @ layer["w"].T
    return np.full(per.shape, np.sqrt(total), np.float32)


def judge_norms(out, params, xs, ys):
    ref = reference_norms(params, xs, ys)
    batch = xs.shape[0]

    def fail(diagnosis, advice, measured=""):
        raise CheckFailed("per_example_grad_norms does not match the one-example-at-a-time reference",
                          measured=measured or describe(out), expected=f"f32[{batch}] within rtol=2e-4",
                          hint=advice, diagnosis=diagnosis, advice=advice)

    if not isinstance(out, np.ndarray):
        fail("the result is not an array", "return a jax.numpy array with one norm per example")
    if out.shape != ref.shape:
        fail("the result does not have one entry per example (its shape is not [B])",
             "reduce every gradient leaf over all axes but the batch axis, add the leaves up, take one square "
             "root: one number per example")
    if str(out.dtype) != "float32":
        fail("the result is not float32", "keep float32 throughout; avoid float64 NumPy constants")
    if not np.all(np.isfinite(out)):
        fail("the result holds NaN or inf", "a norm is sqrt of a sum of squares: finite and >= 0")
    if np.allclose(out, ref, rtol=2e-4, atol=1e-5):
        return
    measured = f"largest difference {float(np.max(np.abs(out - ref))):.3g}"
    if np.allclose(out, ref ** 2, rtol=2e-4, atol=1e-5):
        fail("the results are the SQUARED norms", "take the square root of the summed squares, once per example",
             measured)
    if batch > 1 and np.allclose(out, grad_of_mean_norm(params, xs, ys), rtol=2e-4, atol=1e-5):
        fail("every example gets the same number: the norm of the gradient of the batch-mean loss",
             "differentiate ONE example's loss and vmap that over the batch: jax.vmap(jax.grad(example_loss), "
             "in_axes=(None, 0, 0))", measured)
    if np.all(out < ref * (1 - 1e-4)):
        fail("every norm is smaller than the true one: some parameter leaves are left out",
             "every leaf counts: the weights and biases of every hidden layer and of the output layer "
             "(jax.tree.leaves of the gradient)", measured)
    fail("the norms differ from the one-example-at-a-time reference",
         "check that every parameter leaf counts, that nothing is averaged over the batch, and that each entry "
         "is sqrt(sum of squares) of that one example's gradient", measured)


@pytest.mark.parametrize("batch", [1, 5, 16])
def test_matches_one_at_a_time(submission, rng, batch):
    params, xs, ys = draw_case(rng, batch)
    judge_norms(submission.call("per_example_grad_norms", params, xs, ys), params, xs, ys)


def test_no_loop_over_batch(submission, reference, rng):
    params = random_model(rng, 3, 2)
    summaries, references = {}, {}
    for batch in (2, 24):
        xs = rng.normal(size=(batch, 3)).astype(np.float32)
        ys = rng.normal(size=(batch, 2)).astype(np.float32)
        # structure and values from one trace: the program judged is the one that computes the norms
        mine, theirs = probe_both(submission, reference, "generic:jaxpr_and_values", "per_example_grad_norms",
                                  [params, xs, ys])
        summaries[batch] = traced_summary(mine, reference_norms(params, xs, ys))
        references[batch] = theirs["jaxpr"] if theirs is not None else None
    expect_no_batch_loop(summaries, references if reference is not None else None)
    # the batch of 24 drawn last
    expect_params_not_mapped(submission.probe("ex03_grad_norms:params_copied", "per_example_grad_norms",
                                              [params, xs, ys]), reference_norms(params, xs, ys))


def test_one_compile_per_shape(submission, reference, rng):
    params = random_model(rng, 4, 2)

    def batch(b):
        return [params, rng.normal(size=(b, 4)).astype(np.float32), rng.normal(size=(b, 2)).astype(np.float32)]

    calls = [{"args": batch(8)} for _ in range(4)] + [{"args": batch(3)} for _ in range(2)]
    _, compiles = count_compiles(submission, reference, "per_example_grad_norms", calls)
    expect_compiles_per_shape(compiles, 2,
                              hint="jit the whole function once (keep @jax.jit on per_example_grad_norms); four calls "
                                   "with one shape and two with another should compile exactly twice",
                              advice="keep @jax.jit on per_example_grad_norms and do all the work inside it; calls "
                                     "with one input shape should compile once")
    expect_norms_in_jax(submission, compiles, *calls[-1]["args"])  # the count floor: the compilations are of JAX's work

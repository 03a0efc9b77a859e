"""Hidden checks for exercise 3: fresh models, shapes and batch sizes drawn at grading time.

The reference is hand-written backprop in NumPy: independent of JAX, and no compiles here.
"""

import numpy as np
import pytest

from grader.feedback import CheckFailed, expect_array, expect_close
from grader.testing import count_compiles, expect_compiles


def random_model(rng, d_in, d_out):
    """A model of random depth (1-3 hidden layers) and widths: nested dict/list pytree."""
    widths = [d_in] + [int(w) for w in rng.integers(2, 9, size=int(rng.integers(1, 4)))]
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


@pytest.mark.parametrize("batch", [1, 5, 16])
def test_matches_one_at_a_time(submission, rng, batch):
    d_in, d_out = int(rng.integers(2, 7)), int(rng.integers(1, 4))
    params = random_model(rng, d_in, d_out)
    xs = rng.normal(size=(batch, d_in)).astype(np.float32)
    ys = rng.normal(size=(batch, d_out)).astype(np.float32)
    out = expect_array(submission.call("per_example_grad_norms", params, xs, ys), shape=(batch,), dtype="float32",
                       what="per_example_grad_norms")
    expect_close(out, reference_norms(params, xs, ys), rtol=2e-4, atol=1e-5,
                 what="the per-example norms",
                 hint="vmap grad over the data only (in_axes=(None, 0, 0)), then combine every leaf of each "
                      "example's gradient: sqrt of the sum of squares over all layers, weights and biases")


def test_no_python_loop_over_batch(submission, rng):
    params = random_model(rng, 3, 2)
    sizes = {}
    for batch in (2, 24):
        xs = rng.normal(size=(batch, 3)).astype(np.float32)
        ys = rng.normal(size=(batch, 2)).astype(np.float32)
        sizes[batch] = submission.probe("generic:jaxpr_of", "per_example_grad_norms", [params, xs, ys])["total_eqns"]
    if sizes[24] > sizes[2]:
        raise CheckFailed(
            "the program grows with the batch size: the batch is looped over in Python",
            measured=f"{sizes[2]} jaxpr equations for a batch of 2, {sizes[24]} for a batch of 24",
            expected="the same number of equations for every batch size",
            hint="let jax.vmap map over the batch instead of a Python for-loop or comprehension",
        )


def test_one_compile_per_shape(submission, rng):
    params = random_model(rng, 4, 2)

    def batch(b):
        return [params, rng.normal(size=(b, 4)).astype(np.float32), rng.normal(size=(b, 2)).astype(np.float32)]

    calls = [{"args": batch(8)} for _ in range(4)] + [{"args": batch(3)} for _ in range(2)]
    _, compiles = count_compiles(submission, "per_example_grad_norms", calls)
    expect_compiles(compiles, at_least=2, at_most=2, what="per_example_grad_norms",
                    hint="jit the whole function once (keep @jax.jit on per_example_grad_norms); four calls with one "
                         "shape and two with another should compile exactly twice")

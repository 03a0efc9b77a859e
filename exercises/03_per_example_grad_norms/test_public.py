"""Public checks for exercise 3 (run by `grade exercise 3`; they carry no points).

The hidden checks test the same properties on other shapes, batch sizes and models.
"""

import numpy as np

from grader.exercises.ex03_grad_norms.judges import expect_compiles_per_shape, expect_no_batch_loop, \
    expect_norms_in_jax, expect_params_not_mapped, traced_summary
from grader.feedback import expect_array, expect_close
from grader.testing import count_compiles, probe_both


def make_params(rng, sizes):
    layers = [{"w": rng.normal(size=(a, b)).astype(np.float32) / np.sqrt(a), "b": rng.normal(size=b).astype(np.float32)}
              for a, b in zip(sizes[:-2], sizes[1:-1])]
    out = {"w": rng.normal(size=sizes[-2:]).astype(np.float32), "b": rng.normal(size=sizes[-1]).astype(np.float32)}
    return {"layers": layers, "out": out}


def one_at_a_time(params, xs, ys):
    """Reference norms by hand-written backprop in float64 NumPy, one example at a time."""
    norms = []
    for x, y in zip(xs.astype(np.float64), ys.astype(np.float64)):
        hs = [x]
        for layer in params["layers"]:
            hs.append(np.tanh(hs[-1] @ layer["w"] + layer["b"]))
        d = hs[-1] @ params["out"]["w"] + params["out"]["b"] - y
        total = np.sum(np.outer(hs[-1], d) ** 2) + np.sum(d ** 2)
        dh = params["out"]["w"] @ d
        for layer, h_in, h_out in zip(reversed(params["layers"]), reversed(hs[:-1]), reversed(hs[1:])):
            dz = dh * (1 - h_out ** 2)
            total += np.sum(np.outer(h_in, dz) ** 2) + np.sum(dz ** 2)
            dh = layer["w"] @ dz
        norms.append(np.sqrt(total))
    return np.asarray(norms, np.float32)


def test_matches_reference_small(submission, rng):
    params = make_params(rng, [3, 5, 2])
    xs = rng.normal(size=(4, 3)).astype(np.float32)
    ys = rng.normal(size=(4, 2)).astype(np.float32)
    out = expect_array(submission.call("per_example_grad_norms", params, xs, ys), shape=(4,), dtype="float32",
                       what="per_example_grad_norms(params, xs, ys)")
    expect_close(out, one_at_a_time(params, xs, ys), rtol=1e-4, atol=1e-5, reveal=True,
                 what="per_example_grad_norms(params, xs, ys)",
                 hint="each entry is sqrt(sum of squares of ALL gradient leaves) for that one example")


def test_compiles_once_for_one_shape(submission, reference, rng):
    params = make_params(rng, [3, 4, 2])
    calls = [{"args": [params, rng.normal(size=(4, 3)).astype(np.float32), rng.normal(size=(4, 2)).astype(np.float32)]}
             for _ in range(3)]
    _, compiles = count_compiles(submission, reference, "per_example_grad_norms", calls)
    expect_compiles_per_shape(compiles, 1, hint="keep @jax.jit on per_example_grad_norms; three calls with one input "
                                               "shape should compile once")
    expect_norms_in_jax(submission, compiles, *calls[0]["args"])  # the compilations must be of JAX doing the work


def test_no_loop_small(submission, reference, rng):
    params = make_params(rng, [3, 4, 2])
    summaries, references = {}, {}
    for batch in (2, 6):
        xs = rng.normal(size=(batch, 3)).astype(np.float32)
        ys = rng.normal(size=(batch, 2)).astype(np.float32)
        # structure and values from one trace: the program judged is the one that computes the norms
        mine, theirs = probe_both(submission, reference, "generic:jaxpr_and_values", "per_example_grad_norms",
                                  [params, xs, ys])
        summaries[batch] = traced_summary(mine, one_at_a_time(params, xs, ys))
        references[batch] = theirs["jaxpr"] if theirs is not None else None
    expect_no_batch_loop(summaries, references if reference is not None else None)
    expect_params_not_mapped(submission.probe("ex03_grad_norms:params_copied", "per_example_grad_norms",
                                              [params, xs, ys]), one_at_a_time(params, xs, ys))

"""Exercise 3: per-example gradient norms.

Read README.md in this folder first.  Fill in every TODO; keep the names and
signatures.  Check your work with:  grade exercise 3
"""

import jax
import jax.numpy as jnp


def predict(params, x):
    """A small tanh MLP for ONE example.

    params = {"layers": [{"w": f32[d_i, d_i+1], "b": f32[d_i+1]}, ...],
              "out": {"w": f32[d_h, d_out], "b": f32[d_out]}}
    x: f32[d_in]  ->  f32[d_out]
    Do not change this function: the grader's reference uses the same model.
    """
    h = x
    for layer in params["layers"]:
        h = jnp.tanh(h @ layer["w"] + layer["b"])
    return h @ params["out"]["w"] + params["out"]["b"]


def example_loss(params, x, y):
    """Squared error of ONE example (x: f32[d_in], y: f32[d_out]) -> f32[]. Do not change."""
    return 0.5 * jnp.sum((predict(params, x) - y) ** 2)


@jax.jit
def per_example_grad_norms(params, xs, ys):
    """One gradient norm per example.

    xs: f32[B, d_in], ys: f32[B, d_out]  ->  f32[B], where entry i is the L2 norm of
    grad(example_loss)(params, xs[i], ys[i]) taken over EVERY parameter leaf together
    (all layers, weights and biases, as if they were flattened into one vector).

    TODO: differentiate `example_loss` for one example, vectorise that over the batch
    (the parameters are shared by all examples, the data is not), then reduce each
    example's gradient pytree to one number.  No loop over the batch: neither a Python
    loop nor lax.map / lax.scan / fori_loop / while_loop -- vectorise it with jax.vmap.
    """
    raise NotImplementedError("TODO: per_example_grad_norms")

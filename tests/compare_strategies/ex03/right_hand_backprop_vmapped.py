# verdict: right
# strategy: hand-written backprop, vmapped
# idea: manual backward pass for one example, vmapped over the batch
"""Exercise 3 submission (right_hand_backprop_vmapped), written from the statement alone."""

import jax
import jax.numpy as jnp
from jax import lax


def predict(params, x):
    h = x
    for layer in params["layers"]:
        h = jnp.tanh(h @ layer["w"] + layer["b"])
    return h @ params["out"]["w"] + params["out"]["b"]


def example_loss(params, x, y):
    return 0.5 * jnp.sum((predict(params, x) - y) ** 2)


def _manual_grad(params, x, y):
    hs = [x]
    pre = []
    h = x
    for layer in params["layers"]:
        a = h @ layer["w"] + layer["b"]
        pre.append(a)
        h = jnp.tanh(a)
        hs.append(h)
    out = h @ params["out"]["w"] + params["out"]["b"]
    d = out - y                                   # dL/dout for 0.5*sum(sq)
    g_out = {"w": jnp.outer(hs[-1], d), "b": d}
    dh = params["out"]["w"] @ d
    g_layers = []
    for i in reversed(range(len(params["layers"]))):
        da = dh * (1.0 - jnp.tanh(pre[i]) ** 2)
        g_layers.append({"w": jnp.outer(hs[i], da), "b": da})
        dh = params["layers"][i]["w"] @ da
    return {"layers": g_layers[::-1], "out": g_out}


@jax.jit
def per_example_grad_norms(params, xs, ys):
    grads = jax.vmap(_manual_grad, in_axes=(None, 0, 0))(params, xs, ys)
    total = jnp.zeros(xs.shape[0], xs.dtype)
    for leaf in jax.tree.leaves(grads):
        total = total + jnp.sum(jnp.square(leaf), axis=tuple(range(1, leaf.ndim)))
    return jnp.sqrt(total)

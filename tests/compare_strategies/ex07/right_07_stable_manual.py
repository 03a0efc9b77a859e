# verdict: right
# strategy: max-shifted manual CE + fancy indexing
# idea: numerically stable manual softmax CE with integer-array indexing; vmap with explicit out_axes
"""Exercise 7 submission (independent author)."""
import math
import re
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax

LEARNING_RATE = 0.05
CLIP_NORM = 1.0
WEIGHT_DECAY = 0.01


def forward(params, x):
    h = x
    for layer in params[:-1]:
        h = jax.nn.relu(h @ layer["w"] + layer["b"])
    return h @ params[-1]["w"] + params[-1]["b"]

def init_params(key, sizes):
    keys = jax.random.split(key, len(sizes) - 1)
    params = []
    for k, n_in, n_out in zip(keys, sizes[:-1], sizes[1:]):
        w = jax.random.normal(k, (n_in, n_out), dtype=jnp.float32) * math.sqrt(2 / n_in)
        params.append({"w": w, "b": jnp.zeros(n_out, dtype=jnp.float32)})
    return params



def loss_fn(params, x, y):
    logits = forward(params, x)
    logits = logits - jax.lax.stop_gradient(jnp.max(logits, axis=1, keepdims=True))
    logz = jnp.log(jnp.sum(jnp.exp(logits), axis=1))
    return jnp.mean(logz - logits[jnp.arange(logits.shape[0]), y])



def make_optimizer(lr, clip, weight_decay):
    return optax.chain(optax.clip_by_global_norm(clip), optax.adamw(lr, weight_decay=weight_decay))



_OPT = make_optimizer(LEARNING_RATE, CLIP_NORM, WEIGHT_DECAY)


def _step(params, opt_state, x, y):
    (loss, _logits), grads = jax.value_and_grad(
        lambda p: (loss_fn(p, x, y), forward(p, x)), has_aux=True)(params)
    updates, opt_state = _OPT.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


train_step = jax.jit(_step, donate_argnums=[0, 1])



def per_example(params, x, y):
    def single(p, xi, yi):
        z = forward(p, xi)
        z = z - jnp.max(z)
        loss = jnp.log(jnp.sum(jnp.exp(z))) - z[yi]
        return loss, jnp.argmax(z) == yi
    losses, correct = jax.vmap(single, (None, 0, 0), (0, 0))(params, x, y)
    return losses.astype(jnp.float32), correct.astype(bool)



def report(params, opt_state, x, y):
    lowered = train_step.lower(params, opt_state, x, y)
    compiled = lowered.compile()
    cost = compiled.cost_analysis()
    text = compiled.as_text()
    m = re.search(r"^ENTRY .*?\{\n(.*?)^\}", text, re.S | re.M)
    count = len(re.findall(r"^\s*(?:ROOT )?%\S+ = .*? fusion\(", m.group(1), re.M))
    return dict(flops=float(cost["flops"]), bytes_accessed=float(cost["bytes accessed"]), fusions=count)

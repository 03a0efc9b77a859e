# verdict: right
# strategy: zip init + multiline regex reader
# idea: zip-based init, optax CE, closure vmap, regex over ENTRY block
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
    return optax.softmax_cross_entropy_with_integer_labels(forward(params, x), y).mean()



def make_optimizer(lr, clip, weight_decay):
    return optax.chain(optax.clip_by_global_norm(clip), optax.adamw(lr, weight_decay=weight_decay))



_OPT = make_optimizer(LEARNING_RATE, CLIP_NORM, WEIGHT_DECAY)


@partial(jax.jit, donate_argnums=(0, 1))
def train_step(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    updates, opt_state = _OPT.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss



def per_example(params, x, y):
    def one(xi, yi):
        logits = forward(params, xi)
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, yi)
        return loss, jnp.argmax(logits).astype(yi.dtype) == yi
    return jax.vmap(one)(x, y)



def report(params, opt_state, x, y):
    lowered = train_step.lower(params, opt_state, x, y)
    compiled = lowered.compile()
    cost = compiled.cost_analysis()
    text = compiled.as_text()
    m = re.search(r"^ENTRY .*?\{\n(.*?)^\}", text, re.S | re.M)
    count = len(re.findall(r"^\s*(?:ROOT )?%\S+ = .*? fusion\(", m.group(1), re.M))
    return dict(flops=float(cost["flops"]), bytes_accessed=float(cost["bytes accessed"]), fusions=count)

# verdict: right
# strategy: hand-written logsumexp CE + donate_argnames + tokenising reader
# idea: CE by logsumexp/take_along_axis; jit with donate_argnames; optimizer built inside the step; opcode tokenizer
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
    lse = jax.nn.logsumexp(logits, axis=-1)
    picked = jnp.take_along_axis(logits, y[:, None].astype(jnp.int32), axis=-1)[:, 0]
    return jnp.mean(lse - picked)



def make_optimizer(lr, clip, weight_decay):
    clipper = optax.clip_by_global_norm(max_norm=clip)
    adamw = optax.adamw(learning_rate=lr, b1=0.9, b2=0.999, eps=1e-8, weight_decay=weight_decay)
    return optax.chain(clipper, adamw)



def _step(params, opt_state, x, y):
    opt = make_optimizer(LEARNING_RATE, CLIP_NORM, WEIGHT_DECAY)   # built inside: pure, traced once
    grads = jax.grad(loss_fn)(params, x, y)
    loss = loss_fn(params, x, y)
    updates, new_state = opt.update(grads, opt_state, params)
    new_params = jax.tree.map(lambda p, u: p + u, params, updates)
    return new_params, new_state, loss


train_step = jax.jit(_step, donate_argnames=("params", "opt_state"))



def per_example(params, x, y):
    def one(xi, yi):
        logits = forward(params, xi)
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, yi)
        return loss, jnp.argmax(logits).astype(yi.dtype) == yi
    return jax.vmap(one)(x, y)



def _opcode(line):
    """Opcode of one HLO instruction line: the identifier after the result type."""
    rhs = line.split("=", 1)[1].lstrip()
    if rhs.startswith("("):            # tuple type: skip balanced parentheses
        depth = 0
        for i, ch in enumerate(rhs):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0:
                rhs = rhs[i + 1:].lstrip()
                break
    else:
        rhs = rhs.split(None, 1)[1]
    return rhs.split("(", 1)[0].strip()


def report(params, opt_state, x, y):
    compiled = train_step.lower(params, opt_state, x, y).compile()
    ca = compiled.cost_analysis()
    if isinstance(ca, (list, tuple)):
        ca = ca[0]
    entry = compiled.as_text().split("\nENTRY", 1)[1]
    body = entry.split("\n}", 1)[0].splitlines()[1:]
    fus = sum(1 for l in body if "=" in l and _opcode(l) == "fusion")
    return {"flops": float(ca["flops"]), "bytes_accessed": float(ca["bytes accessed"]), "fusions": int(fus)}

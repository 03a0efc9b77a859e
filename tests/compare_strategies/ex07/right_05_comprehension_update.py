# verdict: right
# strategy: dict comprehension apply_updates + jitted vmap metric
# idea: params updated with list/dict comprehension; per_example itself jitted; init with numpy scale
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
    sizes = tuple(int(s) for s in sizes)
    keys = jax.random.split(key, len(sizes) - 1)
    out = []
    for i in range(len(sizes) - 1):
        scale = jnp.asarray(np.sqrt(2.0 / sizes[i]), jnp.float32)
        out.append(dict(w=scale * jax.random.normal(keys[i], shape=(sizes[i], sizes[i + 1])),
                        b=jnp.zeros_like(jnp.empty((sizes[i + 1],), jnp.float32))))
    return out



def loss_fn(params, x, y):
    logits = forward(params, x)
    lse = jax.nn.logsumexp(logits, axis=-1)
    picked = jnp.take_along_axis(logits, y[:, None].astype(jnp.int32), axis=-1)[:, 0]
    return jnp.mean(lse - picked)



def make_optimizer(lr, clip, weight_decay):
    return optax.chain(optax.clip_by_global_norm(clip), optax.adamw(lr, weight_decay=weight_decay))



_OPT = make_optimizer(LEARNING_RATE, CLIP_NORM, WEIGHT_DECAY)


def _step(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    updates, opt_state = _OPT.update(grads, opt_state, params)
    new_params = [{k: layer[k] + upd[k] for k in layer} for layer, upd in zip(params, updates)]
    return new_params, opt_state, loss


train_step = jax.jit(_step, donate_argnums=(0, 1), static_argnums=())



def _example_metric(params, xi, yi):
    logits = forward(params, xi)
    logp = logits - jax.nn.logsumexp(logits)
    return -jnp.take(logp, yi), jnp.equal(jnp.argmax(logits, axis=-1), yi)


per_example = jax.jit(jax.vmap(_example_metric, in_axes=(None, 0, 0)))



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

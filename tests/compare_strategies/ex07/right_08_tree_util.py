# verdict: right
# strategy: tree_util.tree_map jnp.add + line state machine
# idea: optimizer built inside jitted step; jax.tree_util; line-by-line ENTRY state machine
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
    logp = jax.nn.log_softmax(forward(params, x))
    onehot = jax.nn.one_hot(y, logp.shape[-1], dtype=logp.dtype)
    return -jnp.sum(onehot * logp) / x.shape[0]



def make_optimizer(lr, clip, weight_decay):
    clipper = optax.clip_by_global_norm(max_norm=clip)
    adamw = optax.adamw(learning_rate=lr, b1=0.9, b2=0.999, eps=1e-8, weight_decay=weight_decay)
    return optax.chain(clipper, adamw)



def _loss_and_grad(params, x, y):
    return jax.value_and_grad(loss_fn)(params, x, y)


@partial(jax.jit, donate_argnums=(0, 1))
def train_step(params, opt_state, x, y):
    opt = make_optimizer(LEARNING_RATE, CLIP_NORM, WEIGHT_DECAY)
    loss, grads = _loss_and_grad(params, x, y)
    updates, opt_state = opt.update(grads, opt_state, params=params)
    params = jax.tree_util.tree_map(jnp.add, params, updates)
    return params, opt_state, loss



def per_example(params, x, y):
    def one(p, xi, yi):
        logits = forward(p, xi[None, :])[0]
        lse = jax.scipy.special.logsumexp(logits)
        return lse - logits[yi], logits[yi] >= jnp.max(logits)
    return jax.vmap(one, in_axes=(None, 0, 0))(params, x, y)



def report(params, opt_state, x, y):
    compiled = train_step.lower(params, opt_state, x, y).compile()
    analysis = dict(compiled.cost_analysis())
    text = compiled.as_text()
    in_entry, fusions = False, 0
    for raw in text.split("\n"):
        line = raw.strip()
        if raw.startswith("ENTRY "):
            in_entry = True
            continue
        if in_entry:
            if line == "}":
                break
            if line.startswith("ROOT "):
                line = line[5:]
            if " = " not in line:
                continue
            rhs = line.split(" = ", 1)[1]
            # opcode = first word directly followed by "(" after the (possibly tuple) shape
            m = re.match(r"(\(.*?\)|[^\s]+)\s+([a-z][\w-]*)\(", rhs)
            if m and m.group(2) == "fusion":
                fusions += 1
    return {"flops": float(analysis["flops"]), "bytes_accessed": float(analysis["bytes accessed"]),
            "fusions": fusions}

# verdict: right
# strategy: one-hot CE + has_aux value_and_grad + HloModule IR walk
# idea: one-hot log_softmax loss; report lowers ShapeDtypeStructs and walks HloModule computations
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
    return [
        {"w": jax.random.normal(keys[i], (sizes[i], sizes[i + 1]), jnp.float32) * jnp.sqrt(2.0 / sizes[i]),
         "b": jnp.zeros((sizes[i + 1],), jnp.float32)}
        for i in range(len(sizes) - 1)
    ]



def loss_fn(params, x, y):
    logp = jax.nn.log_softmax(forward(params, x))
    onehot = jax.nn.one_hot(y, logp.shape[-1], dtype=logp.dtype)
    return -jnp.sum(onehot * logp) / x.shape[0]



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
    def one(p, xi, yi):
        logits = forward(p, xi[None, :])[0]
        lse = jax.scipy.special.logsumexp(logits)
        return lse - logits[yi], logits[yi] >= jnp.max(logits)
    return jax.vmap(one, in_axes=(None, 0, 0))(params, x, y)



def report(params, opt_state, x, y):
    """Read the compiled module's IR objects (no text parsing of instructions)."""
    shapes = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), (params, opt_state, x, y))
    compiled = train_step.lower(*shapes).compile()
    cost = compiled.cost_analysis()
    module = compiled.runtime_executable().hlo_modules()[0]
    comps = module.computations()
    called = set()
    for c in comps:
        for ins in c.instructions():
            called.update(re.findall(r"(?:calls|to_apply|body|condition|branch_computations)=\{?%?([\w.\-]+)",
                                     ins.to_string()))
    entry = [c for c in comps if c.name not in called]
    assert len(entry) == 1, [c.name for c in entry]
    fusions = sum(1 for ins in entry[0].instructions() if str(ins.opcode).endswith("kFusion"))
    return {"flops": float(cost["flops"]), "bytes_accessed": float(cost["bytes accessed"]), "fusions": fusions}

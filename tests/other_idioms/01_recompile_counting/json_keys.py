"""Exercise 1 in another idiom: each call's key as canonical JSON text; a jitted kernel with a
positional static argument, always called positionally."""

import json

import jax
import jax.numpy as jnp

MODES = ("probs", "logz", "entropy")


def _plain(v):
    if isinstance(v, str):
        return {"static": v}
    if type(v) is float:
        return {"leaf": ["float32", [], True]}
    if type(v) is int:
        return {"leaf": ["int32", [], True]}
    if "array" in v:
        return {"leaf": [v["array"], list(v["shape"]), False]}
    if "tuple" in v:
        return {"tuple": [_plain(e) for e in v["tuple"]]}
    return {"dict": {k: _plain(e) for k, e in v["dict"].items()}}


def predict_compiles(calls):
    # sort_keys orders the keywords (their order does not matter to jit) and every dict's keys
    # (a dict's treedef sorts them); the positional list keeps its order
    keys = {json.dumps({"args": [_plain(a) for a in c["args"]],
                        "kwargs": {k: _plain(v) for k, v in c["kwargs"].items()}}, sort_keys=True)
            for c in calls}
    return len(keys)


def _kernel_impl(logits, temperature, shift, mode):
    z = (logits + shift) / temperature
    m = jnp.max(z, axis=-1, keepdims=True)
    lse = jnp.log(jnp.sum(jnp.exp(z - m), axis=-1)) + m[..., 0]
    if mode == "logz":
        return lse
    p = jnp.exp(z - lse[..., None])
    if mode == "probs":
        return p
    return lse - jnp.sum(p * z, axis=-1)  # -sum p log p, with log p = z - lse


_kernel = jax.jit(_kernel_impl, static_argnums=3)


def score(logits, temperature, shift, mode):
    return _kernel(logits, temperature, jnp.asarray(shift, dtype=jnp.float32), mode)

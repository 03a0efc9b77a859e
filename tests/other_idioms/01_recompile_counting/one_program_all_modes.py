"""Exercise 1 in another idiom: canonical JSON keys for Part A; for Part B one jitted program
computes every output, so it compiles once per logits shape, fewer than once per (shape, mode)
pair: "at most" allows it."""
from functools import partial
import json
import jax
import jax.numpy as jnp
import numpy as np

def _canon(v):
    """Replace every leaf by its abstract type; json.dumps(sort_keys=True) sorts dicts."""
    if isinstance(v, float):
        return {"weak": "float32"}
    if isinstance(v, int):
        return {"weak": "int32"}
    if isinstance(v, str):
        return {"static": v}
    if "array" in v:
        return {"a": v["array"], "s": list(v["shape"])}
    if "tuple" in v:
        return {"t": [_canon(e) for e in v["tuple"]]}
    return {"d": {k: _canon(e) for k, e in v["dict"].items()}}


def predict_compiles(calls):
    keys = set()
    for call in calls:
        keys.add(json.dumps({"args": [_canon(a) for a in call["args"]],
                             "kwargs": {k: _canon(v) for k, v in call["kwargs"].items()}},
                            sort_keys=True))
    return len(keys)


MODES = ("probs", "logz", "entropy")


@jax.jit
def _all(logits, temperature, shift):
    z = (logits + shift) / temperature
    logz = jax.scipy.special.logsumexp(z, axis=-1)
    logp = z - logz[..., None]
    p = jnp.exp(logp)
    return {"probs": p, "logz": logz, "entropy": -jnp.sum(p * logp, axis=-1)}


def score(logits, temperature, shift, mode):
    out = _all(logits, jnp.asarray(temperature, jnp.float32), jnp.asarray(shift, jnp.float32))
    return out[mode]

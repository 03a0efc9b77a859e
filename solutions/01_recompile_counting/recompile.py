"""Reference solution for exercise 1 (counting recompilations)."""

from functools import partial

import jax
import jax.numpy as jnp

# ---------------------------------------------------------------------------------------
# Part A
# ---------------------------------------------------------------------------------------

_SCALAR = {float: "float32", int: "int32"}  # what a Python scalar becomes (x64 off)


def _key(v):
    """The part of jit's cache key one value contributes."""
    if isinstance(v, str):                     # a static argument: its value is the key
        return ("static", v)
    if type(v) in _SCALAR:                     # Python scalar: 0-d array with a WEAK type
        return ("leaf", _SCALAR[type(v)], (), True)
    if "array" in v:                           # numpy or jax: only dtype and shape count
        return ("leaf", v["array"], tuple(v["shape"]), False)
    if "tuple" in v:
        return ("tuple", tuple(_key(e) for e in v["tuple"]))
    if "dict" in v:                            # a dict's treedef sorts its keys
        return ("dict", tuple(sorted((k, _key(e)) for k, e in v["dict"].items())))
    raise ValueError(f"unknown value spec {v!r}")


def _call_key(call):
    # jit keys a call on the pytree (args, kwargs): positional arguments are a tuple and
    # keyword arguments a dict, so passing the same value another way (or leaving a static
    # argument at its default, i.e. out of the pytree) is a new signature.  A dict's keys
    # are sorted, so the order of keyword arguments does not matter.
    positional = tuple(_key(a) for a in call.get("args", []))
    keyword = tuple(sorted((name, _key(v)) for name, v in call.get("kwargs", {}).items()))
    return positional, keyword


def predict_compiles(calls):
    # The cache remembers every signature it has seen: count distinct keys.
    return len({_call_key(c) for c in calls})


# ---------------------------------------------------------------------------------------
# Part B
# ---------------------------------------------------------------------------------------

MODES = ("probs", "logz", "entropy")


@partial(jax.jit, static_argnames=("mode",))
def _score_kernel(logits, temperature, shift, *, mode):
    z = (logits + shift) / temperature
    logp = jax.nn.log_softmax(z, axis=-1)
    if mode == "probs":
        return jnp.exp(logp)
    if mode == "logz":
        return jax.nn.logsumexp(z, axis=-1)
    if mode == "entropy":
        return -jnp.sum(jnp.exp(logp) * logp, axis=-1)
    raise ValueError(f"unknown mode {mode!r}")


def score(logits, temperature, shift, mode):
    # One canonical call: arrays strongly typed as float32 whatever the caller sent,
    # the mode always by keyword.  temperature stays a traced argument (a Python float
    # is consistently weak-typed, and its value is not part of the key).
    shift = jnp.asarray(shift, dtype=jnp.float32)
    return _score_kernel(jnp.asarray(logits, jnp.float32), temperature, shift, mode=mode)

"""Exercise 1 in another idiom: jax.tree_util builds the (args, kwargs) pytree's structure;
one jitted function per mode, built once, with no static arguments at all."""

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp
from jax import tree_util

MODES = ("probs", "logz", "entropy")


class _Leaf:
    """What one value contributes to jit's key (a placeholder, so tree_util sees it as a leaf)."""

    def __init__(self, key):
        self.key = key


def _rebuild(v):
    """The call's value with containers kept and every leaf replaced by its key."""
    if isinstance(v, str):
        return _Leaf(("static", v))
    if isinstance(v, bool):
        raise TypeError("no bools in this language")
    if isinstance(v, float):
        return _Leaf(("float32", (), "weak"))
    if isinstance(v, int):
        return _Leaf(("int32", (), "weak"))
    if "array" in v:  # NumPy or jax: same key; never weak
        return _Leaf((v["array"], tuple(v["shape"]), "strong"))
    if "tuple" in v:
        return tuple(_rebuild(e) for e in v["tuple"])
    return {k: _rebuild(e) for k, e in v["dict"].items()}


def predict_compiles(calls):
    seen = set()
    for call in calls:
        tree = (tuple(_rebuild(a) for a in call["args"]), {k: _rebuild(v) for k, v in call["kwargs"].items()})
        leaves, treedef = tree_util.tree_flatten(tree)  # dict keys sorted, as jit's own flattening does
        seen.add((treedef, tuple(leaf.key for leaf in leaves)))
    return len(seen)


def _z(logits, temperature, shift):
    return (logits + shift) / temperature


@jax.jit
def _probs(logits, temperature, shift):
    return jax.nn.softmax(_z(logits, temperature, shift), axis=-1)


@jax.jit
def _logz(logits, temperature, shift):
    return jsp.logsumexp(_z(logits, temperature, shift), axis=-1)


@jax.jit
def _entropy(logits, temperature, shift):
    p = jax.nn.softmax(_z(logits, temperature, shift), axis=-1)
    return jnp.sum(jsp.entr(p), axis=-1)


_BY_MODE = {"probs": _probs, "logz": _logz, "entropy": _entropy}


def score(logits, temperature, shift, mode):
    # float32 scalars with a strong type, whatever arrived; the mode picks the function
    return _BY_MODE[mode](jnp.float32(logits), jnp.float32(temperature), jnp.float32(shift))

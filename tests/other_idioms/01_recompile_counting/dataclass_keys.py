"""Exercise 1 in another idiom: frozen dataclasses as cache keys, built with pattern
matching; one jitted closure per mode, made on first use and kept."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

MODES = ("probs", "logz", "entropy")


@dataclasses.dataclass(frozen=True)
class Leaf:
    dtype: str
    shape: tuple
    weak: bool


@dataclasses.dataclass(frozen=True)
class Node:
    kind: str
    children: tuple  # ((name or index, key), ...)


@dataclasses.dataclass(frozen=True)
class CallKey:
    positional: tuple
    keywords: frozenset


def key_of(v):
    match v:
        case str():
            return ("static", v)
        case bool():
            raise TypeError(v)
        case float():
            return Leaf("float32", (), True)
        case int():
            return Leaf("int32", (), True)
        case {"array": dtype, "shape": shape, **_numpy_flag}:
            return Leaf(dtype, tuple(shape), False)
        case {"tuple": items}:
            return Node("tuple", tuple(enumerate(key_of(e) for e in items)))
        case {"dict": items}:
            return Node("dict", tuple(sorted((k, key_of(e)) for k, e in items.items())))
    raise ValueError(v)


def predict_compiles(calls):
    return len({CallKey(tuple(key_of(a) for a in c["args"]),
                        frozenset((k, key_of(v)) for k, v in c["kwargs"].items())) for c in calls})


@functools.cache
def _kernel(mode):
    def serve(logits, temperature, shift):
        z = (logits + shift) / temperature
        logp = jax.nn.log_softmax(z, axis=-1)
        if mode == "probs":
            return jnp.exp(logp)
        if mode == "logz":
            return jax.nn.logsumexp(z, axis=-1)
        return -jnp.sum(jnp.exp(logp) * logp, axis=-1)

    return jax.jit(serve)


def score(logits, temperature, shift, mode):
    # a NumPy float32 scalar is strongly typed, like a 0-d float32 array
    return _kernel(mode)(logits, temperature, np.float32(shift))

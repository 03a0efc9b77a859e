"""Probe for exercise 1: the true compile count of call sequences, measured live.

Runs in the *clean* worker (no learner code; manifest ``clean_worker = true``), a fresh
JAX process beside the learner's sandbox.  The call language is the one the stub
documents: a call is ``{"args": [V...], "kwargs": {name: V}}`` and a value ``V`` is a
Python float/int/str, ``{"array": dtype, "shape": [...], "numpy": bool}``,
``{"tuple": [V...]}`` or ``{"dict": {key: V}}``.
"""

from __future__ import annotations

import jax
import numpy as np

from grader.compiles import CompileRecorder

TARGET = "ex01_recompile_target"  # a distinctive name: compiles are counted by it

_jit = jax.jit
_device_put = jax.device_put
_block = jax.block_until_ready


def _fresh_jit():
    """A new function object each time, so its jit cache starts empty."""
    def ex01_recompile_target(x, scale, mode="sum"):
        return x, scale  # what it computes does not matter; returning inputs compiles fastest
    return _jit(ex01_recompile_target, static_argnames=("mode",))


def _build(spec, rng):
    if isinstance(spec, (float, int, str)):
        return spec
    if "array" in spec:
        shape = tuple(spec["shape"])
        data = rng.integers(-9, 10, size=shape) if spec["array"] == "int32" else rng.normal(size=shape)
        data = np.asarray(data, dtype=spec["array"])
        return data if spec.get("numpy") else _device_put(data)  # (jnp.asarray would compile a helper)
    if "tuple" in spec:
        return tuple(_build(s, rng) for s in spec["tuple"])
    return {k: _build(s, rng) for k, s in spec["dict"].items()}


def count_sequences(ctx, sequences: list, seed: int) -> dict:
    """``{"counts": [compiles of a fresh jitted target over each sequence], "jax": version}``."""
    rng = np.random.default_rng(seed)
    counts = []
    for calls in sequences:
        built = [([_build(a, rng) for a in c["args"]], {k: _build(v, rng) for k, v in c["kwargs"].items()})
                 for c in calls]
        _block(built)
        f = _fresh_jit()
        with CompileRecorder(ctx.roots) as rec:
            for args, kwargs in built:
                _block(f(*args, **kwargs))
        n = rec.learner  # the target is the only code here that is not JAX's own
        if n < 1:
            raise RuntimeError("no compilation of the target was recorded; compile counting is broken")
        counts.append(n)
    return {"counts": counts, "jax": jax.__version__}

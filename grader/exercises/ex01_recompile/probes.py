"""Probes for exercise 1.

``count_sequences``: the true compile count of call sequences, measured live.  It runs in
the *clean* worker (no learner code; manifest ``clean_worker = true``), a fresh
JAX process beside the learner's sandbox.  The call language is the one the stub
documents: a call is ``{"args": [V...], "kwargs": {name: V}}`` and a value ``V`` is a
Python float/int/str, ``{"array": dtype, "shape": [...], "numpy": bool}``,
``{"tuple": [V...]}`` or ``{"dict": {key: V}}``.

``serve_workload``: part B's workload through the learner's ``score``, in the sandbox,
with the compilations of each request recorded on their own (for the diagnosis).
"""

from __future__ import annotations

import jax
import numpy as np

from grader.compiles import CompileRecorder
from grader.sandbox.context import to_jax

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


def serve_workload(ctx, requests: list) -> dict:
    """Part B: call the learner's ``score`` once per ``{"args", "kwargs"}`` request, recording
    the compilations of each request on its own (``per_request``: the learner's count per
    request, for the diagnosis only) and of all of them (``compiles``: the records merged,
    which the trusted side checks against the meter of this whole request; the primitives of
    every request's compiled programs summed, for the count floor).  Inputs become
    JAX arrays before any recording starts."""
    fn = ctx.function("score")
    prepared = [(to_jax(r.get("args", [])), to_jax(r.get("kwargs", {}))) for r in requests]
    _block(prepared)
    outputs, per_request = [], []
    merged = {"total": 0, "incidental": 0, "events": [], "cache_misses": [], "primitives": {},
              "programs": {"read": 0, "unread": 0}, "work": 0}
    for args, kwargs in prepared:
        with CompileRecorder(ctx.roots, explain_cache_misses=True) as rec:
            outputs.append(_block(fn(*args, **kwargs)))
        plain = rec.to_plain()
        per_request.append(rec.learner)
        merged["total"] += plain["total"]
        merged["incidental"] += plain["incidental"]
        merged["events"] += plain["events"]
        merged["cache_misses"] += plain["cache_misses"]
        for name, n in plain["primitives"].items():
            merged["primitives"][name] = merged["primitives"].get(name, 0) + n
        for k in ("read", "unread"):
            merged["programs"][k] += plain["programs"][k]
        merged["work"] += plain["work"]
    merged["events"] = merged["events"][:200]
    merged["cache_misses"] = merged["cache_misses"][:50]
    return {"outputs": outputs, "compiles": merged, "per_request": per_request}

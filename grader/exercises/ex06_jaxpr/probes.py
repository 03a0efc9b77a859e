"""Probes for exercise 6 (reading a jaxpr).

``count_in_source(ctx, source, fn_name, arg_specs)``
    Runs the learner's ``count_primitives`` on a function the learner has never seen.
    The trusted test sends the function's SOURCE (written from the run's seed) and
    ``arg_specs``, a list of ``[shape, dtype]`` pairs.  The source is executed in a
    fresh namespace holding only ``jax``, ``jnp`` and ``lax`` (bound when this module was
    imported, before the learner's module), traced with ``jax.make_jaxpr`` on
    ``jax.ShapeDtypeStruct`` arguments (no data, nothing compiles), and the ``ClosedJaxpr``
    goes to ``count_primitives``.  Returns ``{"type": <name of the returned type>,
    "counts": <the mapping as a plain dict; None when it is not a mapping or has a key
    that is not a str>, "key_types": <sorted names of the keys' types>, "x64": <whether jax_enable_x64 is on here>}``.  A ``dict`` subclass (``Counter``) is copied
    into a plain ``dict``; its values must still be plain data to come back.

``answers(ctx)``
    ``{"answers": <what the learner's answers() returned>}``.

The grader's own walker (``grader.ir``) is out of reach: the sandbox refuses
``import grader...`` from learner code (``grader.sandbox.context.seal_grader``).
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp
from jax import lax

_make_jaxpr = jax.make_jaxpr
_ShapeDtypeStruct = jax.ShapeDtypeStruct
_NAMESPACE = {"jax": jax, "jnp": jnp, "lax": lax}


def _trace(source: str, fn_name: str, arg_specs: list):
    namespace = dict(_NAMESPACE)
    namespace["__name__"] = "ex06_unseen"
    exec(compile(source, "<grader-generated>", "exec"), namespace)  # source written by the trusted test
    args = [_ShapeDtypeStruct(tuple(shape), dtype) for shape, dtype in arg_specs]
    return _make_jaxpr(namespace[fn_name])(*args)


def count_in_source(ctx, source: str, fn_name: str, arg_specs: list) -> dict:
    closed = _trace(source, fn_name, arg_specs)
    result = ctx.function("count_primitives")(closed)
    out = {"type": type(result).__name__, "counts": None, "key_types": [],
           "x64": bool(jax.config.read("jax_enable_x64"))}
    if isinstance(result, Mapping):
        items = list(result.items())
        out["key_types"] = sorted({type(k).__name__ for k, _ in items})
        if all(type(k) is str for k, _ in items):
            out["counts"] = dict(items)
    return out


def answers(ctx) -> dict:
    return {"answers": ctx.function("answers")()}

"""Probe for exercise 6 (reading a jaxpr): run the learner's ``count_primitives`` on
functions the learner has never seen.

The trusted test sends the SOURCE of one or more functions (built from the run's seed)
plus abstract argument specs.  The probe executes that source in a fresh namespace
that only holds ``jax``, ``jax.numpy as jnp`` and ``jax.lax as lax`` (bound when this
module was imported, before the learner's module), traces the named function with
``jax.make_jaxpr`` on ``jax.ShapeDtypeStruct`` arguments (no data, no compilation),
hands the ``ClosedJaxpr`` to the learner's ``count_primitives`` and returns what it
answered.  The trusted side traces the same source itself and decides.

``count_in_source(ctx, source, fn_name, arg_specs)``
    ``arg_specs`` is a list of ``[shape, dtype]`` pairs.  Returns
    ``{"type": <name of the returned type>, "counts": <the mapping as a plain dict, or
    None when the result was not a mapping or had a key that is not a str>,
    "key_types": <sorted names of the keys' types>}``.  A ``dict`` subclass such as
    ``collections.Counter`` is copied into a plain ``dict`` first (its values still
    have to be plain data to come back).
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
    kind = type(result).__name__
    if not isinstance(result, Mapping):
        return {"type": kind, "counts": None, "key_types": []}
    items = list(result.items())
    key_types = sorted({type(k).__name__ for k, _ in items})
    if any(type(k) is not str for k, _ in items):
        return {"type": kind, "counts": None, "key_types": key_types}
    return {"type": kind, "counts": dict(items), "key_types": key_types}

"""Exercise 6 (reading a jaxpr): tracing a function from its source and reading what the
learner's ``count_primitives`` answered, shared by the public and the hidden checks.

This module imports JAX: both check files of exercise 6 already do (the truth is traced
here, in the trusted process, with the installed JAX)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from grader.feedback import CheckFailed
from grader.jaxcompat import jaxprs_in_params


def trace(source, name, specs):
    """``jax.make_jaxpr`` of the function ``name`` that ``source`` defines (with ``jax``,
    ``jnp`` and ``lax`` in scope), on arguments of the given [shape, dtype] ``specs``."""
    namespace = {"jax": jax, "jnp": jnp, "lax": lax}
    exec(compile(source, f"<{name}>", "exec"), namespace)
    return jax.make_jaxpr(namespace[name])(*[jax.ShapeDtypeStruct(tuple(s), d) for s, d in specs])


def first_holder(jaxpr):
    """The first equation of ``jaxpr`` that holds a sub-jaxpr (a call, scan, cond...)."""
    return next(e for e in jaxpr.eqns if any(True for _ in jaxprs_in_params(e.params)))


def expect_x64_off(got):
    """``got`` (from ``ex06_jaxpr:count_in_source``) was counted with jax_enable_x64 off, as the truth is."""
    if got.get("x64"):
        advice = "remove jax.config.update('jax_enable_x64', True) from your file"
        raise CheckFailed("your file turns on jax_enable_x64, which changes the jaxprs being counted",
                          measured="jax_enable_x64 = True", expected="the default, False", hint=advice,
                          diagnosis="your file turns on jax_enable_x64, which changes the jaxprs being counted",
                          advice=advice)

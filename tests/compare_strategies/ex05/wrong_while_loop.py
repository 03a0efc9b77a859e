# verdict: wrong
# strategy: lax.while_loop
# breaks: "Do not use `lax.while_loop`" / "`jax.grad` must work through it"
# idea: a copy of the while loop
# should-fail: matches_while_version, grad_works_and_matches_forward, uses_scan_not_while, no_python_unrolling
"""Exercise 5 submission (wrong_while_loop), written from the statement alone."""

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

TOL = 1e-3


def step(z, theta, x):
    return jnp.tanh(theta * z + x)


@jax.jit
def while_version(theta, x, max_steps):
    def keep_going(state):
        z, change, k = state
        return (k < max_steps) & (change >= TOL)

    def body(state):
        z, _, k = state
        z_new = step(z, theta, x)
        return z_new, jnp.max(jnp.abs(z_new - z)), k + 1

    start = (jnp.zeros_like(x), jnp.asarray(jnp.inf, dtype=x.dtype), jnp.asarray(0, dtype=jnp.int32))
    z, _, n_steps = lax.while_loop(keep_going, body, start)
    return z, n_steps


@partial(jax.jit, static_argnames="max_steps")
def scan_version(theta, x, max_steps):
    def cond(s):
        return (s[2] < max_steps) & (s[1] >= TOL)

    def body(s):
        z_new = step(s[0], theta, x)
        return z_new, jnp.max(jnp.abs(z_new - s[0])), s[2] + 1

    z, _, k = lax.while_loop(cond, body, (jnp.zeros_like(x), jnp.float32(jnp.inf), jnp.int32(0)))
    return z, k

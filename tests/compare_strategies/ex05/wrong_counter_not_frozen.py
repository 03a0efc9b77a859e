# verdict: wrong
# strategy: counter not frozen
# breaks: "Once `done` is true, later steps must not change `z` or the counter."
# idea: counts every scan step, so n_steps == max_steps
# should-fail: matches_while_version, uses_scan_not_while, no_python_unrolling
"""Exercise 5 submission (wrong_counter_not_frozen), written from the statement alone."""

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
    def body(carry, _):
        z, k, done = carry
        z_new = step(z, theta, x)
        converged = jnp.max(jnp.abs(z_new - z)) < TOL
        z = jnp.where(done, z, z_new)
        k = k + 1
        done = done | converged
        return (z, k, done), None

    start = (jnp.zeros_like(x), jnp.zeros((), jnp.int32), jnp.zeros((), bool))
    (z, k, _), _ = lax.scan(body, start, None, length=max_steps)
    return z, k

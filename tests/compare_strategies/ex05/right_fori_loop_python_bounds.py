# verdict: right
# strategy: fori_loop with Python-int bounds
# idea: fori_loop(0, max_steps) lowers to a scan; same masked body
"""Exercise 5 submission (right_fori_loop_python_bounds), written from the statement alone."""

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
    def body(i, carry):
        z, k, done = carry
        z_new = step(z, theta, x)
        small = jnp.max(jnp.abs(z_new - z)) < TOL
        return (jnp.where(done, z, z_new), jnp.where(done, k, k + 1), done | small)

    z, k, _ = lax.fori_loop(0, max_steps, body, (jnp.zeros_like(x), jnp.int32(0), jnp.bool_(False)))
    return z, k

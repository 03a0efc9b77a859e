# verdict: right
# strategy: scan over arange of step indices
# idea: xs = jnp.arange(max_steps); counter from the index at convergence
"""Exercise 5 submission (right_scan_xs_arange), written from the statement alone."""

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
    def body(carry, i):
        z, n, done = carry
        z_new = step(z, theta, x)
        conv = jnp.max(jnp.abs(z_new - z)) < TOL
        n = jnp.where(done, n, i + 1)          # steps taken so far, frozen once done
        z = jnp.where(done, z, z_new)
        return (z, n, done | conv), None

    init = (jnp.zeros_like(x), jnp.int32(0), jnp.bool_(False))
    (z, n, _), _ = lax.scan(body, init, jnp.arange(max_steps, dtype=jnp.int32))
    return z, n

# verdict: right
# strategy: scan mirroring the while state
# idea: carry (z, change, k) like while_version plus done = change < TOL; active steps counted with astype
"""Exercise 5 submission (right_scan_mirror_change), written from the statement alone."""

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
        z, change, k, done = carry
        active = jnp.logical_not(done)
        z_new = step(z, theta, x)
        new_change = jnp.max(jnp.abs(z_new - z))
        z = jnp.where(active, z_new, z)
        change = jnp.where(active, new_change, change)
        k = k + active.astype(jnp.int32)
        done = change < TOL
        return (z, change, k, done), None

    init = (jnp.zeros_like(x), jnp.asarray(jnp.inf, x.dtype), jnp.int32(0), jnp.asarray(False))
    (z, _, k, _), _ = lax.scan(body, init, xs=None, length=max_steps)
    return z, k

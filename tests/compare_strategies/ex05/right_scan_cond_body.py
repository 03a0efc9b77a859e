# verdict: right
# strategy: lax.cond inside the scan
# idea: the body branches with lax.cond on done: identity or one update
"""Exercise 5 submission (right_scan_cond_body), written from the statement alone."""

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
    def update(carry):
        z, k, _ = carry
        z_new = step(z, theta, x)
        return z_new, k + 1, jnp.max(jnp.abs(z_new - z)) < TOL

    def body(carry, _):
        return lax.cond(carry[2], lambda c: c, update, carry), None

    init = (jnp.zeros_like(x), jnp.array(0, jnp.int32), jnp.array(False))
    (z, k, _), _ = lax.scan(body, init, None, length=max_steps)
    return z, k

# verdict: wrong
# strategy: unmasked scan + history lookup
# breaks: "Carry `z`, a step counter and a `done` flag. Once `done` is true, later steps must not change `z` or the counter."
# idea: runs every step unmasked, keeps the z history and picks the converged entry (same numbers, not the stated design)
# should-fail: matches_while_version
"""Exercise 5 submission (wrong_history_index), written from the statement alone."""

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
    def body(z, _):
        z_new = step(z, theta, x)
        return z_new, (z_new, jnp.max(jnp.abs(z_new - z)))

    _, (zs, changes) = lax.scan(body, jnp.zeros_like(x), None, length=max_steps)
    small = changes < TOL
    n = jnp.where(jnp.any(small), jnp.argmax(small) + 1, max_steps).astype(jnp.int32)
    return zs[n - 1], n

# verdict: right
# strategy: scan with unroll=2
# idea: lax.scan(length=max_steps, unroll=2): still one scan of length max_steps
"""Exercise 5 submission (right_scan_unroll_param), written from the statement alone."""

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
        still = ~done
        z = jnp.where(still, z_new, z)
        k = jnp.where(still, k + 1, k)
        done = done | (jnp.max(jnp.abs(z_new - carry[0])) < TOL)
        return (z, k, done), None

    (z, k, _), _ = lax.scan(body, (jnp.zeros_like(x), jnp.int32(0), jnp.bool_(False)), None, length=max_steps, unroll=2)
    return z, k

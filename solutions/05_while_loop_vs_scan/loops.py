"""Reference solution for exercise 5 (while_loop vs scan)."""

from functools import partial

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
        z, n_steps, done = carry
        z_new = step(z, theta, x)
        change = jnp.max(jnp.abs(z_new - z))
        # A finished loop keeps its state: the update is computed but not applied.  Its
        # gradient still flows through the branch that `where` picks, so nothing is lost.
        z = jnp.where(done, z, z_new)
        n_steps = jnp.where(done, n_steps, n_steps + 1)
        # The update that brings the change below TOL is applied (as in while_version);
        # every later one is not.
        done = done | (change < TOL)
        return (z, n_steps, done), None

    start = (jnp.zeros_like(x), jnp.asarray(0, dtype=jnp.int32), jnp.asarray(False))
    (z, n_steps, _), _ = lax.scan(body, start, None, length=max_steps)
    return z, n_steps

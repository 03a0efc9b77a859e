"""Exercise 5 in another idiom (see the docstring of scan_version)."""

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
    """lax.fori_loop with Python-int bounds: JAX builds it from a scan of length max_steps."""

    def body(_, state):
        z, n_steps, done = state
        z_new = step(z, theta, x)
        finished = jnp.max(jnp.abs(z_new - z)) < TOL
        return (jnp.where(done, z, z_new), n_steps + jnp.where(done, 0, 1).astype(jnp.int32), done | finished)

    z, n_steps, _ = lax.fori_loop(0, max_steps, body,
                                  (jnp.zeros_like(x), jnp.zeros((), jnp.int32), jnp.zeros((), bool)))
    return z, n_steps

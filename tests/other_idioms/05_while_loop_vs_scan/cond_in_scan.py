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
    """A scan over the step indices whose body branches with lax.cond: once done, the
    identity branch runs (cond is differentiable in reverse mode too)."""

    def update(state):
        z, n_steps, _ = state
        z_new = step(z, theta, x)
        return z_new, n_steps + 1, jnp.max(jnp.abs(z_new - z)) < TOL

    def body(state, _index):
        return lax.cond(state[2], lambda s: s, update, state), None

    start = (jnp.zeros_like(x), jnp.int32(0), jnp.bool_(False))
    (z, n_steps, _), _ = lax.scan(body, start, jnp.arange(max_steps))
    return z, n_steps

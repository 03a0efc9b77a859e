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
    """while_version's own state (z, change, k) carried through a scan: a step happens only
    while the loop's condition would still hold, with lax.select keeping the old state."""

    def body(state, _):
        z, change, k = state
        go = change >= TOL  # k < max_steps always holds inside a scan of max_steps steps
        z_new = step(z, theta, x)
        new = (z_new, jnp.max(jnp.abs(z_new - z)), k + 1)
        return tuple(lax.select(go, n, o) for n, o in zip(new, state)), None

    start = (jnp.zeros_like(x), jnp.asarray(jnp.inf, dtype=x.dtype), jnp.asarray(0, dtype=jnp.int32))
    (z, _, n_steps), _ = lax.scan(body, start, None, length=max_steps)
    return z, n_steps

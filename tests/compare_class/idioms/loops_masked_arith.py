"""while_loop vs scan, written another way: the mask is arithmetic, the flag says "still running"."""

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
    def body(state, _):
        z, count, running = state
        z_next = step(z, theta, x)
        keep = running.astype(z.dtype)
        # blend instead of select: a stopped loop adds zero times the new value
        z_out = keep * z_next + (1.0 - keep) * z
        delta = jnp.max(jnp.abs(z_next - z))
        return (z_out, count + running.astype(jnp.int32), running & (delta >= TOL)), None

    init = (jnp.zeros_like(x), jnp.int32(0), jnp.bool_(True))
    (z, n, _), _ = lax.scan(body, init, xs=None, length=max_steps)
    return z, n

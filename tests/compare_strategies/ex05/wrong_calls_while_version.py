# verdict: wrong
# strategy: forward via while_version, custom_vjp via scan
# breaks: "do not call `while_version`"
# idea: values from while_version, gradient from a custom_vjp whose backward re-runs a masked scan
# should-fail: matches_while_version, uses_scan_not_while, no_python_unrolling
"""Exercise 5 submission (wrong_calls_while_version), written from the statement alone."""

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


def _scan_impl(theta, x, max_steps):
    def body(carry, _):
        z, k, done = carry
        z_new = step(z, theta, x)
        converged = jnp.max(jnp.abs(z_new - z)) < TOL
        return (jnp.where(done, z, z_new), jnp.where(done, k, k + 1), done | converged), None

    (z, k, _), _ = lax.scan(body, (jnp.zeros_like(x), jnp.int32(0), jnp.bool_(False)), None, length=max_steps)
    return z, k


@partial(jax.custom_vjp, nondiff_argnums=(2,))
def _solve(theta, x, max_steps):
    return while_version(theta, x, max_steps)


def _fwd(theta, x, max_steps):
    return while_version(theta, x, max_steps), (theta, x)


def _bwd(max_steps, res, ct):
    theta, x = res
    _, vjp = jax.vjp(lambda t, xx: _scan_impl(t, xx, max_steps)[0], theta, x)
    return vjp(ct[0])
_solve.defvjp(_fwd, _bwd)


@partial(jax.jit, static_argnames="max_steps")
def scan_version(theta, x, max_steps):
    return _solve(theta, x, max_steps)

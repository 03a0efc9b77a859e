"""Exercise 5: while_loop vs scan.

Read README.md in this folder first.  Fill in the TODO; keep the names and
signatures.  Check your work with:  grade exercise 5

The iteration
-------------
For a scalar parameter ``theta`` and an input vector ``x`` we look for the
equilibrium ``z* = tanh(theta * z* + x)`` by repeating ``z <- tanh(theta * z + x)``
from ``z = 0``, and stop as soon as one update moves no entry of ``z`` by ``TOL``
or more (or after ``max_steps`` updates, whichever comes first).  How many updates
that takes depends on ``theta`` and ``x``.

``while_version`` below does this with ``lax.while_loop``.  It runs forward, and
forward-mode AD (``jax.jvp`` / ``jax.jacfwd``) goes through it, but ``jax.grad``
raises: reverse mode cannot go through a loop whose trip count is only known at
run time.  Your job is ``scan_version``: the same computation, written so that
``jax.grad`` works.
"""

from functools import partial

import jax
import jax.numpy as jnp
from jax import lax

TOL = 1e-3  # stop once an update changes every entry of z by less than this


def step(z, theta, x):
    """One update of the iteration. Do not change: the grader uses the same formula."""
    return jnp.tanh(theta * z + x)


@jax.jit
def while_version(theta, x, max_steps):
    """The iteration with a data-dependent stop (provided; do not change).

    theta: f32[] , x: f32[n], max_steps: int  ->  (z: f32[n], n_steps: i32[])
    n_steps is how many updates were applied (the last one, whose change fell
    below TOL, counts).
    """

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
    """The same result as ``while_version(theta, x, max_steps)``, differentiable by ``jax.grad``.

    theta: f32[], x: f32[n], max_steps: a Python int  ->  (z: f32[n], n_steps: i32[])

    ``max_steps`` is static (a Python int known while tracing), because the length of
    a ``lax.scan`` must be.  Calling it with a different ``max_steps`` compiles again.

    TODO:
      * run exactly ``max_steps`` iterations with ``lax.scan`` (``length=max_steps``; no
        Python loop over the steps, no ``lax.while_loop``, no call of ``while_version``);
      * carry, besides ``z``, a step counter and a "done" flag;
      * once the stopping condition of ``while_version`` has held, FREEZE the state:
        further iterations must leave ``z`` and the counter unchanged (``jnp.where``);
      * return ``(z, n_steps)`` exactly as ``while_version`` does.
    """
    raise NotImplementedError("TODO: scan_version")

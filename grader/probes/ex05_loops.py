"""Probes for exercise 5 (while_loop vs scan): reverse-mode gradients, measured in the sandbox.

``grad_of_weighted_output(ctx, target, theta, x, weights, max_steps)``
    Runs ``jax.grad`` (reverse mode) on ``L(theta, x) = sum(weights * target(theta, x,
    max_steps)[0])`` with respect to both ``theta`` and ``x``; ``max_steps`` stays a Python
    int.  Returns ``{"grad_theta": array, "grad_x": array}`` or, when ``jax.grad`` (or the
    learner's function under it) raised, ``{"error": "<ExceptionType>: <first line>"}``.
    A ``NotImplementedError`` is not caught, so the stub is reported as not implemented.
    The gradient function is jitted and kept per (function, max_steps), so repeated calls
    with one shape compile once.
    It measures only: the trusted check compares the numbers with forward-mode derivatives
    of its own copy of the while-loop iteration.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from grader.sandbox.context import to_jax

# Bound at import time (probe modules load before the learner's module does).
_grad = jax.grad
_jit = jax.jit
_vdot = jnp.vdot
_asarray = jnp.asarray
_block = jax.block_until_ready


def _first_line(exc: BaseException, limit: int = 400) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:limit] if text else ''}".rstrip(": ")


_GRADS: dict = {}


def grad_of_weighted_output(ctx, target: str, theta, x, weights, max_steps: int) -> dict:
    fn = ctx.function(target)
    key = (target, id(fn), int(max_steps))
    if key not in _GRADS:
        def loss(th, xx, w):
            out = fn(th, xx, max_steps)
            z = out[0] if isinstance(out, (tuple, list)) else out
            return _vdot(w, z)

        _GRADS[key] = (fn, _jit(_grad(loss, argnums=(0, 1))))  # fn kept alive so its id stays unique
    grad_fn = _GRADS[key][1]
    try:
        g_theta, g_x = _block(grad_fn(to_jax(theta), to_jax(x), _asarray(to_jax(weights))))
    except NotImplementedError:
        raise
    except Exception as exc:  # measured, not judged: the trusted check turns this into feedback
        return {"error": _first_line(exc)}
    return {"grad_theta": g_theta, "grad_x": g_x}

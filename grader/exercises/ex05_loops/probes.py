"""Probes for exercise 5 (while_loop vs scan): reverse-mode gradients, measured in the sandbox.

``grad_of_weighted_output(ctx, target, theta, x, weights, max_steps)``
    Runs ``jax.grad`` (reverse mode) on ``L(theta, x) = sum(weights * target(theta, x,
    max_steps)[0])`` with respect to both ``theta`` and ``x``; ``max_steps`` stays a Python
    int.  Returns ``{"grad_theta": array, "grad_x": array}`` or, when ``jax.grad`` (or the
    learner's function under it) raised, ``{"error": "<ExceptionType>: <first line>"}``.
    A ``NotImplementedError`` is not caught, so the stub is reported as not implemented.
    The gradient function is jitted and kept per (function, max_steps), so repeated calls
    with one shape compile once.
    ``"primitives"`` holds the primitive counts (nested jaxprs included) of the jaxpr of that
    gradient computation, so the trusted side can see a while loop hidden behind a
    ``custom_vjp`` (whose forward and backward rules are traced into it).
    It measures only: the trusted check compares the numbers with forward-mode derivatives
    of its own copy of the while-loop iteration.

``loop_structure(ctx, target, theta, x, max_steps)``
    ``target(theta, x, max_steps)`` traced once under our own ``jax.jit`` with ``max_steps``
    closed over as a Python int (``grader.probes.generic.traced_run``): that jaxpr's primitive
    counts and equation count, nested jaxprs included, the ``length`` of every ``scan`` in it,
    and ``"outputs"``, the ``(z, n_steps)`` that very program computed (``"error"`` instead
    when tracing or running it failed).  The trusted side compares those outputs with the
    while loop's before it reads the structure, so the structure judged is that of the
    program that computes the answer -- not of one the function shows only to tracers.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from grader import ir
from grader.jaxcompat import SCAN_PRIMITIVE
from grader.sandbox.context import to_jax
from grader.probes.errors import first_line as _first_line
from grader.probes.generic import traced_run

# Bound at import time (probe modules load before the learner's module does).
_grad = jax.grad
_jit = jax.jit
_make_jaxpr = jax.make_jaxpr
_vdot = jnp.vdot
_asarray = jnp.asarray
_block = jax.block_until_ready


def grad_of_weighted_output(ctx, target: str, theta, x, weights, max_steps: int) -> dict:
    fn = ctx.function(target)

    def loss(th, xx, w):
        out = fn(th, xx, max_steps)
        z = out[0] if isinstance(out, (tuple, list)) else out
        return _vdot(w, z)

    # made afresh for each request: a jitted wrapper kept in this module between requests could be
    # swapped for another by learner code (this module is reachable from it through the class graph)
    grad_fn = _jit(_grad(loss, argnums=(0, 1)))
    args = (to_jax(theta), to_jax(x), _asarray(to_jax(weights)))
    try:
        g_theta, g_x = _block(grad_fn(*args))
        primitives = ir.primitive_counts(_make_jaxpr(grad_fn)(*args))
    except NotImplementedError:
        raise
    except Exception as exc:  # measured, not judged: the trusted check turns this into feedback
        return {"error": _first_line(exc)}
    return {"grad_theta": g_theta, "grad_x": g_x, "primitives": primitives}


#: the iteration's own work, z = tanh(theta * z + x): a scan whose body holds none of it does not iterate
STEP_PRIMITIVES = ("tanh", "exp", "logistic")


def loop_structure(ctx, target: str, theta, x, max_steps: int) -> dict:
    fn = ctx.function(target)
    steps = int(max_steps)

    def with_steps(th, xx):  # max_steps stays a Python int: closed over, never traced
        return fn(th, xx, steps)

    run = traced_run(with_steps, *to_jax([theta, x]))
    out: dict = {"primitives": {}, "total_eqns": 0, "scan_lengths": []}
    if run.jaxpr is not None:
        closed = run.jaxpr
        scans = [e for e in ir.walk_equations(closed) if ir.primitive_name(e.primitive) == SCAN_PRIMITIVE]
        # the scans that do the step's work: their body (nested jaxprs included) holds its tanh
        working = [int(e.params.get("length", -1)) for e in scans
                   if any(ir.primitive_name(q.primitive) in STEP_PRIMITIVES for q in ir.walk_equations(e.params["jaxpr"]))]
        out.update(primitives=ir.primitive_counts(closed), total_eqns=sum(1 for _ in ir.walk_equations(closed)),
                   scan_lengths=[int(e.params.get("length", -1)) for e in scans][:100], work_scan_lengths=working[:100])
    if run.error is not None:
        out["error"] = _first_line(run.error)
    else:
        out["outputs"] = run.outputs
    return out


# --- trusted references, run in the clean worker (manifest clean_worker = true) -----------

TOL = 1e-3  # the stub's stopping tolerance


def _trusted_while(theta, x, max_steps):
    """The grader's own copy of the stub's ``while_version``."""

    def keep_going(state):
        z, change, k = state
        return (k < max_steps) & (change >= TOL)

    def body(state):
        z, _, k = state
        z_new = jnp.tanh(theta * z + x)
        return z_new, jnp.max(jnp.abs(z_new - z)), k + 1

    start = (jnp.zeros_like(x), jnp.asarray(jnp.inf, dtype=x.dtype), jnp.asarray(0, dtype=jnp.int32))
    z, _, n_steps = jax.lax.while_loop(keep_going, body, start)
    return z, n_steps


_while_jit = _jit(_trusted_while)
_forward = {}


def while_reference(ctx, theta, x, max_steps) -> dict:
    """``{"z": f32[n], "n_steps": int}`` from the grader's while loop (no learner code here)."""
    z, k = _while_jit(*to_jax([theta, x]), max_steps)
    return {"z": z, "n_steps": int(k)}


def forward_derivatives(ctx, theta, x, max_steps) -> dict:
    """Forward mode through ``lax.while_loop``: ``jax.jacfwd`` of the grader's loop's ``z``
    with respect to ``theta`` and ``x`` (reverse mode cannot go through it)."""
    if max_steps not in _forward:
        _forward[max_steps] = _jit(jax.jacfwd(lambda t, v: _trusted_while(t, v, max_steps)[0], argnums=(0, 1)))
    j_theta, j_x = _forward[max_steps](*to_jax([theta, x]))
    return {"j_theta": j_theta, "j_x": j_x}

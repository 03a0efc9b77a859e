"""Probes for exercise 14 (control flow under jit), run in the sandbox beside the learner's code,
and one run in the clean worker.  Each returns plain data; the verdicts are the tests'.

``switch_values(ctx, indices, x)``
    ``apply_branch(i, x)`` for each Python int ``i``.
``switch_structure(ctx, x)``
    ``apply_branch(1, x)`` traced once under our own ``jax.jit`` with the index a tracer
    (``grader.probes.generic.traced_run``): the number of branches of every ``cond`` in that
    jaxpr, and the primitives that run *outside* any ``cond`` branch (at every depth, nested
    ``jit`` included), so a program that computes every branch and selects shows its ``sin``
    there; and ``"outputs"``, what that very program computed (``"error"`` instead when
    tracing or running it failed), which the trusted side compares with wave(x) before it
    reads the structure -- a function that shows tracers a switch and computes otherwise on
    concrete values is judged by the program it traced.
    ``"branches"``: for each branch of each ``cond``, the primitives it runs itself, so a switch
    whose every branch computes every function and then selects shows ``sin`` in each.
``piecewise_structure(ctx, x)``
    the same for ``piecewise(x)``: its ``cond``'s branches must hold positive_branch's ``sin``
    and negative_branch's ``sqrt`` apart, and nothing of either may run outside them.
``piecewise_values(ctx, xs)`` / ``safe_sqrt_values(ctx, x)``
    the value and gradient of the learner's function (``piecewise(x)`` as the learner jitted
    it, ``safe_sqrt`` under our ``jax.jit``; the gradient is ``jax.grad`` of ``sum(f(x))`` under
    our ``jax.jit``); an error is recorded as its first line.
``truth_answers(ctx, keys)`` (clean worker)
    the answers to the statement's questions (those in ``keys``, or all), measured on the
    installed JAX, each once per worker.

JAX entry points are bound at import, before the learner's module loads.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from grader import ir, jaxcompat
from grader.probes.errors import first_line_or_unimplemented as _first_line
from grader.probes.generic import traced_run

_jit = jax.jit
_grad = jax.grad
_device_put = jax.device_put
_block = jax.block_until_ready
_sum = jnp.sum
_where = jnp.where
_sqrt = jnp.sqrt
_sin = jnp.sin
_cond = jax.lax.cond
_switch = jax.lax.switch
_asarray = np.asarray
_isfinite = np.isfinite
_jaxprs_in_params = jaxcompat.jaxprs_in_params


def switch_values(ctx, indices: list, x) -> list:
    fn = ctx.function("apply_branch")
    x = _device_put(x)
    return [_asarray(_block(fn(int(i), x))) for i in indices]


def _inner(jaxpr):
    return getattr(jaxpr, "jaxpr", jaxpr)


def switch_structure(ctx, x) -> dict:
    """``apply_branch(1, x)`` traced: ``_branch_structure`` of its program."""
    return _branch_structure(ctx.function("apply_branch"), _device_put(np.int32(1)), _device_put(x))


def piecewise_structure(ctx, x) -> dict:
    """``piecewise(x)`` traced: ``_branch_structure`` of its program."""
    return _branch_structure(ctx.function("piecewise"), _device_put(x))


def _branch_structure(fn, *args) -> dict:
    """``fn(*args)`` traced once (``traced_run``): ``"conds"``, each ``cond``'s number of branches;
    ``"outside"``, the primitives that run outside every ``cond`` branch (at every depth, nested
    ``jit`` included); ``"branches"``, for each branch of each ``cond`` (nested ones too), the
    primitives it runs itself -- those of a ``cond`` nested in it belong to that cond's branches --
    so a switch whose every branch computes every function and selects shows ``sin`` in each; and
    ``"work_outside"``, what the program computes from ``x`` outside every ``cond`` beyond choosing
    the branch (``ir.work_outside_control_flow``: a branch computed by any primitives and picked
    with ``jnp.where`` shows there); and ``"outputs"`` (or ``"error"``), what that very program
    computed."""
    run = traced_run(fn, *args)
    conds, outside, branches = [], {}, []
    out: dict = {"conds": conds, "outside": outside, "branches": branches}
    if run.error is not None:
        out["error"] = _first_line(run.error)
    else:
        out["outputs"] = _asarray(run.outputs)
    if run.jaxpr is not None:  # x is the last argument: what is computed from it on every path
        out["work_outside"] = ir.work_outside_control_flow(run.jaxpr, (len(args) - 1,))
    # (jaxpr, the branch it belongs to: None outside every cond)
    stack = [(_inner(run.jaxpr), None)] if run.jaxpr is not None else []
    while stack:
        jaxpr, owner = stack.pop()
        for eqn in jaxpr.eqns:
            name = ir.primitive_name(eqn.primitive)
            if name == "cond":
                conds.append(len(eqn.params.get("branches", ())))
                for sub in eqn.params.get("branches", ()):  # what a branch does runs only when it is chosen
                    branches.append({})
                    stack.append((_inner(sub), len(branches) - 1))
                continue
            seen = outside if owner is None else branches[owner]
            seen[name] = seen.get(name, 0) + 1
            stack.extend((_inner(sub), owner) for sub in _jaxprs_in_params(eqn.params))
    return out


def _grad_of_sum(grad_of):
    """``jax.grad`` of ``sum(grad_of(x))`` under our ``jax.jit``, made afresh for each request: a
    wrapper kept in this module between requests could be swapped for another by learner code
    (the module is reachable from it through the class graph)."""
    return _jit(_grad(lambda v: _sum(grad_of(v))))


def _value_and_grad(f, x, grad_fn) -> dict:
    """``f(x)``, and ``grad_fn(x)`` (``_grad_of_sum`` of the learner's function)."""
    out = {}
    try:
        out["value"] = _asarray(_block(f(x)))
    except Exception as exc:  # noqa: BLE001 - measured, not judged
        out["value_error"] = _first_line(exc)
    try:
        out["grad"] = _asarray(_block(grad_fn(x)))
    except Exception as exc:  # noqa: BLE001
        out["grad_error"] = _first_line(exc)
    return out


def piecewise_values(ctx, xs: list) -> list:
    fn = ctx.function("piecewise")
    grad_fn = _grad_of_sum(fn)  # one compile per shape for every x of this request
    return [_value_and_grad(fn, _device_put(x), grad_fn) for x in xs]


def safe_sqrt_values(ctx, x) -> dict:
    fn = ctx.function("safe_sqrt")
    return _value_and_grad(_jit(fn), _device_put(x), _grad_of_sum(fn))


# --- the truth about the questions, in the clean worker ----------------------------------------------

_TRUTH: dict = {}


def truth_answers(ctx, keys: list | None = None) -> dict:
    """What the installed JAX does about the statement's questions (``keys``: only those; all by
    default); each measured once per clean worker."""
    wanted = list(keys) if keys else list(_MEASURES)
    for key in wanted:
        if key not in _TRUTH:
            _TRUTH.update(_MEASURES[key]())
    return {key: _TRUTH[key] for key in wanted}


def _cond_branches_traced() -> dict:
    traced: list[str] = []

    def left(v):
        traced.append("left")
        return v + 1.0

    def right(v):
        traced.append("right")
        return v - 1.0

    _block(_jit(lambda v: _cond(_sum(v) > 0, left, right, v))(jnp.ones(3)))
    return {"cond_branches_traced": len(set(traced))}


def _switch_out_of_range() -> dict:
    branches = (lambda v: v * 0.0, lambda v: v * 0.0 + 1.0, lambda v: v * 0.0 + 2.0)
    low, high = _block(_jit(lambda i, j, v: (_switch(i, branches, v), _switch(j, branches, v)))(-1, 5, jnp.zeros(())))
    return {"switch_index_minus_1": int(round(float(low))), "switch_index_5": int(round(float(high)))}


def _with_if(v):
    if v.sum() > 0:
        return v * 2.0
    return -v


def _jit_if_error() -> dict:
    try:
        _jit(_with_if)(jnp.ones(3))
        return {"jit_if_error": ""}
    except Exception as exc:  # noqa: BLE001 - the answer is the class of what was raised
        return {"jit_if_error": type(exc).__name__}


def _grad_if_raises() -> dict:
    try:
        _grad(lambda v: _sum(_with_if(v)))(jnp.ones(3))  # plain grad, no jit: that is the question
        return {"grad_if_raises": False}
    except Exception:  # noqa: BLE001
        return {"grad_if_raises": True}


def _where_grad_finite() -> dict:
    def with_where(v):
        s = _sum(v)
        return _where(s > 0, _sum(_sin(v) * v), _sqrt(-s))

    grad = _asarray(_jit(_grad(with_where))(jnp.asarray([0.5, 1.0, -0.25], jnp.float32)))
    return {"where_grad_finite": bool(_isfinite(grad).all())}


#: Each question of the statement, in its order, and how its answer is measured.
_MEASURES = {"cond_branches_traced": _cond_branches_traced, "switch_index_minus_1": _switch_out_of_range,
             "switch_index_5": _switch_out_of_range, "jit_if_error": _jit_if_error,
             "grad_if_raises": _grad_if_raises, "where_grad_finite": _where_grad_finite}

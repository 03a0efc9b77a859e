"""Probes for exercise 16 (forward and reverse mode, custom derivatives), run in the sandbox beside
the learner's code, and one run in the clean worker.  Each returns plain data; the verdicts are
the tests'.

The functions handed to the learner's ``hvp`` and ``jacobian`` are the grader's own, made here
by ``build`` from a name and plain parameters (``functions.py`` lists them with their exact
derivatives).

``hvp_values(ctx, cases)``
    ``jax.jit(lambda x, v: hvp(f, x, v))`` on each case.
``hvp_program(ctx, name, params, x, v)``
    ``hvp(f, x, v)`` at a large size, traced once under our own ``jax.jit`` and run: the largest
    value in its jaxpr, the operations it does (loops by their trip counts), the primitives
    whose work that count cannot see, and what the program computed.
``jacobian_values(ctx, cases)``
    ``jax.jit(lambda x: jacobian(f, x))`` on each case; and, from one trace of it, the flops XLA's
    cost analysis counts for the compiled program (a loop's body once), the operations the
    jaxpr does (loops by their trip counts), what that compiled program computes, and the host
    callbacks and while loops in it (their work is invisible to both counts).
``clip_values(ctx, cases)``
    ``clip_gradient(lo, hi, x)``, and ``jax.grad`` of ``sum(w * clip_gradient(lo, hi, x))`` in
    ``x``, called as they are (no jit); ``lo`` and ``hi`` are Python floats.
``clip_composed(ctx, lo, hi, xs, ws)``
    ``jax.jit(jax.vmap(jax.grad(...)))`` of the same per example, and whether the jaxpr of
    ``clip_gradient`` holds a ``custom_vjp_call``: that jaxpr is the one of ``clip_gradient(lo,
    hi, xs[0])`` traced once under our own ``jax.jit`` (``lo``, ``hi`` closed over as Python
    floats; ``grader.probes.generic.traced_run``), returned with ``"forward"``, what that very
    program computed, so the trusted side accepts the ``custom_vjp_call`` only from a program
    that computes clip_gradient's forward (x itself).
``softmax_values(ctx, cases)``
    ``jax.vjp(softmax, x)`` called as it is: the output, the cotangent ``g`` pulled back, and the
    leaves of the VJP function (what reverse mode keeps for the backward pass); the output under
    ``jax.jit``; and whether the jaxpr of ``softmax(x)``, traced once under our own ``jax.jit``
    (``traced_run``), holds a ``custom_vjp_call``, with ``"traced"``, what that very program
    computed (as for clip_gradient).

In the clean worker (no learner code): ``truth_jacobian_flops(ctx, cases)``, what
``jax.jacfwd(f)`` and ``jax.jacrev(f)`` cost, each jitted, on the installed JAX and XLA (flops and
operations counted in their jaxprs); ``truth_hvp_work(ctx, name, params, n)``, the operations
the reference hvp (forward over reverse) does.

An error of the learner's code is recorded as its first line (a ``NotImplementedError``
propagates, so the check says "not implemented").  JAX entry points are bound at import,
before the learner's module loads.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import stages as _stages

from grader import ir, jaxcompat
from grader.compiles import OPAQUE_PRIMITIVES
from grader.probes.errors import first_line_or_unimplemented as _first_line
from grader.probes import module_state
from grader.probes.generic import traced_run
from grader.traced_work import HOST_CALLBACK_PRIMITIVES

_snapshot = module_state.snapshot
_changed = module_state.changed
_jit = jax.jit
_grad = jax.grad
_vjp = jax.vjp
_vmap = jax.vmap
_jacfwd = jax.jacfwd
_jacrev = jax.jacrev
_jvp = jax.jvp
_make_jaxpr = jax.make_jaxpr
_device_put = jax.device_put
_block = jax.block_until_ready
_leaves = jax.tree.leaves
_logsumexp = jax.nn.logsumexp
_Array = jax.Array
_sum = jnp.sum
_dot = jnp.dot
_sin = jnp.sin
_tanh = jnp.tanh
_compile = _stages.Lowered.compile
_cost_analysis = _stages.Compiled.cost_analysis
_asarray = np.asarray
_CUSTOM_VJP = jaxcompat.CUSTOM_VJP_PRIMITIVES
_CUSTOM_LIN = jaxcompat.CUSTOM_LIN_PRIMITIVE
MAX_LEAVES = 16


def build(name: str, params: dict):
    """The grader's function ``name`` (``functions.py``) with ``params`` as constants."""
    p = {k: _device_put(np.asarray(v, np.float32)) for k, v in params.items()}
    if name == "quartic":
        return lambda x: 0.25 * _sum(x ** 4) + 0.5 * _dot(p["a"], x) ** 2
    if name == "sine":
        return lambda x: _sum(p["c"] * _sin(x))
    if name == "logsumexp":
        return lambda x: _logsumexp(p["A"] @ x)
    if name == "tanh_layer":
        return lambda x: _tanh(p["W"] @ x + p["b"])
    if name == "sin_mix":
        return lambda x: p["s"] * (p["W"] @ _sin(x))
    raise ValueError(f"unknown function {name!r}")


def _array(value) -> dict:
    if isinstance(value, _Array) or isinstance(value, np.ndarray):
        return {"out": _asarray(value)}
    return {"error": f"returned a {type(value).__module__}.{type(value).__qualname__}, not an array"}


def _attempt(fn, *args) -> dict:
    try:
        return _array(_block(fn(*args)))
    except Exception as exc:  # noqa: BLE001 - measured, not judged
        return {"error": _first_line(exc)}


# --- part A: hvp ------------------------------------------------------------------------------------

def hvp_values(ctx, cases: list) -> list:
    fn = ctx.function("hvp")
    out = []
    for c in cases:
        f = build(c["name"], c["params"])
        out.append(_attempt(_jit(lambda x, v, f=f: fn(f, x, v)), _device_put(c["x"]), _device_put(c["v"])))
    return out


def hvp_program(ctx, name: str, params: dict, x, v) -> dict:
    """``hvp(f, x, v)`` traced once under our own ``jax.jit`` and run (``traced_run``): the
    largest value in its jaxpr (``ir.largest_value``: ``elements``, ``aval``, ``avals``), the
    operations it does with loops counted by their trip counts (``work``,
    ``ir.live_work``), the primitives whose work that count cannot see
    (``uncounted``: host callbacks, while loops, kernels), and ``out``, what that very program
    computed (or ``run_error``)."""
    fn = ctx.function("hvp")
    f = build(name, params)
    run = traced_run(lambda x, v: fn(f, x, v), _device_put(x), _device_put(v))
    if run.jaxpr is None:
        return {"error": _first_line(run.error)}
    try:
        facts = ir.largest_value(run.jaxpr)
        facts["work"] = ir.live_work(run.jaxpr)
        facts["uncounted"] = _uncounted(ir.primitive_counts(run.jaxpr))
    except Exception as exc:  # noqa: BLE001 - a primitive of the learner's (ir.ForeignPrimitive)
        return {"error": _first_line(exc)}
    if run.error is not None:
        facts["run_error"] = _first_line(run.error)
    else:
        facts["out"] = _array(run.outputs)
    return facts


def truth_hvp_work(ctx, name: str, params: dict, n: int) -> int:
    """The operations the reference hvp, ``jax.jvp(jax.grad(f), (x,), (v,))[1]``, does at size
    ``n`` (``ir.live_work``): a few gradients' worth."""
    f = build(name, params)
    zeros = _device_put(np.zeros(int(n), np.float32))
    return ir.live_work(_make_jaxpr(lambda x, v: _jvp(_grad(f), (x,), (v,))[1])(zeros, zeros))


def _uncounted(counts: dict) -> dict:
    """The primitives of a program whose work a count of its jaxpr cannot see: host callbacks and
    opaque calls (their work is not in the program), while loops (their trip count is not) and
    Pallas kernels (their grid is not counted)."""
    names = sorted(OPAQUE_PRIMITIVES | set(HOST_CALLBACK_PRIMITIVES) |
                   {jaxcompat.WHILE_PRIMITIVE, jaxcompat.PALLAS_CALL_PRIMITIVE})
    return {p: counts[p] for p in names if counts.get(p)}


# --- part B: jacobian -------------------------------------------------------------------------------

def _cost(jitted, x) -> dict:
    compiled = _compile(jitted.lower(x))
    return {"flops": _flops(compiled)}


def _flops(compiled) -> float:
    cost = _cost_analysis(compiled)
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    return float(cost.get("flops", 0.0))


def _measured_program(fn, x) -> dict:
    """``fn`` traced once under our own ``jax.jit``: from that one trace, the primitives of its
    jaxpr, the operations it does with loops counted by their trip counts (``work``), XLA's
    flops for its compiled program (``flops``: XLA counts a loop's body once), and ``program``,
    what that compiled program computes on ``x`` -- so the cost judged is that of a program that
    computes the Jacobian.  The program's objects must be the same after compiling as before
    (``ir.identity``, as ``traced_run`` asks)."""
    traced = _jit(fn).trace(x)
    jaxpr = traced.jaxpr
    before = ir.identity(jaxpr)
    counts = ir.primitive_counts(jaxpr)
    res = {"opaque": sorted(p for p in counts if p in OPAQUE_PRIMITIVES),
           "while_loops": counts.get(jaxcompat.WHILE_PRIMITIVE, 0),  # XLA counts one trip of a loop it cannot bound
           "uncounted": _uncounted(counts), "work": ir.live_work(jaxpr)}
    compiled = _compile(traced.lower())
    res["flops"] = _flops(compiled)
    res["program"] = _attempt(compiled, x)
    if traced.jaxpr is not jaxpr or ir.identity(jaxpr) != before:
        res["program"] = {"error": "the traced program was rewritten in place while JAX compiled it"}
    return res


def jacobian_values(ctx, cases: list) -> list:
    fn = ctx.function("jacobian")
    out = []
    for c in cases:
        f = build(c["name"], c["params"])
        x = _device_put(c["x"])
        res = _attempt(_jit(lambda x, f=f: fn(f, x)), x)
        if "out" in res:
            try:
                res.update(_measured_program(lambda x, f=f: fn(f, x), x))
            except Exception as exc:  # noqa: BLE001
                res["cost_error"] = _first_line(exc)
        out.append(res)
    return out


def truth_jacobian_flops(ctx, cases: list) -> list:
    """XLA's flops for ``jax.jit(jax.jacfwd(f))`` and ``jax.jit(jax.jacrev(f))`` on each case, and
    the operations each does (``jacfwd_work``, ``jacrev_work``: ``ir.live_work``)."""
    out = []
    for c in cases:
        f, x = build(c["name"], c["params"]), _device_put(c["x"])
        out.append({"jacfwd": _cost(_jit(_jacfwd(f)), x)["flops"], "jacrev": _cost(_jit(_jacrev(f)), x)["flops"],
                    "jacfwd_work": ir.live_work(_make_jaxpr(_jacfwd(f))(x)),
                    "jacrev_work": ir.live_work(_make_jaxpr(_jacrev(f))(x))})
    return out


# --- part C: clip_gradient --------------------------------------------------------------------------

def _clip_loss(fn, lo: float, hi: float):
    return lambda x, w: _sum(w * fn(lo, hi, x))


def clip_values(ctx, cases: list) -> list:
    fn = ctx.function("clip_gradient")
    out = []
    for c in cases:
        lo, hi = float(c["lo"]), float(c["hi"])
        x, w = _device_put(c["x"]), _device_put(c["w"])
        out.append({"forward": _attempt(fn, lo, hi, x), "grad": _attempt(_grad(_clip_loss(fn, lo, hi)), x, w)})
    return out


def clip_composed(ctx, lo: float, hi: float, xs, ws) -> dict:
    fn = ctx.function("clip_gradient")
    lo, hi = float(lo), float(hi)
    xs, ws = _device_put(xs), _device_put(ws)
    res = {"grads": _attempt(_jit(_vmap(_grad(_clip_loss(fn, lo, hi)))), xs, ws)}
    run = traced_run(lambda x: fn(lo, hi, x), xs[0])  # lo, hi stay Python floats: closed over, never traced
    if run.jaxpr is not None:
        counts = ir.primitive_counts(run.jaxpr)
        res["custom_vjp"] = any(counts.get(p, 0) for p in _CUSTOM_VJP)
    if run.error is not None:
        res["jaxpr_error"] = _first_line(run.error)
    else:
        res["forward"] = _array(run.outputs)
    return res


# --- part D: softmax --------------------------------------------------------------------------------

def softmax_values(ctx, cases: list) -> list:
    """Each case's value, VJP and residuals; and, on every case, what the calls changed of the
    state the module reaches (``module_state``): a residual kept there is a residual too."""
    fn = ctx.function("softmax")
    out = []
    before = _snapshot(ctx.module)
    for c in cases:
        x, g = _device_put(c["x"]), _device_put(c["g"])
        res: dict = {}
        try:
            y, pullback = _vjp(fn, x)
            res["y"] = _array(_block(y))
            res.update(_rule_bypass(pullback))
            ct = pullback(g)
            res["ct"] = _array(_block(ct[0] if isinstance(ct, tuple) and len(ct) == 1 else ct))
            leaves = _leaves(pullback)
            res["residuals"] = [_asarray(leaf) if isinstance(leaf, _Array) else
                                {"type": f"{type(leaf).__module__}.{type(leaf).__qualname__}"}
                                for leaf in leaves[:MAX_LEAVES]]
            res["residual_count"] = len(leaves)
        except Exception as exc:  # noqa: BLE001
            res["error"] = _first_line(exc)
        res["jit"] = _attempt(_jit(fn), x)
        res.update(_custom_vjp_facts(fn, x))
        out.append(res)
    changed = _changed(before, _snapshot(ctx.module))[:20]
    for res in out:
        res["state_changed"] = changed
    return out


def _rule_bypass(pullback) -> dict:
    """Whether the derivative that pull-back gives goes through a ``jax.custom_vjp`` rule alone:
    the primitives of its linear program through which the output's tangent depends on the
    input's without passing a rule (``bypass``; empty when it goes through rules only), read
    before the pull-back runs any of the learner's code."""
    try:
        linear = jaxcompat.vjp_linear_jaxpr(pullback)
        if linear is None:
            return {"bypass_error": "the pull-back's linear program could not be read on this JAX"}
        return {"bypass": ir.bypassing(linear, _CUSTOM_LIN)[:20]}
    except Exception as exc:  # noqa: BLE001 - a primitive of the learner's (ir.ForeignPrimitive)
        return {"bypass_error": _first_line(exc)}


def _custom_vjp_facts(fn, x) -> dict:
    """Whether ``fn``'s program, traced once under our own ``jax.jit``, holds a ``custom_vjp_call``
    (``custom_vjp``), and what that very program computed (``traced``), or why it could not be
    traced (``jaxpr_error``)."""
    run = traced_run(fn, x)
    res: dict = {}
    if run.jaxpr is not None:
        try:
            counts = ir.primitive_counts(run.jaxpr)
            res["custom_vjp"] = any(counts.get(p, 0) for p in _CUSTOM_VJP)
        except Exception as exc:  # noqa: BLE001 - a primitive of the learner's (ir.ForeignPrimitive)
            return {"jaxpr_error": _first_line(exc)}
    if run.error is not None:
        res["jaxpr_error"] = _first_line(run.error)
    else:
        res["traced"] = _array(run.outputs)
    return res

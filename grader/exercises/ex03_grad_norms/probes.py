"""Probes for exercise 3 (per-example gradient norms): whether the parameters are mapped.

``params_copied(ctx, target, args)``
    ``target(*args)`` (``args`` = ``[params, xs, ys]``) traced once under our own ``jax.jit``
    (``grader.probes.generic.traced_run``), and how many of that jaxpr's equations make, from
    the parameters alone, a copy of a parameter leaf per example (a new leading axis of the
    batch's size): what ``jnp.broadcast_to(p, (B,) + p.shape)`` before a ``vmap`` with
    ``in_axes=0`` does, however it is spelled.
    The parameters are followed into nested jaxprs (the learner's jit, custom rules) by
    position; ``vmap`` with ``in_axes=(None, 0, 0)`` never copies them.  Returns ``{"copies":
    n, "leaves": number of parameter leaves, "outputs": the norms that very program computed}``
    (``"error"`` instead of ``"outputs"`` when a stage failed): the trusted side checks those
    numbers, so the structure judged is that of a program that computes the norms -- not of
    one the function shows only when it sees tracers.  It measures only.
"""

from __future__ import annotations

import jax

from grader import ir, jaxcompat
from grader.probes.errors import first_line
from grader.probes.generic import traced_run
from grader.sandbox.context import to_jax

# Bound at import time (probe modules load before the learner's module does).
_leaves = jax.tree.leaves
_Literal = jaxcompat.literal_class()


def _size(var) -> int:
    n = 1
    for d in getattr(getattr(var, "aval", None), "shape", ()):
        n *= int(d)
    return n


def _copies(jaxpr, param_ids: set, lead: int, shapes: frozenset) -> int:
    """How many equations make, from the parameters alone, a larger value of shape ``(lead,) +``
    the shape of a parameter leaf: a copy of that leaf per example, however it was spelled
    (``broadcast_to(p, ...)``, ``broadcast_to(p[None], ...)``, ``tile``, ``repeat``, a
    concatenation).  Values computed from the parameters alone are followed through every
    equation (``p[None]`` is still the parameter) and into nested jaxprs by position."""
    inner = getattr(jaxpr, "jaxpr", jaxpr)
    derived = set(param_ids)
    found = 0
    for eqn in inner.eqns:
        ins = [v for v in eqn.invars if type(v) is not _Literal]
        if ins and all(id(v) in derived for v in ins):
            biggest = max(_size(v) for v in ins)
            for out in eqn.outvars:
                derived.add(id(out))
                shape = tuple(out.aval.shape)
                found += bool(shape) and shape[0] == lead and shape[1:] in shapes and _size(out) > biggest
        for sub in jaxcompat.jaxprs_in_params(eqn.params):
            body = getattr(sub, "jaxpr", sub)
            if len(body.invars) == len(eqn.invars):  # a call: its inputs are the equation's, in order
                found += _copies(body, {id(b) for b, a in zip(body.invars, eqn.invars) if id(a) in derived},
                                 lead, shapes)
    return found


def params_copied(ctx, target: str, args: list) -> dict:
    fn = ctx.function(target)
    params, xs, ys = to_jax(list(args))
    run = traced_run(fn, params, xs, ys)
    n = len(_leaves(params))
    out: dict = {"copies": 0, "leaves": n}
    if run.jaxpr is not None:
        invars = run.jaxpr.jaxpr.invars[:n]
        shapes = frozenset(tuple(v.aval.shape) for v in invars)
        out["copies"] = _copies(run.jaxpr, {id(v) for v in invars}, int(xs.shape[0]), shapes)
    if run.error is not None:
        out["error"] = first_line(run.error)
    else:
        out["outputs"] = run.outputs
    return out

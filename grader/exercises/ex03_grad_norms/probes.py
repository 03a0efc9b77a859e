"""Probes for exercise 3 (per-example gradient norms): whether the parameters are mapped.

``params_copied(ctx, target, args)``
    ``target(*args)`` (``args`` = ``[params, xs, ys]``) traced once under our own ``jax.jit``
    (``grader.probes.generic.traced_run``), and how many of that jaxpr's ``broadcast_in_dim``
    equations copy a parameter leaf, unchanged, to a new leading axis of the batch's size:
    what ``jnp.broadcast_to(p, (B,) + p.shape)`` before a ``vmap`` with ``in_axes=0`` does.
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


def _copies(jaxpr, param_ids: set, lead: int) -> int:
    inner = getattr(jaxpr, "jaxpr", jaxpr)
    found = 0
    for eqn in inner.eqns:
        if ir.primitive_name(eqn.primitive) == "broadcast_in_dim" and id(eqn.invars[0]) in param_ids:
            operand, out = tuple(eqn.invars[0].aval.shape), tuple(eqn.outvars[0].aval.shape)
            found += out == (lead,) + operand
        for sub in jaxcompat.jaxprs_in_params(eqn.params):
            body = getattr(sub, "jaxpr", sub)
            if len(body.invars) == len(eqn.invars):  # a call: its inputs are the equation's, in order
                found += _copies(body, {id(b) for b, a in zip(body.invars, eqn.invars) if id(a) in param_ids}, lead)
    return found


def params_copied(ctx, target: str, args: list) -> dict:
    fn = ctx.function(target)
    params, xs, ys = to_jax(list(args))
    run = traced_run(fn, params, xs, ys)
    n = len(_leaves(params))
    out: dict = {"copies": 0, "leaves": n}
    if run.jaxpr is not None:
        ids = {id(v) for v in run.jaxpr.jaxpr.invars[:n]}
        out["copies"] = _copies(run.jaxpr, ids, int(xs.shape[0]))
    if run.error is not None:
        out["error"] = first_line(run.error)
    else:
        out["outputs"] = run.outputs
    return out

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


def _copies(jaxpr, param_ids: set, lead: int, shapes: frozenset, data_ids: frozenset = frozenset()) -> int:
    """How many equations make, from the parameters and constants alone (nothing computed from
    the examples, ``data_ids``), a larger value of shape ``(lead,) +`` the shape of a parameter
    leaf: a copy of that leaf per example, however it was spelled (``broadcast_to(p, ...)``,
    ``broadcast_to(p[None], ...)``, ``tile``, ``repeat``, a concatenation, a gather with
    constant indices, a product with a constant array of ones).  Values are followed through
    every equation (``p[None]`` is still the parameter) and into nested jaxprs by position."""
    inner = getattr(jaxpr, "jaxpr", jaxpr)
    derived, data = set(param_ids), set(data_ids)
    found = 0
    for eqn in inner.eqns:
        ins = [v for v in eqn.invars if type(v) is not _Literal]
        if any(id(v) in data for v in ins):
            data.update(id(out) for out in eqn.outvars)
        elif any(id(v) in derived for v in ins):
            biggest = max(_size(v) for v in ins if id(v) in derived)
            for out in eqn.outvars:
                derived.add(id(out))
                shape = tuple(out.aval.shape)
                found += bool(shape) and shape[0] == lead and shape[1:] in shapes and _size(out) > biggest
        for sub in jaxcompat.jaxprs_in_params(eqn.params):
            body = getattr(sub, "jaxpr", sub)
            if len(body.invars) == len(eqn.invars):  # a call: its inputs are the equation's, in order
                pairs = list(zip(body.invars, eqn.invars))
                found += _copies(body, {id(b) for b, a in pairs if id(a) in derived}, lead, shapes,
                                 frozenset(id(b) for b, a in pairs if id(a) in data))
    return found


def _per_example_weights(jaxpr, lead: int, weights: frozenset) -> int:
    """How many matrix products run over the batch with one copy of a weight matrix per
    example: a ``dot_general`` with batch dimensions, one of whose operands has the shape
    ``(lead,) +`` a weight leaf's -- what mapping the parameters over the batch computes,
    however the copies were made (a copy may be computed from the examples, e.g. a gather
    whose indices are ``0 * x``, where ``_copies`` cannot follow it).  The per-example
    gradients of an honest program are products of activations, never of weight copies."""
    copies = {(lead, *w) for w in weights}
    found = 0
    for eqn in ir.walk_equations(jaxpr):
        if ir.primitive_name(eqn.primitive) != "dot_general":
            continue
        _, (batch_dims, _) = eqn.params["dimension_numbers"]
        if batch_dims and any(tuple(v.aval.shape) in copies for v in eqn.invars):
            found += 1
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
        examples = frozenset(id(v) for v in run.jaxpr.jaxpr.invars[n:])  # xs and ys
        lead = int(xs.shape[0])
        out["copies"] = (_copies(run.jaxpr, {id(v) for v in invars}, lead, shapes, examples)
                         + _per_example_weights(run.jaxpr, lead, frozenset(s for s in shapes if len(s) >= 2)))
    if run.error is not None:
        out["error"] = first_line(run.error)
    else:
        out["outputs"] = run.outputs
    return out

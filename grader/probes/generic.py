"""Probes every exercise can use: counted calls and jaxpr summaries."""

from __future__ import annotations

import jax

from grader import ir
from grader.compiles import CompileRecorder
from grader.sandbox.context import to_jax

_make_jaxpr = jax.make_jaxpr
_block = jax.block_until_ready


def count_compiles(ctx, target: str, calls: list, explain: bool = True) -> dict:
    """Call ``target`` once per ``{"args": [...], "kwargs": {...}}`` while recording compiles.

    Inputs are turned into JAX arrays *before* recording starts, so only compiles caused by
    the learner's code are seen.  Returns every output and the compile record.
    """
    fn = ctx.function(target)
    prepared = [(to_jax(c.get("args", [])), to_jax(c.get("kwargs", {}))) for c in calls]
    _block(prepared)
    outputs = []
    with CompileRecorder(ctx.roots, explain_cache_misses=explain) as rec:
        for args, kwargs in prepared:
            outputs.append(_block(fn(*args, **kwargs)))
    return {"outputs": outputs, "compiles": rec.to_plain()}


def jaxpr_of(ctx, target: str, args: list, kwargs: dict | None = None, static_argnums: tuple = ()) -> dict:
    """``jax.make_jaxpr`` of the learner's ``target`` on these inputs, summarised."""
    fn = ctx.function(target)
    closed = _make_jaxpr(fn, static_argnums=tuple(static_argnums))(*to_jax(args), **to_jax(kwargs or {}))
    return ir.jaxpr_summary(closed)


def warm_up(ctx, target: str, calls: list) -> None:
    """Call ``target`` once per call, unmeasured: what a measured request that follows must
    not count (a Python scalar's one-time conversion) is compiled here, in the learner's
    sandbox and in the reference solution's alike."""
    fn = ctx.function(target)
    for c in calls:
        _block(fn(*to_jax(c.get("args", [])), **to_jax(c.get("kwargs", {}))))

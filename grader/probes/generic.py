"""Probes every exercise can use: counted calls, jaxpr summaries, and one-trace runs.

``traced_run`` is the rule for any check that judges a program's structure *and* its values:
both come from one ``jax.jit(fn).trace(...)``, the values by running that very trace's compiled
program.  Reading the jaxpr from one call (``make_jaxpr``, tracers) and the values from another
(concrete arrays) lets a learner's function tell them apart (``isinstance(x, jax.core.Tracer)``)
and show each check a different program.
"""

from __future__ import annotations

import jax

from grader import ir
from grader.compiles import CompileRecorder
from grader.sandbox.context import to_jax

_make_jaxpr = jax.make_jaxpr
_jit = jax.jit
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


class TracedRun:
    """What one trace of a function gave: its ``jaxpr`` (``None`` when tracing raised), the
    outputs of running that trace's compiled program (``None`` when tracing, lowering,
    compiling or running raised), and the ``error`` that stopped it (``None``)."""

    __slots__ = ("jaxpr", "outputs", "error")

    def __init__(self, jaxpr=None, outputs=None, error: BaseException | None = None):
        self.jaxpr, self.outputs, self.error = jaxpr, outputs, error


def traced_run(fn, *args) -> TracedRun:
    """Trace ``fn`` once under our own ``jax.jit`` and run exactly that program on ``args``.

    ``jax.jit(fn).trace(*args)`` gives the jaxpr; ``.lower().compile()`` of the same trace gives
    the executable whose outputs are returned: the checked numbers are those of the checked
    program, whatever ``fn`` does when it is called on concrete arrays -- and the program's
    objects must be the same ones after compiling as before (``ir.identity``).  Exceptions are kept,
    not raised, so a check can say which stage failed (``NotImplementedError`` -- a stub --
    propagates)."""
    try:
        traced = _jit(fn).trace(*args)
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001 - measured, not judged
        return TracedRun(error=exc)
    jaxpr = traced.jaxpr
    before = ir.identity(jaxpr)
    try:
        outputs = _block(traced.lower().compile()(*args))
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001
        return TracedRun(jaxpr=jaxpr, error=exc)
    # code that runs while JAX lowers and compiles (a lowering rule, a monitoring listener) could
    # rewrite the traced program in place, so that the jaxpr judged is not the one that ran
    if traced.jaxpr is not jaxpr or ir.identity(jaxpr) != before:
        return TracedRun(error=RewrittenProgram(
            "the traced program was rewritten in place while JAX compiled it (JAX never changes a jaxpr "
            "once made): what ran is not what was traced, so neither its structure nor its values count"))
    return TracedRun(jaxpr=jaxpr, outputs=outputs)


class RewrittenProgram(RuntimeError):
    """A traced program changed between tracing and running (``traced_run``)."""


def jaxpr_and_values(ctx, target: str, args: list) -> dict:
    """The learner's ``target`` traced once on these inputs: ``{"jaxpr": summary, "outputs": ...}``
    from the same program (``traced_run``), or ``{"error": ...}`` (with ``"jaxpr"`` when tracing
    worked and a later stage failed)."""
    run = traced_run(ctx.function(target), *to_jax(args))
    out: dict = {}
    if run.jaxpr is not None:
        out["jaxpr"] = ir.jaxpr_summary(run.jaxpr)
    if run.error is not None:
        out["error"] = f"{type(run.error).__name__}: {str(run.error).strip()[:300]}"
    else:
        out["outputs"] = run.outputs
    return out


def warm_up(ctx, target: str, calls: list) -> None:
    """Call ``target`` once per call, unmeasured: what a measured request that follows must
    not count (a Python scalar's one-time conversion) is compiled here, in the learner's
    sandbox and in the reference solution's alike."""
    fn = ctx.function(target)
    for c in calls:
        _block(fn(*to_jax(c.get("args", [])), **to_jax(c.get("kwargs", {}))))

"""Whether a learner's function does its work in JAX: the function traced end to end.

A compile-count check cannot tell a computation done in JAX from one done in NumPy beside a
trivial jitted function that compiles once per signature: both pass "at least one, at most
the reference solution's".  Tracing the graded function can.  ``work`` runs
``jax.make_jaxpr`` over it with the chosen arguments as tracers: NumPy (or ``float()``) on a
traced array raises, a host callback shows as an equation, and the program's primitives show
the computation itself (softmax's ``exp``, the model's ``tanh``).  It measures only; the
trusted side (``grader.traced_work``) judges what the program must hold.

``work(ctx, target, args, kwargs=None, traced=None)``
    ``jax.make_jaxpr`` of ``target(*args, **kwargs)`` where the positional arguments whose
    indices ``traced`` lists (all of them when None) are tracers and the others are passed
    as given (JAX arrays for NumPy ones; a Python float stays a float), so host-side work on
    arguments the statement leaves to the host still runs.  Returns ``{"primitives":
    {name: count}, "total_eqns": n}`` (nested jaxprs included), or ``{"error": "<type>:
    <first line>"}`` when tracing raised.  A ``NotImplementedError`` is not caught, so a stub
    is reported as not implemented.
"""

from __future__ import annotations

import jax

from grader import ir
from grader.sandbox.context import to_jax

# Bound at import time (probe modules load before the learner's module does).
_make_jaxpr = jax.make_jaxpr


def _first_line(exc: BaseException, limit: int = 400) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:limit] if text else ''}".rstrip(": ")


def work(ctx, target: str, args: list, kwargs: dict | None = None, traced: list | None = None) -> dict:
    fn = ctx.function(target)
    args = list(to_jax(list(args)))
    kwargs = to_jax(dict(kwargs or {}))
    positions = list(range(len(args))) if traced is None else [int(i) for i in traced]

    def with_tracers(*values):
        full = list(args)
        for i, value in zip(positions, values):
            full[i] = value
        return fn(*full, **kwargs)

    try:
        closed = _make_jaxpr(with_tracers)(*[args[i] for i in positions])
    except NotImplementedError:
        raise
    except Exception as exc:  # measured, not judged: the trusted side turns this into feedback
        return {"error": _first_line(exc)}
    return {"primitives": ir.primitive_counts(closed), "total_eqns": sum(1 for _ in ir.walk_equations(closed))}

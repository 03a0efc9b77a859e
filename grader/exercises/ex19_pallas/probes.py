"""Probes for exercise 19 (a Pallas kernel in interpret mode), run in the sandbox beside the
learner's code.  Each returns plain data; the verdicts are the tests'.

The learner's two functions take their block sizes as trailing Python ints:
``softmax_rows(x, block_rows)`` and ``matmul_relu(x, w, bm, bn, bk)``.  ``target`` names one
of them, ``arrays`` are its array arguments and ``blocks`` its block sizes.

``values(ctx, target, arrays, blocks)``
    the function called as the learner wrote it: ``{"value": array}``, or ``{"error": first
    line}`` when it raised.
``structure(ctx, target, arrays, blocks)``
    the jaxpr of that call, traced by us: every ``pallas_call`` in it with its grid and block
    shapes, and the primitives that run outside the kernels (``grader.ir.kernel_calls``).
``composed(ctx, target, arrays, blocks)``
    the function under our ``jax.jit(jax.vmap(...))``: the first array argument batched on a
    new leading axis, the others shared (``in_axes=None``); same answer as ``values``.

JAX entry points (and Pallas, which the learner's module imports too) are bound at import,
before the learner's module loads.
"""

from __future__ import annotations

import jax
import jax.experimental.pallas  # noqa: F401 - imported before the learner's module, which needs it
import numpy as np

from grader import ir

_jit = jax.jit
_vmap = jax.vmap
_make_jaxpr = jax.make_jaxpr
_device_put = jax.device_put
_block = jax.block_until_ready
_asarray = np.asarray
_kernel_calls = ir.kernel_calls

TARGETS = ("softmax_rows", "matmul_relu")


def _first_line(exc: BaseException) -> str:
    if isinstance(exc, NotImplementedError):
        raise exc
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}".rstrip(": ")


def _function(ctx, target: str, blocks: list):
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}")
    fn = ctx.function(target)
    sizes = [int(b) for b in blocks]
    return lambda *arrays: fn(*arrays, *sizes)


def _answer(call) -> dict:
    try:
        out = call()
    except Exception as exc:  # noqa: BLE001 - measured, not judged
        return {"error": _first_line(exc)}
    if not isinstance(out, (jax.Array, np.ndarray)):
        return {"error": f"returned {type(out).__name__}, not an array"}
    return {"value": _asarray(_block(out))}


def values(ctx, target: str, arrays: list, blocks: list) -> dict:
    fn = _function(ctx, target, blocks)
    args = [_device_put(a) for a in arrays]
    return _answer(lambda: fn(*args))


def composed(ctx, target: str, arrays: list, blocks: list) -> dict:
    fn = _function(ctx, target, blocks)
    args = [_device_put(a) for a in arrays]
    in_axes = (0,) + (None,) * (len(args) - 1)
    return _answer(lambda: _jit(_vmap(fn, in_axes=in_axes))(*args))


def structure(ctx, target: str, arrays: list, blocks: list) -> dict:
    fn = _function(ctx, target, blocks)
    try:
        closed = _make_jaxpr(fn)(*[_device_put(a) for a in arrays])
    except Exception as exc:  # noqa: BLE001
        return {"error": _first_line(exc)}
    return _kernel_calls(closed)

"""Probes for exercise 19 (a Pallas kernel in interpret mode), run in the sandbox beside the
learner's code.  Each returns plain data; the verdicts are the tests'.

The learner's two functions take their block sizes as trailing Python ints:
``softmax_rows(x, block_rows)`` and ``matmul_relu(x, w, bm, bn, bk)``.  ``target`` names one
of them, ``arrays`` are its array arguments and ``blocks`` its block sizes.

Values and structure come from one trace (``grader.probes.generic.traced_run``): our
``jax.jit`` traces the learner's function once, the jaxpr of that trace is read, and the numbers
are those of running that very trace's compiled program.  A function that answers concrete
calls with NumPy and shows tracers a kernel for show gets its kernel's numbers judged.

``values(ctx, target, arrays, blocks)``
    ``{"value": array, "host_callbacks": {...}}`` computed by the traced program, or
    ``{"error": first line}``.
``structure(ctx, target, arrays, blocks)``
    the jaxpr of the same trace (the same inputs give the same trace: it is kept in
    ``ctx.slots``, so a layout check judges the program whose numbers the value check judged):
    every ``pallas_call`` in it with its grid and block shapes, and the primitives that run
    outside the kernels (``grader.ir.kernel_calls``), and the host callbacks anywhere in it,
    kernel bodies included (``host_callbacks``: a ``jax.pure_callback`` in a kernel computes on the
    host, where no grid or block is asked).
``composed(ctx, target, arrays, blocks)``
    the function under our ``jax.vmap``, traced and run the same way (the first array argument
    batched on a new leading axis, the others shared, ``in_axes=None``): ``{"value": array,
    "kernel": kernel_calls}``, so the check sees that the batched numbers came from a kernel.

JAX entry points (and Pallas, which the learner's module imports too) are bound at import,
before the learner's module loads.
"""

from __future__ import annotations

import jax
import jax.experimental.pallas  # noqa: F401 - imported before the learner's module, which needs it
import numpy as np

from grader import ir, jaxcompat
from grader.probes.generic import traced_run
from grader.probes.errors import first_line_or_unimplemented as _first_line

_vmap = jax.vmap
_device_put = jax.device_put
_asarray = np.asarray
_kernel_calls = ir.kernel_calls
_primitive_counts = ir.primitive_counts
#: Primitives that hand values to Python on the host: a kernel that computes through one of them
#: computes nothing itself (``jax.debug.print``'s ``debug_callback`` returns nothing, so it is fine).
HOST_CALLBACKS = jaxcompat.CALLBACK_PRIMITIVES

TARGETS = ("softmax_rows", "matmul_relu")


def _function(ctx, target: str, blocks: list):
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}")
    fn = ctx.function(target)
    sizes = [int(b) for b in blocks]
    return lambda *arrays: fn(*arrays, *sizes)


def _key(kind: str, target: str, arrays: list, blocks: list) -> tuple:
    return ("ex19_pallas", kind, target, tuple(int(b) for b in blocks),
            tuple((a.shape, str(a.dtype), _asarray(a).tobytes()) for a in arrays))


def _one_trace(ctx, kind: str, target: str, arrays: list, blocks: list) -> dict:
    """``{"value"|"error", "kernel"}`` of one ``traced_run``, kept in ``ctx.slots`` by inputs."""
    key = _key(kind, target, arrays, blocks)
    if key in ctx.slots:
        return ctx.slots[key]
    fn = _function(ctx, target, blocks)
    if kind == "vmap":
        fn = _vmap(fn, in_axes=(0,) + (None,) * (len(arrays) - 1))
    run = traced_run(fn, *[_device_put(a) for a in arrays])
    out: dict = {}
    if run.jaxpr is not None:
        counts = _primitive_counts(run.jaxpr)  # kernel bodies included
        out["kernel"] = dict(_kernel_calls(run.jaxpr),
                             host_callbacks={p: counts[p] for p in HOST_CALLBACKS if p in counts})
    if run.error is not None:
        out["error"] = _first_line(run.error)
    elif not isinstance(run.outputs, jax.Array):
        out["error"] = f"returned {type(run.outputs).__name__}, not an array"
    else:
        out["value"] = _asarray(run.outputs)
    ctx.slots[key] = out
    return out


def values(ctx, target: str, arrays: list, blocks: list) -> dict:
    got = _one_trace(ctx, "plain", target, arrays, blocks)
    if "error" in got:
        return {"error": got["error"]}
    return {"value": got["value"], "host_callbacks": got["kernel"]["host_callbacks"]}


def composed(ctx, target: str, arrays: list, blocks: list) -> dict:
    got = _one_trace(ctx, "vmap", target, arrays, blocks)
    kernel = got.get("kernel") or {"error": got.get("error", "no jaxpr")}
    return dict(got, kernel=kernel, host_callbacks=kernel.get("host_callbacks", {}))


def structure(ctx, target: str, arrays: list, blocks: list) -> dict:
    got = _one_trace(ctx, "plain", target, arrays, blocks)
    return got.get("kernel") or {"error": got["error"]}

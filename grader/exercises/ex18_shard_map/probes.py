"""Probes for exercise 18 (shard_map: collectives by hand), run in the sandbox beside the learner's
code.  Each builds the ``("data", "model")`` mesh the grader chose, places the inputs itself,
traces, lowers, compiles and runs the learner's function once, and returns plain data; the
verdicts are the tests'.

``run_megatron(ctx, mesh_shape, x, w1, w2)``
    ``megatron_mlp(mesh, x, w1, w2)`` on x ``P("data", None)``, w1 ``P(None, "model")``, w2
    ``P("model", None)``: ``{"mesh", "shard_maps", "output", "output_sharding", "hlo"}``.
``run_ring(ctx, mesh_shape, x)``
    the learner's ``ring_allreduce`` inside our ``jax.shard_map`` (in and out specs
    ``P("model", None)``, ``check_vma`` on) on x ``P("model", None)``: ``{"mesh", "output", "hlo"}``.
``run_dp(ctx, mesh_shape, params, x, y)``
    ``data_parallel_grads(mesh, params, x, y)`` on replicated params and x, y
    ``P("data", None)``: ``{"mesh", "shard_maps", "loss", "grads", "hlo"}``.

``shard_maps`` lists every ``shard_map`` of the traced function with its ``check_vma``
(``grader.ir.shard_maps``).  A step that fails gives ``"error"`` (``"<step>: <Type>: <first
line>"``) and nothing after it; a ``NotImplementedError`` goes up.  JAX entry points are bound at
import, before the learner's module loads.
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import numpy as np
from jax import stages as _stages
from jax.sharding import Mesh as _Mesh
from jax.sharding import NamedSharding as _NamedSharding
from jax.sharding import PartitionSpec as _P

from grader.ir import largest_outside_shard_maps as _largest_outside
from grader.ir import outside_shard_maps as _outside_shard_maps, shard_maps as _shard_maps
from grader.ir import shard_map_matmul_flops as _matmul_flops
from grader.layouts import AXES, mesh_record as _mesh_record, sharding_record as _sharding_record
from grader.probes.errors import first_line_or_unimplemented as _first_line, type_name as _type_name

_jit = jax.jit
_trace = type(jax.jit(lambda v: v)).trace  # jit(f).trace(*args): one trace, its jaxpr and its lowering
_lower = _stages.Traced.lower
_traced_jaxpr = _stages.Traced.jaxpr.fget
_shard_map = jax.shard_map
_devices = jax.devices
_device_put = jax.device_put
_Array = jax.Array
_compile = _stages.Lowered.compile
_as_text = _stages.Compiled.as_text
_output_shardings = _stages.Compiled.output_shardings.fget
_run = _stages.Compiled.__call__
_asarray = np.asarray
_isinstance = isinstance

MEGATRON = (_P("data", None), _P(None, "model"), _P("model", None))
RING = _P("model", None)


class _Failed(Exception):
    pass


def _step(result: dict, name: str, work):
    try:
        return work()
    except Exception as exc:  # noqa: BLE001 - measured, not judged (NotImplementedError goes up)
        result["error"] = f"{name}: {_first_line(exc)}"
        raise _Failed from None


def _mesh(mesh_shape):
    d, m = (int(n) for n in mesh_shape)
    grid = np.array(_devices()[: d * m]).reshape(d, m)
    return grid, _Mesh(grid, AXES)


def _compiled(result: dict, fn, args, trace: bool):
    """Trace, lower and compile ``fn`` on ``args``; the HLO into ``result``.  With ``trace``, the
    jaxpr read for its shard_maps (and the work outside them) is the one this very trace made,
    the one lowered, compiled and run: the structure judged is the program whose values are."""
    traced = _step(result, "tracing", lambda: _trace(_jit(fn), *args))
    if trace:
        closed = _traced_jaxpr(traced)
        result["shard_maps"] = _shard_maps(closed)
        result["outside_shard_maps"] = _outside_shard_maps(closed)
        result["largest_outside"] = _largest_outside(closed)
        result["device_work"] = _matmul_flops(closed)
    compiled = _step(result, "compiling", lambda: _compile(_lower(traced)))
    result["hlo"] = _as_text(compiled)
    return compiled


def _megatron_call(ctx, mesh, x, w1, w2):
    fn = ctx.function("megatron_mlp")
    args = [_device_put(a, _NamedSharding(mesh, s)) for a, s in zip((x, w1, w2), MEGATRON)]
    return (lambda a, b, c: fn(mesh, a, b, c)), args


def _dp_call(ctx, mesh, params, x, y):
    fn = ctx.function("data_parallel_grads")
    rows = _NamedSharding(mesh, _P("data", None))
    args = [_device_put(params, _NamedSharding(mesh, _P())), _device_put(x, rows), _device_put(y, rows)]
    return (lambda p, a, b: fn(mesh, p, a, b)), args


def device_work(ctx, part, mesh_shape, *arrays) -> dict:
    """The matrix-product work one device does in ``part`` ("megatron" or "dp") of the file on this
    mesh and these arrays: its function traced as ``run_megatron`` / ``run_dp`` trace it, nothing
    compiled (``ir.shard_map_matmul_flops``).  Asked of the reference solution, so a learner's
    per-device work is judged against what one device's share costs, measured live."""
    _, mesh = _mesh(mesh_shape)
    fn, args = (_megatron_call if part == "megatron" else _dp_call)(ctx, mesh, *arrays)
    return _matmul_flops(_traced_jaxpr(_trace(_jit(fn), *args)))


def run_megatron(ctx, mesh_shape, x, w1, w2) -> dict:
    grid, mesh = _mesh(mesh_shape)
    result: dict = {"mesh": _mesh_record(grid)}
    call, args = _megatron_call(ctx, mesh, x, w1, w2)
    try:
        compiled = _compiled(result, call, args, trace=True)
        out = _step(result, "running", lambda: _run(compiled, *args))
    except _Failed:
        return result
    if not _isinstance(out, _Array):
        result["error"] = f"running: megatron_mlp returned a {_type_name(out)}, not one array"
        return result
    value = _asarray(out)
    result.update(output=value, output_sharding=_sharding_record(_output_shardings(compiled), value.shape))
    return result


def run_ring(ctx, mesh_shape, x) -> dict:
    grid, mesh = _mesh(mesh_shape)
    result: dict = {"mesh": _mesh_record(grid)}
    body = ctx.function("ring_allreduce")
    arg = _device_put(x, _NamedSharding(mesh, RING))
    try:
        wrapped = _step(result, "wrapping in shard_map",
                        lambda: _shard_map(body, mesh=mesh, in_specs=RING, out_specs=RING))
        compiled = _compiled(result, wrapped, [arg], trace=False)
        out = _step(result, "running", lambda: _run(compiled, arg))
    except _Failed:
        return result
    if not _isinstance(out, _Array):
        result["error"] = f"running: ring_allreduce returned a {_type_name(out)}, not one array"
        return result
    result["output"] = _asarray(out)
    return result


def run_dp(ctx, mesh_shape, params, x, y) -> dict:
    grid, mesh = _mesh(mesh_shape)
    result: dict = {"mesh": _mesh_record(grid)}
    call, args = _dp_call(ctx, mesh, params, x, y)
    try:
        compiled = _compiled(result, call, args, trace=True)
        out = _step(result, "running", lambda: _run(compiled, *args))
    except _Failed:
        return result
    ok = (_isinstance(out, (tuple, list)) and len(out) == 2 and _isinstance(out[0], _Array)
          and _isinstance(out[1], Mapping) and all(_isinstance(v, _Array) for v in out[1].values()))
    if not ok:
        result["error"] = (f"running: data_parallel_grads returned a {_type_name(out)}, not (loss, grads) with "
                           "grads a dict of arrays like params")
        return result
    result.update(loss=_asarray(out[0]), grads={str(k): _asarray(v) for k, v in out[1].items()})
    return result

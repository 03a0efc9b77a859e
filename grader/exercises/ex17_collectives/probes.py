"""Probes for exercise 17 (predicting collectives; FSDP), run in the sandbox beside the learner's
code, and one run in the clean worker.  Each returns plain data; the verdicts are the tests'.

A *layout* travels as ``{"x": (axis or None, axis or None), "w1": (...), "w2": (...)}``: per
input, the mesh axis splitting each of its two dimensions.

``truth_collectives(ctx, layouts)`` (clean worker)
    for each layout, the collectives in the ENTRY computation of the MLP
    ``relu(x @ w1) @ w2`` compiled at ``SIZES`` on the 2x4 ``("data", "model")`` mesh with
    inputs laid out so: ``{opcode: count}`` without zeros.  Each layout is compiled once per
    worker (abstract inputs: ``jax.ShapeDtypeStruct`` with a sharding, no data).
``run_fsdp(ctx, mesh_shape, x, w1, w2)``
    places the host arrays with the learner's ``fsdp_specs()`` on the mesh, jits
    ``fsdp_mlp(mesh, x, w1, w2)`` with the mesh bound, lowers, compiles and runs it once:
    ``{"mesh", "specs", "inputs" (sharding records), "output", "output_sharding",
    "argument_bytes", "hlo", "constrained"}`` (the inputs, by name, that reach a
    ``with_sharding_constraint`` in the traced program whose result a matrix product uses,
    ``ir.inputs_reaching``), or an
    ``"error"`` naming the step that failed.

The learner's predictions run elsewhere: in the worker without JAX (``nojax_probes.py``).

JAX entry points are bound at import, before the learner's module loads.
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np
from jax import stages as _stages
from jax.sharding import Mesh as _Mesh
from jax.sharding import NamedSharding as _NamedSharding
from jax.sharding import PartitionSpec as _P

from grader import jaxcompat as _jaxcompat
from grader.ir import collective_counts as _collective_counts, inputs_reaching as _inputs_reaching
from grader.ir import primitive_name as _primitive_name, walk_equations as _walk_equations
from grader.layouts import AXES, mesh_record as _mesh_record, sharding_record as _sharding_record
from grader.probes.errors import first_line_or_unimplemented as _first_line, type_name as _type_name

#: The sizes every prediction is about: x f32[B, D], w1 f32[D, H], w2 f32[H, O] (the statement's).
SIZES = {"B": 16, "D": 8, "H": 32, "O": 8}
NAMES = ("x", "w1", "w2")

_jit = jax.jit
_relu = jax.nn.relu
_devices = jax.devices
_device_put = jax.device_put
_ShapeDtypeStruct = jax.ShapeDtypeStruct
_Array = jax.Array
_f32 = jnp.float32
_compile = _stages.Lowered.compile
_trace = type(jax.jit(lambda v: v)).trace  # jit(f).trace(*args): one trace, its jaxpr and its lowering
_lower = _stages.Traced.lower
_traced_jaxpr = _stages.Traced.jaxpr.fget
_CONSTRAINT = _jaxcompat.SHARDING_CONSTRAINT_PRIMITIVE
_as_text = _stages.Compiled.as_text
_memory_analysis = _stages.Compiled.memory_analysis
_input_shardings = _stages.Compiled.input_shardings.fget
_output_shardings = _stages.Compiled.output_shardings.fget
_run = _stages.Compiled.__call__
_asarray = np.asarray
_isinstance = isinstance


def _mesh(d: int, m: int):
    grid = np.array(_devices()[: d * m]).reshape(d, m)
    return grid, _Mesh(grid, AXES)


def _mlp(x, w1, w2):
    return _relu(x @ w1) @ w2


# --- the truth, in the clean worker ------------------------------------------------------------

_TRUTH: dict = {}


def _key(layout) -> tuple:
    return tuple(tuple(layout[name]) for name in NAMES)


def truth_collectives(ctx, layouts: list) -> list[dict]:
    _, mesh = _mesh(2, 4)
    shapes = {"x": (SIZES["B"], SIZES["D"]), "w1": (SIZES["D"], SIZES["H"]), "w2": (SIZES["H"], SIZES["O"])}
    out = []
    for layout in layouts:
        key = _key(layout)
        if key not in _TRUTH:
            args = [_ShapeDtypeStruct(shapes[name], _f32, sharding=_NamedSharding(mesh, _P(*layout[name])))
                    for name in NAMES]
            text = _as_text(_compile(_jit(_mlp).lower(*args)))
            _TRUTH[key] = {op: n for op, n in _collective_counts(text).items() if n}
        out.append(dict(_TRUTH[key]))
    return out


# --- part B: the FSDP layout -------------------------------------------------------------------------

def _constraint_meshes(jaxpr) -> list:
    """The axis sizes of the mesh each ``with_sharding_constraint`` of the program names."""
    out = []
    for eqn in _walk_equations(jaxpr):
        if _primitive_name(eqn.primitive) == _CONSTRAINT:
            mesh = getattr(eqn.params.get("sharding"), "mesh", None)
            out.append([int(n) for n in getattr(mesh, "axis_sizes", ())])
    return out


def run_fsdp(ctx, mesh_shape, x, w1, w2) -> dict:
    d, m = (int(n) for n in mesh_shape)
    grid, mesh = _mesh(d, m)
    result: dict = {"mesh": _mesh_record(grid)}
    try:
        specs = ctx.function("fsdp_specs")()
    except Exception as exc:  # noqa: BLE001
        result["error"] = f"fsdp_specs() raised {_first_line(exc)}"
        return result
    if not _isinstance(specs, Mapping) or any(not _isinstance(specs.get(n), _P) for n in NAMES):
        result["error"] = ("fsdp_specs() should return a dict with a PartitionSpec for each of 'x', 'w1' and 'w2'; "
                           f"it returned {_type_name(specs)}"
                           + (f" with keys {sorted(map(str, specs))[:6]}" if _isinstance(specs, Mapping) else ""))
        return result
    result["specs"] = [str(specs[n]) for n in NAMES]
    try:
        placed = [_device_put(a, _NamedSharding(mesh, specs[n])) for n, a in zip(NAMES, (x, w1, w2))]
    except Exception as exc:  # noqa: BLE001
        result["error"] = f"placing the inputs with fsdp_specs() failed: {_first_line(exc)}"
        return result
    fn = ctx.function("fsdp_mlp")
    try:
        traced = _trace(_jit(lambda a, b, c: fn(mesh, a, b, c)), *placed)
        jaxpr = _traced_jaxpr(traced)
        constrained = _inputs_reaching(jaxpr, _CONSTRAINT, then="dot_general")  # gathered for use
        result["constraint_meshes"] = _constraint_meshes(jaxpr)
        compiled = _compile(_lower(traced))
    except Exception as exc:  # noqa: BLE001
        result["error"] = f"fsdp_mlp(mesh, x, w1, w2) failed under jax.jit: {_first_line(exc)}"
        return result
    result["constrained"] = [NAMES[i] for i in constrained if i < len(NAMES)]
    out = _run(compiled, *placed)
    if not _isinstance(out, _Array):
        result["error"] = f"fsdp_mlp returned a {_type_name(out)}, not one array"
        return result
    value = _asarray(out)
    result.update(
        inputs=[_sharding_record(s, a.shape) for s, a in zip(_input_shardings(compiled)[0], placed)],
        output=value,
        output_sharding=_sharding_record(_output_shardings(compiled), value.shape),
        argument_bytes=int(_memory_analysis(compiled).argument_size_in_bytes),
        hlo=_as_text(compiled),
    )
    return result

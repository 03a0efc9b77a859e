"""Probe for exercise 4 (Megatron-style PartitionSpecs): run the learner's layout on a mesh.

``run_on_mesh(ctx, mesh_shape, x, w1, w2)`` builds the mesh the grader chose,
``Mesh(np.array(jax.devices()).reshape(d, m), ("data", "model"))`` (Auto axes), hands it
with the host arrays to the learner's ``shard_inputs(mesh, x, w1, w2)``, then jits the
grader's own copy of the stub's ``mlp`` (the statement says to leave it as given; a learner's
edit, a sharding constraint say, must not decide the verdict on the layout), lowers and
compiles it for the arrays it got back, and runs the compiled program once.  It returns plain
data only; every verdict is the test's:

``mesh``            ``{"shape": [d, m], "device_ids": [[...], ...]}`` (the grid of device ids)
``returned``        a description of each value ``shard_inputs`` returned (type name, and
                    whether it is a ``jax.Array``); ``compiled`` is False and nothing else is
                    measured when these are not three JAX arrays
``values_kept``     per input, whether the placed array still holds the values passed in
``inputs``          per input, a sharding record (``grader.layouts.sharding_record``) read from
                    ``compiled.input_shardings``
``input_shardings_text``  ``repr(compiled.input_shardings)``
``output``          the output of the compiled program, as a numpy array
``output_sharding`` the sharding record of ``compiled.output_shardings``
``argument_bytes``  ``compiled.memory_analysis().argument_size_in_bytes`` (per device)
``hlo``             the optimized HLO text, ``compiled.as_text()``

``read_specs(ctx, mesh_shape, shapes)`` calls the learner's ``partition_specs()`` and says,
for each of ``x``, ``w1`` and ``w2``, what ``NamedSharding(mesh, spec)`` would give an array of
its shape: ``{"type", "keys": sorted str keys or None when not a mapping, "specs": {name:
{"type", "text": repr(spec), "layout": a sharding record, or "error": why none can be made}},
"mesh"}``.

JAX entry points are bound when this module is imported (before the learner's module),
so a submission that patches ``jax.jit`` or the ``Compiled`` introspection methods does
not change what is measured.
"""

from __future__ import annotations

import jax
import numpy as np
from jax import stages as _stages
from jax.sharding import Mesh as _Mesh
from jax.sharding import NamedSharding as _NamedSharding
from jax.sharding import PartitionSpec as _PartitionSpec

from grader.plaindata import as_plain_sequence as _as_plain_sequence
from grader.layouts import sharding_record as _sharding_record
from grader.probes.errors import type_name as _type_name

_jit = jax.jit
_devices = jax.devices
_Array = jax.Array
_compile = _stages.Lowered.compile
_as_text = _stages.Compiled.as_text
_memory_analysis = _stages.Compiled.memory_analysis
_input_shardings = _stages.Compiled.input_shardings.fget
_output_shardings = _stages.Compiled.output_shardings.fget
_run = _stages.Compiled.__call__
_asarray = np.asarray
_relu = jax.nn.relu

AXES = ("data", "model")


def _mlp(x, w1, w2):
    """The stub's ``mlp``, the grader's copy: relu(x @ w1) @ w2."""
    return _relu(x @ w1) @ w2


_mlp_jitted = _jit(_mlp)


def _mesh(mesh_shape):
    """The grader's mesh of shape ``mesh_shape`` and its plain-data description."""
    d, m = (int(n) for n in mesh_shape)
    grid = np.array(_devices()[: d * m]).reshape(d, m)
    return _Mesh(grid, AXES), {"shape": [d, m], "device_ids": [[int(dev.id) for dev in row] for row in grid]}


def read_specs(ctx, mesh_shape, shapes) -> dict:
    mesh, described = _mesh(mesh_shape)
    specs = ctx.function("partition_specs")()
    out = {"type": _type_name(specs), "keys": None, "specs": {}, "mesh": described}
    if not isinstance(specs, dict):
        return out
    out["keys"] = sorted(k for k in specs if type(k) is str)
    for name, shape in zip(("x", "w1", "w2"), shapes):
        if name not in specs:
            continue
        spec = specs[name]
        record = {"type": _type_name(spec), "text": repr(spec)[:200]}
        if isinstance(spec, _PartitionSpec):
            try:
                record["layout"] = _sharding_record(_NamedSharding(mesh, spec), shape)
            except Exception as exc:  # an axis the mesh lacks, more entries than the array has axes...
                record["error"] = f"{type(exc).__name__}: {exc}"[:300]
        out["specs"][name] = record
    return out


def run_on_mesh(ctx, mesh_shape, x, w1, w2) -> dict:
    mesh, described = _mesh(mesh_shape)
    result = {"mesh": described, "compiled": False}
    host = (x, w1, w2)
    placed = ctx.function("shard_inputs")(mesh, x, w1, w2)
    placed = _as_plain_sequence(placed)  # a NamedTuple is a tuple
    items = list(placed) if type(placed) in (list, tuple) else None
    result["returned"] = {
        "type": _type_name(placed),
        "items": None if items is None else [
            {"type": _type_name(v), "is_jax_array": isinstance(v, _Array)} for v in items
        ],
    }
    if items is None or len(items) != 3 or not all(isinstance(v, _Array) for v in items):
        return result

    result["values_kept"] = [
        bool(tuple(a.shape) == h.shape and np.array_equal(_asarray(a), h)) for a, h in zip(items, host)
    ]
    compiled = _compile(_mlp_jitted.lower(*items))
    arg_shardings = _input_shardings(compiled)[0]
    out = _asarray(_run(compiled, *items))
    result.update(
        compiled=True,
        inputs=[_sharding_record(s, a.shape) for s, a in zip(arg_shardings, items)],
        input_shardings_text=repr(_input_shardings(compiled)),
        output=out,
        output_sharding=_sharding_record(_output_shardings(compiled), out.shape),
        argument_bytes=int(_memory_analysis(compiled).argument_size_in_bytes),
        hlo=_as_text(compiled),
    )
    return result

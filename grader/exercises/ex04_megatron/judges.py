"""Exercise 4 (Megatron-style PartitionSpecs): judging what ``ex04_megatron:run_on_mesh``
measured, shared by the public and the hidden checks.  NumPy only, no JAX."""

from __future__ import annotations

import numpy as np

from grader.feedback import CheckFailed
# naming a layout without naming a size: the kit's, named here for the checks
from grader.layouts import (CANDIDATE_AXES, describe_axes, has_layout, layout_blocks,  # noqa: F401
                            measured_blocks, recognise)

NAMES = ("x", "w1", "w2")


def mlp_reference(x, w1, w2):
    """The stub's ``mlp`` in float64 NumPy: relu(x @ w1) @ w2."""
    return np.maximum(x.astype(np.float64) @ w1, 0.0) @ w2


def where(mesh_shape):
    return f"on the {mesh_shape[0]}x{mesh_shape[1]} mesh"


def _label(mesh_shape, label):
    """How a diagnosis names the mesh: ``label`` when given (hidden checks: "on the second mesh
    shape", never its drawn size), else the mesh's shape."""
    return label or where(mesh_shape)


def expect_on_given_mesh(name, record, mesh_shape, label=""):
    """``record`` (one array's sharding) sits on a mesh of the shape shard_inputs was given."""
    axes = record["mesh_axes"]
    given = {"data": mesh_shape[0], "model": mesh_shape[1]}
    if axes is not None and axes != given:
        advice = ("build every NamedSharding from the `mesh` argument; do not build a mesh of your own or assume "
                  "its shape: the grader calls shard_inputs with more than one mesh shape")
        raise CheckFailed(
            f"{where(mesh_shape)}: {name} sits on a mesh of shape {axes}, not on the mesh passed to shard_inputs",
            measured=record["text"], expected=f"a NamedSharding over the given mesh {given}", hint=advice,
            diagnosis=f"{_label(mesh_shape, label)}: {name} sits on a mesh of another shape than the one passed to "
                      f"shard_inputs", advice=advice,
        )


def expect_placed(result, mesh_shape=None, label=""):
    """shard_inputs returned three JAX arrays, unchanged, spread over the devices of the given mesh.

    Without ``mesh_shape`` (the public checks' fixed mesh) a failure to spread shows the
    input's sharding.  With it, messages name the mesh, leave the sharding text out, and
    each input must also sit on a mesh of exactly that shape (``expect_on_given_mesh``).
    Every failure carries a diagnosis that names no size (``label`` names the mesh in it).
    """
    at_label = _label(mesh_shape, label) if mesh_shape is not None else "on the 2x4 mesh"
    returned = result["returned"]
    items = returned["items"]
    if items is None or len(items) != 3:
        raise CheckFailed(
            "shard_inputs should return the three arrays (x, w1, w2)",
            measured=f"it returned a {returned['type']}" + ("" if items is None else f" of {len(items)} values"),
            expected="a tuple of three jax.Arrays", hint="return (x, w1, w2) after placing each one",
            diagnosis=f"{at_label}: shard_inputs did not return three arrays (x, w1, w2)",
            advice="return (x, w1, w2) after placing each one",
        )
    for name, item in zip(NAMES, items):
        if not item["is_jax_array"]:
            advice = "jax.device_put(array, NamedSharding(mesh, spec)) returns the placed jax.Array"
            raise CheckFailed(
                f"shard_inputs returned {name} as a {item['type']}, not as a jax.Array placed on the mesh",
                measured=item["type"], expected="jax.Array", hint=advice, advice=advice,
                diagnosis=f"{at_label}: shard_inputs returned {name} as something other than a jax.Array",
            )
    for name, kept in zip(NAMES, result["values_kept"]):
        if not kept:
            advice = "placing an array must not transpose, cast or modify it"
            raise CheckFailed(
                f"shard_inputs changed {name}: its values, shape or dtype differ from what was passed in",
                measured=f"{name} changed", expected=f"{name} unchanged (only its placement changes)",
                hint=advice, advice=advice,
                diagnosis=f"{at_label}: shard_inputs changed the values, shape or dtype of {name}",
            )
    mesh_ids = {i for row in result["mesh"]["device_ids"] for i in row}
    at = "" if mesh_shape is None else f"{where(mesh_shape)}: "
    for name, record in zip(NAMES, result["inputs"]):
        ids = {b[0] for b in record["blocks"]}
        if ids != mesh_ids:
            advice = ("build each NamedSharding from the `mesh` argument of shard_inputs"
                      + ("" if mesh_shape is None else " and jax.device_put with it"))
            raise CheckFailed(
                f"{at}{name} is not spread over the mesh you were given",
                measured=f"{name} lives on {len(ids)} device(s)" + (f": {record['text']}" if mesh_shape is None else ""),
                expected=f"every input on all {len(mesh_ids)} devices of the mesh", hint=advice, advice=advice,
                diagnosis=f"{at_label}: {name} does not live on every device of the mesh passed to shard_inputs",
            )
        if mesh_shape is not None:
            expect_on_given_mesh(name, record, mesh_shape, label)

"""Exercise 4 (Megatron-style PartitionSpecs): judging what ``ex04_megatron:run_on_mesh``
measured, shared by the public and the hidden checks.  NumPy only, no JAX."""

from __future__ import annotations

import numpy as np

from grader.feedback import CheckFailed

NAMES = ("x", "w1", "w2")


def mlp_reference(x, w1, w2):
    """The stub's ``mlp`` in float64 NumPy: relu(x @ w1) @ w2."""
    return np.maximum(x.astype(np.float64) @ w1, 0.0) @ w2


def where(mesh_shape):
    return f"on the {mesh_shape[0]}x{mesh_shape[1]} mesh"


def expect_on_given_mesh(name, record, mesh_shape):
    """``record`` (one array's sharding) sits on a mesh of the shape shard_inputs was given."""
    axes = record["mesh_axes"]
    given = {"data": mesh_shape[0], "model": mesh_shape[1]}
    if axes is not None and axes != given:
        raise CheckFailed(
            f"{where(mesh_shape)}: {name} sits on a mesh of shape {axes}, not on the mesh passed to shard_inputs",
            measured=record["text"], expected=f"a NamedSharding over the given mesh {given}",
            hint="build every NamedSharding from the `mesh` argument; do not build a mesh of your own or assume "
                 "its shape: the grader calls shard_inputs with more than one mesh shape",
        )


def expect_placed(result, mesh_shape=None):
    """shard_inputs returned three JAX arrays, unchanged, spread over the devices of the given mesh.

    Without ``mesh_shape`` (the public checks' fixed mesh) a failure to spread shows the
    input's sharding.  With it, messages name the mesh, leave the sharding text out, and
    each input must also sit on a mesh of exactly that shape (``expect_on_given_mesh``).
    """
    returned = result["returned"]
    items = returned["items"]
    if items is None or len(items) != 3:
        raise CheckFailed(
            "shard_inputs should return the three arrays (x, w1, w2)",
            measured=f"it returned a {returned['type']}" + ("" if items is None else f" of {len(items)} values"),
            expected="a tuple of three jax.Arrays", hint="return (x, w1, w2) after placing each one",
        )
    for name, item in zip(NAMES, items):
        if not item["is_jax_array"]:
            raise CheckFailed(
                f"shard_inputs returned {name} as a {item['type']}, not as a jax.Array placed on the mesh",
                measured=item["type"], expected="jax.Array",
                hint="jax.device_put(array, NamedSharding(mesh, spec)) returns the placed jax.Array",
            )
    for name, kept in zip(NAMES, result["values_kept"]):
        if not kept:
            raise CheckFailed(
                f"shard_inputs changed {name}: its values, shape or dtype differ from what was passed in",
                measured=f"{name} changed", expected=f"{name} unchanged (only its placement changes)",
                hint="placing an array must not transpose, cast or modify it",
            )
    mesh_ids = {i for row in result["mesh"]["device_ids"] for i in row}
    at = "" if mesh_shape is None else f"{where(mesh_shape)}: "
    for name, record in zip(NAMES, result["inputs"]):
        ids = {b[0] for b in record["blocks"]}
        if ids != mesh_ids:
            raise CheckFailed(
                f"{at}{name} is not spread over the mesh you were given",
                measured=f"{name} lives on {len(ids)} device(s)" + (f": {record['text']}" if mesh_shape is None else ""),
                expected=f"every input on all {len(mesh_ids)} devices of the mesh",
                hint="build each NamedSharding from the `mesh` argument of shard_inputs"
                     + ("" if mesh_shape is None else " and jax.device_put with it"),
            )
        if mesh_shape is not None:
            expect_on_given_mesh(name, record, mesh_shape)

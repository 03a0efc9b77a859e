"""Exercise 4 (Megatron-style PartitionSpecs): judging what ``ex04_megatron:run_on_mesh``
measured (and ``ex04_megatron:read_specs`` read), shared by the public and the hidden checks.
NumPy only, no JAX."""

from __future__ import annotations

import numpy as np

from grader.feedback import CheckFailed, expect_array
from grader.ir import collective_counts, collective_shapes
# naming a layout without naming a size: the kit's, named here for the checks and their tests
from grader.layouts import (CANDIDATE_AXES, OTHER_LAYOUT, describe_axes, has_layout, layout_blocks,  # noqa: F401
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


# --- the properties, judged the same way by the public and the hidden checks -----------------
#
# Each ``check_*`` takes the mesh shape, the host arrays, what ``run_on_mesh`` measured and a
# label naming the mesh for the diagnosis ("on the 2x4 mesh"), and raises CheckFailed.  Messages
# name the mesh and the layout in words, never a drawn size or value.

F32_BYTES = 4
#: The Megatron layout: which mesh axis splits each array dimension (None: not split).
LAYOUT = {"x": ("data", None), "w1": (None, "model"), "w2": ("model", None), "out": ("data", None)}

ADVICE = {
    "x": "x holds the batch: split its rows (the examples) over 'data' and keep its columns (the features) whole",
    "w1": "w1 is column parallel: split its columns (the hidden units) over 'model', keep its rows whole",
    "w2": "w2 is row parallel: split its rows (the same hidden units) over 'model', keep its columns whole",
}


def describe_record(record, with_spec=True):
    """'rows split in 2, columns whole (P('data', None))' -- for the measured field."""
    parts = []
    for label, n, s in zip(("rows", "columns"), record["global_shape"], record["shard_shape"]):
        parts.append(f"{label} whole" if n == s else f"{label} split in {n // s}")
    spec = record["spec"] if record["spec"] is not None else record["kind"]
    return ", ".join(parts) + (f" ({spec})" if with_spec else "")


def describe_expected(axes, mesh_shape):
    size = {"data": mesh_shape[0], "model": mesh_shape[1]}
    parts = []
    for label, axis in zip(("rows", "columns"), axes):
        if axis is None or size[axis] == 1:
            parts.append(f"{label} whole")
        else:
            parts.append(f"{label} split in {size[axis]} over '{axis}'")
    return ", ".join(parts)


def off_layout(result):
    """The inputs not laid out the Megatron way: [(name, what they are, in words that name no size)]."""
    return [(name, recognise(record, result, LAYOUT[name])) for name, record in zip(NAMES, result["inputs"])
            if not has_layout(record, LAYOUT[name], result)]


def inputs_text(off):
    return "; ".join(f"{name} has {what}" for name, what in off)


def fail(message, *, measured, expected, diagnosis, advice):
    raise CheckFailed(message, measured=measured, expected=expected, hint=advice, diagnosis=diagnosis, advice=advice)


def expect_layout(name, record, mesh_shape, result, label):
    expect_on_given_mesh(name, record, mesh_shape, label)
    if not has_layout(record, LAYOUT[name], result):
        fail(f"{where(mesh_shape)}: {name} is not laid out the Megatron way",
             measured=f"{name}: {describe_record(record)}",
             expected=f"{name}: {describe_expected(LAYOUT[name], mesh_shape)}",
             diagnosis=f"{label}: {name} has {recognise(record, result, LAYOUT[name])}, not the Megatron layout "
                       f"({describe_axes(LAYOUT[name])})", advice=ADVICE[name])


def check_numerics(mesh_shape, arrays, result, label):
    expect_placed(result, mesh_shape, label)
    x, w1, w2 = arrays
    what = f"mlp(x, w1, w2) {where(mesh_shape)}"
    try:
        out = expect_array(result["output"], shape=(x.shape[0], w2.shape[1]), dtype="float32", what=what)
    except CheckFailed as exc:
        exc.diagnosis = f"{label}: the forward pass does not give a float32 array of the output's shape"
        exc.advice = "keep mlp as given and return the three arrays from shard_inputs unchanged"
        raise
    reference = mlp_reference(x, w1, w2)
    if not np.all(np.isfinite(out)) or not np.allclose(out, reference, rtol=1e-4, atol=1e-4):
        fail(f"{what} does not match the unsharded MLP",
             measured=f"largest difference {float(np.nanmax(np.abs(out - reference))):.3g}",
             expected="agreement within rtol=1e-4, atol=1e-4",
             diagnosis=f"{label}: the sharded forward pass gives other numbers than the unsharded MLP",
             advice="the layout must not change the numbers: keep mlp as given and place the arrays unchanged")


def check_output(mesh_shape, arrays, result, label):
    expect_placed(result, mesh_shape, label)
    record = result["output_sharding"]
    expect_on_given_mesh("the output", record, mesh_shape, label)
    if has_layout(record, LAYOUT["out"], result):
        return
    off = off_layout(result)
    diagnosis = (f"{label}: the output has {recognise(record, result, LAYOUT['out'])}, not rows split over "
                 f"'data' and columns whole")
    if off:
        diagnosis += f"; inputs off the Megatron layout: {inputs_text(off)}"
    fail(f"{where(mesh_shape)}: the output is not split over 'data' and whole across 'model'",
         measured=f"output: {describe_record(record)}",
         expected=f"output: {describe_expected(LAYOUT['out'], mesh_shape)}, the same on every 'model' device",
         diagnosis=diagnosis,
         advice="; ".join(ADVICE[name] for name, _ in off) or "x's rows go over 'data'; the weights' hidden-unit "
                                                             "axis goes over 'model'")


def check_collectives(mesh_shape, arrays, result, label):
    expect_placed(result, mesh_shape, label)
    found = {op: n for op, n in collective_counts(result["hlo"]).items() if n}
    want = {"all-reduce": 1} if mesh_shape[1] > 1 else {}
    if found == want:
        x, _, w2 = arrays
        block = (x.shape[0] // mesh_shape[0], w2.shape[1])  # one device's block of the output
        summed = [shape for shapes in collective_shapes(result["hlo"], "all-reduce") for shape in shapes]
        if want and summed != [block]:
            off = off_layout(result)
            fail(f"{where(mesh_shape)}: the one all-reduce sums a {summed} value, not the output's block {block}",
                 measured=f"the all-reduce's result in the optimized HLO: {summed}",
                 expected=f"one all-reduce of the output's block {block}, after the second matmul",
                 diagnosis=f"{label}: the compiled forward pass holds one all-reduce, but it completes a partial sum "
                           f"of another shape than the output (the hidden layer's, before the ReLU), not the second "
                           f"matmul's" + (f"; inputs off the Megatron layout: {inputs_text(off)}" if off else ""),
                 advice="; ".join(ADVICE[name] for name, _ in off) or
                        "split the hidden units (w1's columns, w2's rows) over 'model': the second matmul then "
                        "leaves each device a partial sum of the output, which the one all-reduce completes")
        return
    listing = ", ".join(f"{op} x{n}" for op, n in found.items()) or "no collective"
    expected = ("exactly one all-reduce over 'model' and no other collective" if want else
                "no collective at all (the 'model' axis has one device: nothing needs summing)")
    off = off_layout(result)
    diagnosis = f"{label}: the compiled forward pass holds {listing}; expected {expected}"
    if off:
        diagnosis += f"; inputs off the Megatron layout: {inputs_text(off)}"
        advice = "; ".join(ADVICE[name] for name, _ in off)
    elif found.get("all-reduce", 0) > 1:
        advice = "only the second matmul's contraction (the hidden units) should be split over 'model'"
    else:
        advice = ("split the hidden units (w1's columns, w2's rows) over 'model', so that each device holds a "
                  "partial sum that one all-reduce completes")
    fail(f"{where(mesh_shape)}: the compiled forward pass does not communicate like Megatron's MLP",
         measured="collectives in the optimized HLO: " + listing, expected=expected, diagnosis=diagnosis,
         advice=advice)


def check_weights(mesh_shape, arrays, result, label):
    expect_placed(result, mesh_shape, label)
    x_rec, w1_rec, w2_rec = result["inputs"]
    expect_layout("w1", w1_rec, mesh_shape, result, label)
    expect_layout("w2", w2_rec, mesh_shape, result, label)
    # A second, independent signal: the bytes XLA itself says each device receives.
    _, w1, w2 = arrays
    m = mesh_shape[1]
    want = F32_BYTES * (w1.shape[0] * (w1.shape[1] // m) + (w2.shape[0] // m) * w2.shape[1])
    x_bytes = F32_BYTES * int(np.prod(x_rec["shard_shape"]))
    got = result["argument_bytes"] - x_bytes
    if got != want:
        more = got > want
        fail(f"{where(mesh_shape)}: each device receives {'more' if more else 'fewer'} weight bytes than "
             f"the Megatron split gives it",
             measured=f"weights take {got / want:.2f}x the bytes of their Megatron shards "
                      f"(from compiled.memory_analysis().argument_size_in_bytes)",
             expected=f"each device holds 1/{m} of w1 and 1/{m} of w2",
             diagnosis=f"{label}: the compiled program hands each device {'more' if more else 'fewer'} weight "
                       f"bytes than the Megatron split (1/m of w1 and 1/m of w2 on each of the m 'model' devices)",
             advice="split both weights over 'model': w1 by columns, w2 by rows")


SPEC_WORDS = {"x": 'P("data", None)', "w1": 'P(None, "model")', "w2": 'P("model", None)'}


def check_specs(mesh_shape, specs, result, label):
    """``partition_specs()`` (read by ``ex04_megatron:read_specs`` on this mesh and shapes) gives the
    Megatron layout, and ``shard_inputs`` placed each input (``result["inputs"]``) with its spec.

    Both are judged by the blocks each device holds, so ``P("data")`` and ``P("data", None)`` are
    the same answer; on a mesh with both axes larger than one device no other spec is."""
    expect_placed(result, mesh_shape, label)
    if specs["keys"] is None or not set(NAMES) <= set(specs["keys"]):
        advice = 'return {"x": P(...), "w1": P(...), "w2": P(...)}: one PartitionSpec per input'
        fail("partition_specs() should return a dict with the keys 'x', 'w1' and 'w2'",
             measured=f"a {specs['type']}" + ("" if specs["keys"] is None else f" with keys {specs['keys']}"),
             expected="a dict {'x': P(...), 'w1': P(...), 'w2': P(...)}",
             diagnosis="partition_specs() does not return a dict with the keys 'x', 'w1' and 'w2'", advice=advice)
    for name, placed in zip(NAMES, result["inputs"]):
        spec = specs["specs"][name]
        if "layout" not in spec:
            advice = (f"partition_specs()[{name!r}] should be a jax.sharding.PartitionSpec naming the mesh axes "
                      f"'data' and 'model', one entry per array axis")
            fail(f"partition_specs()[{name!r}] is not a PartitionSpec usable on the mesh",
                 measured=spec.get("error") or f"a {spec['type']}: {spec['text']}",
                 expected=f"a PartitionSpec such as {SPEC_WORDS[name]}",
                 diagnosis=f"partition_specs()[{name!r}] is not a PartitionSpec usable on a ('data', 'model') mesh",
                 advice=advice)
        layout = spec["layout"]
        if not has_layout(layout, LAYOUT[name], result):
            fail(f"partition_specs()[{name!r}] is not the Megatron spec",
                 measured=f"partition_specs()[{name!r}] = {spec['text']}, which gives "
                          f"{describe_record(layout, with_spec=False)} {where(mesh_shape)}",
                 expected=f"{name}: {describe_expected(LAYOUT[name], mesh_shape)}",
                 diagnosis=f"partition_specs()[{name!r}] gives {recognise(layout, result, LAYOUT[name])}, not the "
                           f"Megatron layout ({describe_axes(LAYOUT[name])})",
                 advice=ADVICE[name])
        if measured_blocks(placed) != measured_blocks(layout):
            advice = ("place each input with NamedSharding(mesh, partition_specs()[name]): shard_inputs should use "
                      "the specs partition_specs() returns")
            fail(f"{where(mesh_shape)}: shard_inputs does not place {name} with partition_specs()[{name!r}]",
                 measured=f"{name} placed: {describe_record(placed)}; its spec gives {describe_record(layout)}",
                 expected=f"{name} laid out as partition_specs()[{name!r}] says",
                 diagnosis=f"{label}: shard_inputs places {name} with {recognise(placed, result, LAYOUT[name])}, "
                           f"not as partition_specs()[{name!r}] says", advice=advice)

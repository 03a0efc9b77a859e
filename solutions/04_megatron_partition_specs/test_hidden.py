"""Hidden checks for exercise 4: Megatron-style PartitionSpecs on meshes the grader builds.

Two probe runs, each one lower + compile + run, shared through module-scoped fixtures:
the 2x4 mesh, and a second mesh shape drawn at grading time.  Shapes and values are
drawn at grading time too (all sizes are multiples of 8, so every layout a learner may
try divides evenly, and the batch is never the public checks' 16).  The probe measures;
the checks below decide from the measurements, computing what to expect from the shapes
and the mesh, never from numbers copied from one JAX version.
"""

import zlib

import numpy as np
import pytest

from grader.checks.ex04_megatron import expect_on_given_mesh, expect_placed, mlp_reference, where
from grader.feedback import CheckFailed, expect_array, expect_close
from grader.ir import collective_counts

PRIMARY_MESH = (2, 4)
SECOND_MESHES = ((4, 2), (1, 8), (8, 1))
F32_BYTES = 4
# Megatron layout: which mesh axis splits each array dimension (None: not split).
LAYOUT = {"x": ("data", None), "w1": (None, "model"), "w2": ("model", None), "out": ("data", None)}


def draw_problem(rng):
    b = int(rng.choice([24, 32, 40, 48]))
    d = int(rng.choice([8, 16, 24]))
    h = int(rng.choice([32, 40, 48, 64]))  # wider than o, as in a real MLP (see README)
    o = int(rng.choice([8, 16, 24]))
    x = rng.normal(size=(b, d)).astype(np.float32)
    w1 = (rng.normal(size=(d, h)) / np.sqrt(d)).astype(np.float32)
    w2 = (rng.normal(size=(h, o)) / np.sqrt(h)).astype(np.float32)
    return x, w1, w2


def run_probe(submission, mesh_shape, arrays):
    return submission.probe("ex04_megatron:run_on_mesh", list(mesh_shape), *arrays)


@pytest.fixture(scope="module")
def primary(submission, seed):
    arrays = draw_problem(np.random.default_rng([seed, zlib.crc32(b"ex04-hidden-primary")]))
    return PRIMARY_MESH, arrays, run_probe(submission, PRIMARY_MESH, arrays)


@pytest.fixture(scope="module")
def second(submission, seed):
    rng = np.random.default_rng([seed, zlib.crc32(b"ex04-hidden-second")])
    mesh_shape = SECOND_MESHES[int(rng.integers(len(SECOND_MESHES)))]
    arrays = draw_problem(rng)
    return mesh_shape, arrays, run_probe(submission, mesh_shape, arrays)


# --- reading the measurements -------------------------------------------------------------

def expected_blocks(shape, axes, result):
    """Device id -> [[start, stop] per dimension] that ``axes`` implies on the grader's mesh."""
    d, m = result["mesh"]["shape"]
    blocks = {}
    for i, row in enumerate(result["mesh"]["device_ids"]):
        for j, dev in enumerate(row):
            position = {"data": (i, d), "model": (j, m)}
            spans = []
            for n, axis in zip(shape, axes):
                if axis is None:
                    spans.append([0, n])
                else:
                    k, parts = position[axis]
                    spans.append([k * n // parts, (k + 1) * n // parts])
            blocks[dev] = spans
    return blocks


def measured_blocks(record):
    return {dev: spans for dev, spans in record["blocks"]}


def describe(record):
    """'rows split in 2, columns whole (spec P('data', None))' -- no sizes revealed."""
    parts = []
    for label, n, s in zip(("rows", "columns"), record["global_shape"], record["shard_shape"]):
        parts.append(f"{label} whole" if n == s else f"{label} split in {n // s}")
    spec = record["spec"] if record["spec"] is not None else record["kind"]
    return ", ".join(parts) + f" ({spec})"


def describe_expected(axes, mesh_shape):
    size = {"data": mesh_shape[0], "model": mesh_shape[1]}
    parts = []
    for label, axis in zip(("rows", "columns"), axes):
        if axis is None or size[axis] == 1:
            parts.append(f"{label} whole")
        else:
            parts.append(f"{label} split in {size[axis]} over '{axis}'")
    return ", ".join(parts)


def expect_layout(name, record, axes, mesh_shape, result, hint):
    expect_on_given_mesh(name, record, mesh_shape)
    if measured_blocks(record) != expected_blocks(record["global_shape"], axes, result):
        raise CheckFailed(
            f"{where(mesh_shape)}: {name} is not laid out the Megatron way",
            measured=f"{name}: {describe(record)}", expected=f"{name}: {describe_expected(axes, mesh_shape)}",
            hint=hint,
        )


# --- the properties -----------------------------------------------------------------------

def check_numerics(mesh_shape, arrays, result):
    expect_placed(result, mesh_shape)
    x, w1, w2 = arrays
    what = f"mlp(x, w1, w2) {where(mesh_shape)}"
    out = expect_array(result["output"], shape=(x.shape[0], w2.shape[1]), dtype="float32", what=what)
    reference = mlp_reference(x, w1, w2)
    expect_close(out, reference, rtol=1e-4, atol=1e-4, what=what,
                 hint="the layout must not change the numbers: keep mlp as given and place the arrays unchanged")


def check_output(mesh_shape, arrays, result):
    expect_placed(result, mesh_shape)
    record = result["output_sharding"]
    expect_on_given_mesh("the output", record, mesh_shape)
    if measured_blocks(record) != expected_blocks(record["global_shape"], LAYOUT["out"], result):
        split_cols = record["shard_shape"][1] != record["global_shape"][1]
        whole_rows = record["shard_shape"][0] == record["global_shape"][0] and mesh_shape[0] > 1
        if split_cols:
            hint = ("each device ends up with only some output columns: w2 is split along its columns. Split w2 "
                    "along its rows (the hidden units) so the second matmul sums partial results instead")
        elif whole_rows:
            hint = "every device computes the whole batch: split x's rows (the batch) over 'data'"
        else:
            hint = "x's rows go over 'data'; the weights' hidden-unit axis goes over 'model'"
        raise CheckFailed(
            f"{where(mesh_shape)}: the output is not split over 'data' and whole across 'model'",
            measured=f"output: {describe(record)}",
            expected=f"output: {describe_expected(LAYOUT['out'], mesh_shape)}, the same on every 'model' device",
            hint=hint,
        )


def check_collectives(mesh_shape, arrays, result):
    expect_placed(result, mesh_shape)
    found = {op: n for op, n in collective_counts(result["hlo"]).items() if n}
    want = {"all-reduce": 1} if mesh_shape[1] > 1 else {}
    if found != want:
        if found.get("all-to-all"):
            hint = ("an all-to-all re-splits an array between the matmuls: w1 is probably split along its rows "
                    "(its contraction axis). Split w1 along its columns (the hidden units) instead")
        elif found.get("all-gather"):
            hint = ("an all-gather rebuilds a split array: usually w2 split along its columns, so the hidden "
                    "activations have to be gathered. Split w2 along its rows (the hidden units)")
        elif found.get("all-reduce", 0) > 1:
            hint = "more than one sum across devices: only the second matmul's contraction should be split"
        else:
            hint = ("the hidden units (w1's columns, w2's rows) must be split over 'model' so that each device "
                    "holds a partial sum that one all-reduce completes")
        raise CheckFailed(
            f"{where(mesh_shape)}: the compiled forward pass does not communicate like Megatron's MLP",
            measured="collectives in the optimized HLO: " + (", ".join(f"{op} x{n}" for op, n in found.items()) or "none"),
            expected=("exactly one all-reduce over 'model' and no other collective" if want else
                      "no collective at all (the 'model' axis has one device)"),
            hint=hint,
        )


def check_weights(mesh_shape, arrays, result):
    expect_placed(result, mesh_shape)
    x_rec, w1_rec, w2_rec = result["inputs"]
    expect_layout("w1", w1_rec, LAYOUT["w1"], mesh_shape, result,
                  hint="column parallel: w1 = P(None, 'model') splits its columns (the hidden units) over 'model'")
    expect_layout("w2", w2_rec, LAYOUT["w2"], mesh_shape, result,
                  hint="row parallel: w2 = P('model', None) splits its rows (the same hidden units) over 'model'")
    # A second, independent signal: the bytes XLA itself says each device receives.
    _, w1, w2 = arrays
    m = mesh_shape[1]
    want = F32_BYTES * (w1.shape[0] * (w1.shape[1] // m) + (w2.shape[0] // m) * w2.shape[1])
    x_bytes = F32_BYTES * int(np.prod(x_rec["shard_shape"]))
    got = result["argument_bytes"] - x_bytes
    if got != want:
        raise CheckFailed(
            f"{where(mesh_shape)}: each device receives {'more' if got > want else 'fewer'} weight bytes than "
            f"the Megatron split gives it",
            measured=f"weights take {got / want:.2f}x the bytes of their Megatron shards "
                     f"(from compiled.memory_analysis().argument_size_in_bytes)",
            expected="each device holds 1/{m} of w1 and 1/{m} of w2".format(m=m),
            hint="split both weights over 'model': w1 by columns, w2 by rows",
        )


# --- the checks ---------------------------------------------------------------------------

def test_numerics_match_unsharded(primary):
    check_numerics(*primary)


def test_output_sharding(primary):
    check_output(*primary)


def test_one_all_reduce_no_gather(primary):
    check_collectives(*primary)


def test_weights_really_sharded(primary):
    check_weights(*primary)


def test_second_mesh_shape(second):
    for check in (check_numerics, check_output, check_weights, check_collectives):
        check(*second)

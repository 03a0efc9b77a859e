"""Hidden checks for exercise 4: Megatron-style PartitionSpecs on meshes the grader builds.

Two probe runs, each one lower + compile + run, shared through module-scoped fixtures:
the 2x4 mesh, and a second mesh shape drawn at grading time.  Shapes and values are
drawn at grading time too (all sizes are multiples of 8, so every layout a learner may
try divides evenly, and the batch is never the public checks' 16).  The probe measures;
the checks below decide from the measurements, computing what to expect from the shapes
and the mesh, never from numbers copied from one JAX version.  A failure tells the learner
which mesh (the 2x4 one, or "the second mesh shape", never its drawn size), what the
compiled program holds or how an array is laid out, and which inputs are off the Megatron
layout -- in words that name no size or value.
"""

import numpy as np
import pytest

from grader.exercises.ex04_megatron.judges import (describe_axes, expect_on_given_mesh, expect_placed, has_layout,
                                         mlp_reference, recognise, where)
from grader.coverage import Coverage, check_rng, ensure
from grader.feedback import CheckFailed, expect_array, fail
from grader.layouts import draw_mlp as draw_problem
from grader.ir import collective_counts

PRIMARY_MESH = (2, 4)
SECOND_MESHES = ((4, 2), (1, 8), (8, 1))
F32_BYTES = 4
NAMES = ("x", "w1", "w2")
# Megatron layout: which mesh axis splits each array dimension (None: not split).
LAYOUT = {"x": ("data", None), "w1": (None, "model"), "w2": ("model", None), "out": ("data", None)}
PRIMARY_TEST, SECOND_TEST = "test_numerics_match_unsharded", "test_second_mesh_shape"
PRIMARY_LABEL, SECOND_LABEL = "on the 2x4 mesh", "on the second mesh shape"  # the second one's size is drawn


def draw_second(rng):
    mesh_shape = SECOND_MESHES[int(rng.integers(len(SECOND_MESHES)))]
    return mesh_shape, draw_problem(rng)


def problem_labels(rng, second=False):
    mesh_shape, (x, w1, w2) = draw_second(rng) if second else (PRIMARY_MESH, draw_problem(rng))
    out = set()
    if all(n % 8 == 0 for a in (x, w1, w2) for n in a.shape):
        out.add("every size a multiple of 8")
    if x.shape[0] != 16:
        out.add("batch unlike the public one")
    if w1.shape[1] > w2.shape[1]:
        out.add("hidden wider than the output")
    if second and mesh_shape != PRIMARY_MESH:
        out.add("a mesh shape other than 2x4")
    return out


PROBLEM = {"every size a multiple of 8", "batch unlike the public one", "hidden wider than the output"}
COVERAGE = {
    "numerics_match_unsharded": Coverage(required=PROBLEM, labels=problem_labels, test=PRIMARY_TEST),
    "second_mesh_shape": Coverage(required=PROBLEM | {"a mesh shape other than 2x4"},
                                  labels=lambda rng: problem_labels(rng, second=True), test=SECOND_TEST),
}


def run_probe(submission, mesh_shape, arrays):
    return submission.probe("ex04_megatron:run_on_mesh", list(mesh_shape), *arrays)


@pytest.fixture(scope="module")
def primary(submission, seed):
    ensure("numerics_match_unsharded", PROBLEM, problem_labels(check_rng(seed, PRIMARY_TEST)))
    arrays = draw_problem(check_rng(seed, PRIMARY_TEST))
    return PRIMARY_MESH, arrays, run_probe(submission, PRIMARY_MESH, arrays), PRIMARY_LABEL


@pytest.fixture(scope="module")
def second(submission, seed):
    ensure("second_mesh_shape", COVERAGE["second_mesh_shape"].required,
           problem_labels(check_rng(seed, SECOND_TEST), second=True))
    mesh_shape, arrays = draw_second(check_rng(seed, SECOND_TEST))
    return mesh_shape, arrays, run_probe(submission, mesh_shape, arrays), SECOND_LABEL


# --- reading the measurements -------------------------------------------------------------

def describe_record(record):
    """'rows split in 2, columns whole (spec P('data', None))' -- for the instructor."""
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


ADVICE = {
    "x": "x holds the batch: split its rows (the examples) over 'data' and keep its columns (the features) whole",
    "w1": "w1 is column parallel: split its columns (the hidden units) over 'model', keep its rows whole",
    "w2": "w2 is row parallel: split its rows (the same hidden units) over 'model', keep its columns whole",
}


def off_layout(result):
    """The inputs not laid out the Megatron way: [(name, what they are, in words that name no size)]."""
    return [(name, recognise(record, result, LAYOUT[name])) for name, record in zip(NAMES, result["inputs"])
            if not has_layout(record, LAYOUT[name], result)]


def inputs_text(off):
    return "; ".join(f"{name} has {what}" for name, what in off)


def expect_layout(name, record, mesh_shape, result, label):
    expect_on_given_mesh(name, record, mesh_shape, label)
    if not has_layout(record, LAYOUT[name], result):
        fail(f"{where(mesh_shape)}: {name} is not laid out the Megatron way",
             measured=f"{name}: {describe_record(record)}",
             expected=f"{name}: {describe_expected(LAYOUT[name], mesh_shape)}",
             diagnosis=f"{label}: {name} has {recognise(record, result, LAYOUT[name])}, not the Megatron layout "
                       f"({describe_axes(LAYOUT[name])})", advice=ADVICE[name])


# --- the properties -----------------------------------------------------------------------

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
        return
    listing = ", ".join(f"{op} x{n}" for op, n in found.items()) or "no collective"
    off = off_layout(result)
    expected = ("exactly one all-reduce and nothing else" if label == PRIMARY_LABEL else
                "what Megatron's MLP needs there: one all-reduce over 'model' and nothing else (no collective "
                "at all when 'model' has a single device)")
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
         measured="collectives in the optimized HLO: " + listing,
         expected=("exactly one all-reduce over 'model' and no other collective" if want else
                   "no collective at all (the 'model' axis has one device)"),
         diagnosis=diagnosis, advice=advice)


def check_weights(mesh_shape, arrays, result, label):
    expect_placed(result, mesh_shape, label)
    _, w1_rec, w2_rec = result["inputs"]
    expect_layout("w1", w1_rec, mesh_shape, result, label)
    expect_layout("w2", w2_rec, mesh_shape, result, label)
    # A second, independent signal: the bytes XLA itself says each device receives.
    x_rec = result["inputs"][0]
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
             expected="each device holds 1/{m} of w1 and 1/{m} of w2".format(m=m),
             diagnosis=f"{label}: the compiled program hands each device {'more' if more else 'fewer'} weight "
                       f"bytes than the Megatron split (1/m of w1 and 1/m of w2 on each of the m 'model' devices)",
             advice="split both weights over 'model': w1 by columns, w2 by rows")


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

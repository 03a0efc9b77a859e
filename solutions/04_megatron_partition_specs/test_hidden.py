"""Hidden checks for exercise 4: Megatron-style PartitionSpecs on meshes the grader builds.

Probe runs, each one lower + compile + run, shared through module-scoped fixtures: the 2x4
mesh, and each of the other mesh shapes (4x2, 1x8, 8x1), every one at every seed: a layout
that is wrong on 2x4 is wrong on 4x2 too (both axes hold several devices there), so
`other_mesh_shapes` never pays out for a layout judged wrong on 2x4, whatever the seed.
Shapes and values are drawn at grading time (all sizes are multiples of 8, so every layout
a learner may try divides evenly, and the batch is never the public checks' 16).  The probe
measures; the judges (``grader.exercises.ex04_megatron.judges``, shared with the public
checks) decide from the measurements, computing what to expect from the shapes and the
mesh, never from numbers copied from one JAX version.  A failure tells the learner which
mesh, what the compiled program holds or how an array is laid out, and which inputs are off
the Megatron layout -- in words that name no drawn size or value.
"""

import pytest

from grader.coverage import Coverage, check_rng, ensure
from grader.layouts import draw_mlp as draw_problem  # exercise 4's MLP problem, shared by 4, 17, 18
from grader.exercises.ex04_megatron.judges import (check_collectives, check_numerics, check_output, check_specs,
                                                   check_weights, where)

PRIMARY_MESH = (2, 4)
OTHER_MESHES = ((4, 2), (1, 8), (8, 1))
PRIMARY_TEST, OTHER_TEST = "test_numerics_match_unsharded", "test_other_mesh_shapes"
PRIMARY_LABEL = where(PRIMARY_MESH)


def draw_others(rng):
    """One problem per other mesh shape: [(mesh_shape, (x, w1, w2))]."""
    return [(mesh_shape, draw_problem(rng)) for mesh_shape in OTHER_MESHES]


def _problem_labels(x, w1, w2):
    out = set()
    if all(n % 8 == 0 for a in (x, w1, w2) for n in a.shape):
        out.add("every size a multiple of 8")
    if x.shape[0] != 16:
        out.add("batch unlike the public one")
    if w1.shape[1] > w2.shape[1]:
        out.add("hidden wider than the output")
    return out


def problem_labels(rng):
    return _problem_labels(*draw_problem(rng))


def other_labels(rng):
    draws = draw_others(rng)
    out = set.intersection(*(_problem_labels(*arrays) for _, arrays in draws))
    for (d, m), _ in draws:
        if d > 1 and m > 1:
            out.add("a mesh other than 2x4 with several devices on both axes")
        if m == 1:
            out.add("a mesh whose 'model' axis has one device")
        if d == 1:
            out.add("a mesh whose 'data' axis has one device")
    return out


PROBLEM = {"every size a multiple of 8", "batch unlike the public one", "hidden wider than the output"}
OTHERS = PROBLEM | {"a mesh other than 2x4 with several devices on both axes", "a mesh whose 'model' axis has one device",
                    "a mesh whose 'data' axis has one device"}
COVERAGE = {
    "numerics_match_unsharded": Coverage(required=PROBLEM, labels=problem_labels, test=PRIMARY_TEST),
    "other_mesh_shapes": Coverage(required=OTHERS, labels=other_labels, test=OTHER_TEST),
}


def run_probe(submission, mesh_shape, arrays):
    return submission.probe("ex04_megatron:run_on_mesh", list(mesh_shape), *arrays)


def read_specs(submission, mesh_shape, arrays):
    return submission.probe("ex04_megatron:read_specs", list(mesh_shape), [list(a.shape) for a in arrays])


@pytest.fixture(scope="module")
def primary(submission, seed):
    ensure("numerics_match_unsharded", PROBLEM, problem_labels(check_rng(seed, PRIMARY_TEST)))
    arrays = draw_problem(check_rng(seed, PRIMARY_TEST))
    return PRIMARY_MESH, arrays, run_probe(submission, PRIMARY_MESH, arrays), PRIMARY_LABEL


@pytest.fixture(scope="module")
def others(submission, seed):
    ensure("other_mesh_shapes", OTHERS, other_labels(check_rng(seed, OTHER_TEST)))
    return [(mesh_shape, arrays, run_probe(submission, mesh_shape, arrays), where(mesh_shape))
            for mesh_shape, arrays in draw_others(check_rng(seed, OTHER_TEST))]


# --- the checks ---------------------------------------------------------------------------

def test_numerics_match_unsharded(primary):
    check_numerics(*primary)


def test_output_sharding(primary):
    check_output(*primary)


def test_one_all_reduce_no_gather(primary):
    check_collectives(*primary)


def test_weights_really_sharded(primary):
    check_weights(*primary)


def test_partition_specs_megatron(submission, primary):
    mesh_shape, arrays, result, label = primary
    check_specs(mesh_shape, read_specs(submission, mesh_shape, arrays), result, label)


def test_other_mesh_shapes(submission, others):
    for mesh_shape, arrays, result, label in others:
        for check in (check_numerics, check_output, check_weights, check_collectives):
            check(mesh_shape, arrays, result, label)
        check_specs(mesh_shape, read_specs(submission, mesh_shape, arrays), result, label)

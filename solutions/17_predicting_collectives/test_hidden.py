"""Hidden checks for exercise 17: layouts, FSDP problems and a second mesh shape drawn at grading time.

Part A: each check asks for all nine layouts its kind of x has, in an order drawn from the
seed (``judges.draw_layouts``): every weight layout and every pair its ``COVERAGE`` names,
whatever the seed.  The
learner's predictions run in a worker where JAX does not exist (``without_jax``,
``grader.sandbox.nojax``), so neither the call nor the file's import can compile a layout and
look its answer up; the truth is the MLP compiled with each layout in the clean worker, at grading
time (``ex17_collectives:truth_collectives``).

Part B: one FSDP run on the 2x4 mesh and one on a second mesh shape, each a lower + compile +
run of ``fsdp_mlp`` on inputs placed with ``fsdp_specs()`` (module-scoped fixtures shared by
the checks); sizes are drawn (multiples of 8, the batch never the public 16).  Feedback names
the mesh ("the second mesh shape", never its size), the failing step, the inputs off the FSDP
layout and the collectives found, in words that name no size.
"""

import numpy as np
import pytest

from grader.coverage import Coverage, check_rng, ensure
from grader.exercises.ex17_collectives.judges import (REQUIRED, draw_fsdp_problem, draw_labels, draw_layouts,
                                                      judge_fsdp_bytes, judge_fsdp_gathers, judge_fsdp_numerics,
                                                      judge_fsdp_output, judge_predictions, predictions)

PRIMARY_MESH = (2, 4)
SECOND_MESHES = ((4, 2), (1, 8), (8, 1))
PRIMARY_LABEL, SECOND_LABEL = "on the 2x4 mesh", "on the second mesh shape"
FSDP_TEST, SECOND_TEST = "test_fsdp_matches", "test_fsdp_second_mesh"


def fsdp_labels(rng, second=False):
    mesh_shape = SECOND_MESHES[int(rng.integers(len(SECOND_MESHES)))] if second else PRIMARY_MESH
    x, w1, w2 = draw_fsdp_problem(rng)
    out = set()
    if all(n % 8 == 0 for a in (x, w1, w2) for n in a.shape):
        out.add("every size a multiple of 8")
    if x.shape[0] != 16:
        out.add("batch unlike the public one")
    if second and mesh_shape != PRIMARY_MESH:
        out.add("a mesh shape other than 2x4")
    return out


FSDP_REQUIRED = {"every size a multiple of 8", "batch unlike the public one"}
COVERAGE = {
    "predicts_batch_split": Coverage(required=REQUIRED["batch"], labels=lambda rng: draw_labels(
        draw_layouts(rng, "batch")), test="test_predicts_batch_split"),
    "predicts_feature_split": Coverage(required=REQUIRED["features"], labels=lambda rng: draw_labels(
        draw_layouts(rng, "features")), test="test_predicts_feature_split"),
    "fsdp_matches": Coverage(required=FSDP_REQUIRED, labels=fsdp_labels, test=FSDP_TEST),
    "fsdp_second_mesh": Coverage(required=FSDP_REQUIRED | {"a mesh shape other than 2x4"},
                                 labels=lambda rng: fsdp_labels(rng, second=True), test=SECOND_TEST),
}


# --- part A ------------------------------------------------------------------------------------------

def judge_drawn(without_jax, truth, rng, x_kind, check):
    layouts = draw_layouts(rng, x_kind)
    ensure(check, REQUIRED[x_kind], draw_labels(layouts))
    got = predictions(without_jax, layouts)
    truths = truth.probe("ex17_collectives:truth_collectives", layouts)
    judge_predictions(got, truths, layouts, hidden=True)


def test_predicts_batch_split(without_jax, truth, rng):
    judge_drawn(without_jax, truth, rng, "batch", "predicts_batch_split")


def test_predicts_feature_split(without_jax, truth, rng):
    judge_drawn(without_jax, truth, rng, "features", "predicts_feature_split")


# --- part B ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def primary(submission, seed):
    ensure("fsdp_matches", FSDP_REQUIRED, fsdp_labels(check_rng(seed, FSDP_TEST)))
    arrays = draw_fsdp_problem(check_rng(seed, FSDP_TEST))
    return PRIMARY_MESH, arrays, submission.probe("ex17_collectives:run_fsdp", list(PRIMARY_MESH), *arrays)


@pytest.fixture(scope="module")
def second(submission, seed):
    rng = check_rng(seed, SECOND_TEST)
    ensure("fsdp_second_mesh", COVERAGE["fsdp_second_mesh"].required,
           fsdp_labels(check_rng(seed, SECOND_TEST), second=True))
    mesh_shape = SECOND_MESHES[int(rng.integers(len(SECOND_MESHES)))]
    arrays = draw_fsdp_problem(rng)
    return mesh_shape, arrays, submission.probe("ex17_collectives:run_fsdp", list(mesh_shape), *arrays)


def test_fsdp_matches(primary):
    mesh_shape, arrays, result = primary
    judge_fsdp_numerics(result, arrays, mesh_shape, PRIMARY_LABEL)


def test_fsdp_bytes_per_device(primary):
    mesh_shape, arrays, result = primary
    judge_fsdp_bytes(result, arrays, mesh_shape, PRIMARY_LABEL)


def test_fsdp_gathers_weights(primary):
    mesh_shape, _, result = primary
    judge_fsdp_gathers(result, mesh_shape, PRIMARY_LABEL)


def test_fsdp_output_sharding(primary):
    mesh_shape, _, result = primary
    judge_fsdp_output(result, mesh_shape, PRIMARY_LABEL)


def test_fsdp_second_mesh(second):
    mesh_shape, arrays, result = second
    judge_fsdp_numerics(result, arrays, mesh_shape, SECOND_LABEL)
    judge_fsdp_bytes(result, arrays, mesh_shape, SECOND_LABEL)
    judge_fsdp_gathers(result, mesh_shape, SECOND_LABEL)
    judge_fsdp_output(result, mesh_shape, SECOND_LABEL)

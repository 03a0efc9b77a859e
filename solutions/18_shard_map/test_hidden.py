"""Hidden checks for exercise 18: every part on the 2x4 mesh and on a second mesh shape drawn at
grading time (4x2, 1x8 or 8x1), on sizes and values drawn at grading time.

Each (part, mesh) is one probe run -- trace, lower, compile, run -- shared by the checks through
module-scoped fixtures.  Sizes are multiples of 8 (the batch never the public 16); the ring's
blocks have a drawn width.  References are float64 NumPy (the gradient by hand).  Feedback names
the mesh ("the second mesh shape", never its size) and what was found, never a drawn size.
"""

import numpy as np
import pytest

from grader.coverage import Coverage, check_rng, ensure
from grader.exercises.ex18_shard_map.judges import (draw_dp, draw_mlp, draw_ring, judge_check_vma, judge_device_work,
                                                    judge_dp_collectives, judge_dp_numerics,
                                                    judge_megatron_collectives, judge_megatron_numerics,
                                                    judge_ring_collectives, judge_ring_numerics)

PRIMARY_MESH = (2, 4)
SECOND_MESHES = ((4, 2), (1, 8), (8, 1))
PRIMARY_LABEL, SECOND_LABEL = "on the 2x4 mesh", "on the second mesh shape"
SECOND_TEST = "test_second_mesh_shape"


def draw_all(rng, mesh_shape):
    return {"megatron": draw_mlp(rng), "ring": draw_ring(rng, mesh_shape[1]), "dp": draw_dp(rng)}


def labels(rng, second=False):
    mesh_shape = SECOND_MESHES[int(rng.integers(len(SECOND_MESHES)))] if second else PRIMARY_MESH
    drawn = draw_all(rng, mesh_shape)
    out = set()
    arrays = [*drawn["megatron"], drawn["dp"][1], drawn["dp"][2], *drawn["dp"][0].values()]
    if all(n % 8 == 0 for a in arrays for n in a.shape):
        out.add("every MLP size a multiple of 8")
    if drawn["megatron"][0].shape[0] != 16 and drawn["dp"][1].shape[0] != 16:
        out.add("batches unlike the public one")
    if drawn["ring"].shape[0] == mesh_shape[1]:
        out.add("one ring block per 'model' device")
    if second and mesh_shape != PRIMARY_MESH:
        out.add("a mesh shape other than 2x4")
    return out


REQUIRED = {"every MLP size a multiple of 8", "batches unlike the public one", "one ring block per 'model' device"}
PRIMARY_TEST = "test_megatron_matches"  # the primary draw is seeded by this check's name, and shared
COVERAGE = {
    "megatron_matches": Coverage(required=REQUIRED, labels=labels, test=PRIMARY_TEST),
    "second_mesh_shape": Coverage(required=REQUIRED | {"a mesh shape other than 2x4"},
                                  labels=lambda rng: labels(rng, second=True), test=SECOND_TEST),
}


def run_all(submission, reference, mesh_shape, drawn):
    """Each part's probe run, and what one device of the reference solution computes in parts A
    and C on the same mesh and arrays (``device_work``: traced only)."""
    shape = list(mesh_shape)
    work = {part: reference.submit("probe", "ex18_shard_map:device_work", part, shape, *drawn[part])
            for part in ("megatron", "dp")}
    results = {"megatron": submission.probe("ex18_shard_map:run_megatron", shape, *drawn["megatron"]),
               "ring": submission.probe("ex18_shard_map:run_ring", shape, drawn["ring"]),
               "dp": submission.probe("ex18_shard_map:run_dp", shape, *drawn["dp"])}
    results["work"] = {part: reference.result(rid) for part, rid in work.items()}
    return results


@pytest.fixture(scope="module")
def primary(submission, reference, seed):
    ensure("megatron_matches", REQUIRED, labels(check_rng(seed, PRIMARY_TEST)))
    drawn = draw_all(check_rng(seed, PRIMARY_TEST), PRIMARY_MESH)
    return drawn, run_all(submission, reference, PRIMARY_MESH, drawn)


@pytest.fixture(scope="module")
def second(submission, reference, seed):
    ensure("second_mesh_shape", COVERAGE["second_mesh_shape"].required,
           labels(check_rng(seed, SECOND_TEST), second=True))
    rng = check_rng(seed, SECOND_TEST)
    mesh_shape = SECOND_MESHES[int(rng.integers(len(SECOND_MESHES)))]
    drawn = draw_all(rng, mesh_shape)
    return mesh_shape, drawn, run_all(submission, reference, mesh_shape, drawn)


def test_megatron_matches(primary):
    drawn, results = primary
    judge_megatron_numerics(results["megatron"], drawn["megatron"], PRIMARY_MESH, PRIMARY_LABEL)


def test_megatron_one_all_reduce(primary):
    _, results = primary
    judge_megatron_collectives(results["megatron"], PRIMARY_MESH, PRIMARY_LABEL)
    judge_device_work(results["megatron"], results["work"]["megatron"], "megatron_mlp", PRIMARY_MESH, PRIMARY_LABEL)


def test_ring_matches(primary):
    drawn, results = primary
    judge_ring_numerics(results["ring"], drawn["ring"], PRIMARY_MESH, PRIMARY_LABEL)


def test_ring_only_permutes(primary):
    _, results = primary
    judge_ring_collectives(results["ring"], PRIMARY_MESH, PRIMARY_LABEL)


def test_dp_matches_full_batch(primary):
    drawn, results = primary
    judge_dp_numerics(results["dp"], drawn["dp"], PRIMARY_MESH, PRIMARY_LABEL)


def test_dp_only_all_reduce(primary):
    _, results = primary
    judge_dp_collectives(results["dp"], PRIMARY_MESH, PRIMARY_LABEL)
    judge_device_work(results["dp"], results["work"]["dp"], "data_parallel_grads", PRIMARY_MESH, PRIMARY_LABEL)


def test_keeps_check_vma(primary):
    _, results = primary
    judge_check_vma({"megatron_mlp": results["megatron"], "data_parallel_grads": results["dp"]}, PRIMARY_MESH,
                    PRIMARY_LABEL)


def test_second_mesh_shape(second):
    mesh_shape, drawn, results = second
    judge_megatron_numerics(results["megatron"], drawn["megatron"], mesh_shape, SECOND_LABEL)
    judge_megatron_collectives(results["megatron"], mesh_shape, SECOND_LABEL)
    judge_device_work(results["megatron"], results["work"]["megatron"], "megatron_mlp", mesh_shape, SECOND_LABEL)
    judge_ring_numerics(results["ring"], drawn["ring"], mesh_shape, SECOND_LABEL)
    judge_ring_collectives(results["ring"], mesh_shape, SECOND_LABEL)
    judge_dp_numerics(results["dp"], drawn["dp"], mesh_shape, SECOND_LABEL)
    judge_dp_collectives(results["dp"], mesh_shape, SECOND_LABEL)
    judge_device_work(results["dp"], results["work"]["dp"], "data_parallel_grads", mesh_shape, SECOND_LABEL)
    judge_check_vma({"megatron_mlp": results["megatron"], "data_parallel_grads": results["dp"]}, mesh_shape,
                    SECOND_LABEL)

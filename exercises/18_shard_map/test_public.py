"""Public checks for exercise 18 (run by `grade exercise 18`; they carry no points).

Each part once on the 2x4 mesh with fixed shapes: the Megatron MLP (x 16x8, w1 8x32, w2 32x8),
the ring on four blocks of 6 numbers, the data-parallel gradient of loss_fn on that MLP with
y 16x8.  The hidden checks ask the same on sizes drawn at grading time, and again on a second
mesh shape.
"""

import zlib

import numpy as np

from grader.exercises.ex18_shard_map.judges import (judge_check_vma, judge_device_work, judge_dp_collectives,
                                                    judge_dp_numerics,
                                                    judge_megatron_collectives, judge_megatron_numerics,
                                                    judge_ring_collectives, judge_ring_numerics)

MESH = (2, 4)
LABEL = "on the 2x4 mesh"


def _rng(seed, part):
    return np.random.default_rng([seed, zlib.crc32(f"ex18-public-{part}".encode())])


def _mlp(rng):
    return (rng.normal(size=(16, 8)).astype(np.float32), (rng.normal(size=(8, 32)) / 3).astype(np.float32),
            (rng.normal(size=(32, 8)) / 6).astype(np.float32))


def _reference_work(reference, part, *arrays):
    """What one device of the reference solution computes (None where it is not at hand)."""
    return reference.probe("ex18_shard_map:device_work", part, list(MESH), *arrays) if reference is not None else None


def test_megatron_small(submission, reference, seed):
    arrays = _mlp(_rng(seed, "megatron"))
    result = submission.probe("ex18_shard_map:run_megatron", list(MESH), *arrays)
    judge_megatron_numerics(result, arrays, MESH, LABEL)
    judge_megatron_collectives(result, MESH, LABEL)
    work = _reference_work(reference, "megatron", *arrays)
    if work is not None:
        judge_device_work(result, work, "megatron_mlp", MESH, LABEL)
    judge_check_vma({"megatron_mlp": result}, MESH, LABEL)


def test_ring_small(submission, seed):
    x = _rng(seed, "ring").normal(size=(4, 6)).astype(np.float32)
    result = submission.probe("ex18_shard_map:run_ring", list(MESH), x)
    judge_ring_numerics(result, x, MESH, LABEL)
    judge_ring_collectives(result, MESH, LABEL)


def test_dp_small(submission, reference, seed):
    rng = _rng(seed, "dp")
    x, w1, w2 = _mlp(rng)
    problem = ({"w1": w1, "w2": w2}, x, rng.normal(size=(16, 8)).astype(np.float32))
    result = submission.probe("ex18_shard_map:run_dp", list(MESH), *problem)
    judge_dp_numerics(result, problem, MESH, LABEL)
    judge_dp_collectives(result, MESH, LABEL)
    work = _reference_work(reference, "dp", *problem)
    if work is not None:
        judge_device_work(result, work, "data_parallel_grads", MESH, LABEL)
    judge_check_vma({"data_parallel_grads": result}, MESH, LABEL)

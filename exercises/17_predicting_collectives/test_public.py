"""Public checks for exercise 17 (run by `grade exercise 17`; they carry no points).

Part A: seven fixed layouts of the family, one per rule of the statement; the predictions run in
a worker where JAX does not exist, the truth is the MLP compiled with each layout in a clean
process, and a wrong prediction shows what it holds.
Part B: the FSDP layout on the 2x4 mesh with B, D, H, O = 16, 8, 32, 8.  The hidden checks ask
the same on layouts, shapes and a mesh shape drawn at grading time.
"""

import zlib

import numpy as np
import pytest

from grader.exercises.ex17_collectives.judges import (PUBLIC_LAYOUTS, judge_fsdp_bytes, judge_fsdp_gathers,
                                                      judge_fsdp_numerics, judge_fsdp_output, judge_predictions,
                                                      predictions)

MESH = (2, 4)
B, D, H, O = 16, 8, 32, 8


def test_predicts_public_layouts(without_jax, truth):
    got = predictions(without_jax, PUBLIC_LAYOUTS)  # where JAX does not exist: a prediction, not a measurement
    truths = truth.probe("ex17_collectives:truth_collectives", PUBLIC_LAYOUTS)
    judge_predictions(got, truths, PUBLIC_LAYOUTS, hidden=False)


@pytest.fixture(scope="module")
def fsdp(submission, seed):
    rng = np.random.default_rng([seed, zlib.crc32(b"ex17-public")])
    x = rng.normal(size=(B, D)).astype(np.float32)
    w1 = (rng.normal(size=(D, H)) / np.sqrt(D)).astype(np.float32)
    w2 = (rng.normal(size=(H, O)) / np.sqrt(H)).astype(np.float32)
    return (x, w1, w2), submission.probe("ex17_collectives:run_fsdp", list(MESH), x, w1, w2)


def test_fsdp_on_2x4(fsdp):
    arrays, result = fsdp
    label = "on the 2x4 mesh"
    judge_fsdp_numerics(result, arrays, MESH, label)
    judge_fsdp_bytes(result, arrays, MESH, label)
    judge_fsdp_gathers(result, MESH, label)
    judge_fsdp_output(result, MESH, label)

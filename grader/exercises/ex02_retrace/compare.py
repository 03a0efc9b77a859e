"""What ``grade compare`` measures for exercise 2 (diagnosing retraces): ``SPEC``, its measurements
and their fixed inputs (``grader.compare.specs`` documents the kinds and collects every ``SPEC``)."""

from __future__ import annotations

import numpy as np

from grader.compare.specs import ExerciseSpec, Measurement, call, f32, seeded_rng


def _retrace_params(rng: np.random.Generator) -> dict:
    return {"embed": f32(rng, 20, 8), "w": f32(rng, 8), "b": np.asarray(rng.normal(), np.float32)}


def _padded_batch(rng: np.random.Generator, length: int, width: int) -> tuple:
    tokens = np.zeros((4, width), np.int32)
    tokens[:, :length] = rng.integers(0, 20, size=(4, length))
    targets = np.zeros((4, width), np.float32)
    targets[:, :length] = rng.normal(size=(4, length))
    mask = np.zeros((4, width), np.float32)
    mask[:, :length] = 1.0
    return tokens, targets, mask


def _train_step_calls() -> dict:
    rng = seeded_rng(2)
    params = _retrace_params(rng)
    calls = [call(params, *_padded_batch(rng, n, 16), lr=lr) for n, lr in ((11, 0.1), (14, 0.05), (9, 0.02))]
    return {"kind": "jax", "target": "train_step", "calls": calls}


def _pad_calls() -> dict:
    rng = seeded_rng(3)
    calls = []
    for length in (11, 16, 3):
        tokens = rng.integers(0, 20, size=(4, length)).astype(np.int32)
        calls.append(call(tokens, f32(rng, 4, length), (8, 16, 32, 64)))
    return {"kind": "value", "target": "pad_to_bucket", "numpy": True, "calls": calls}


SPEC = ExerciseSpec(
    "retrace-diagnosis",
    (Measurement("train_step", _train_step_calls), Measurement("pad_to_bucket", _pad_calls, False)),
    source_functions=("pad_to_bucket",),
    note="train_step's jaxpr and compile count over three learning rates; pad_to_bucket by its normalised source")

"""What ``grade compare`` measures for exercise 7 (the training lab): ``SPEC``, its measurements
and their fixed inputs (``grader.compare.specs`` documents the kinds and collects every ``SPEC``)."""

from __future__ import annotations

from typing import Callable

import numpy as np

from grader.compare.specs import ExerciseSpec, Measurement, call, f32, seeded_rng


_LAB_CONSTANTS = (0.05, 1.0, 0.01)  # LEARNING_RATE, CLIP_NORM, WEIGHT_DECAY: the statement fixes them


def _lab_params(rng: np.random.Generator) -> list:
    return [{"w": f32(rng, 4, 8), "b": f32(rng, 8)}, {"w": f32(rng, 8, 3), "b": f32(rng, 3)}]


def _lab_batch(rng: np.random.Generator) -> tuple:
    return f32(rng, 6, 4), rng.integers(0, 3, size=6).astype(np.int32)


def _lab_calls(target: str) -> Callable[[], dict]:
    def payload() -> dict:
        rng = seeded_rng(7)
        calls = [call(_lab_params(rng), *_lab_batch(rng)) for _ in range(3)]
        return {"kind": "jax", "target": target, "calls": calls}
    return payload


def _lab_opt_state(params: list) -> list:
    """The learner's own optimizer state for ``params``: made in the sandbox (optax's state
    is not plain data), afresh for every call since train_step donates it."""
    return [{"target": "make_optimizer", "args": list(_LAB_CONSTANTS), "method": "init", "method_args": [params]}]


def _lab_step_calls() -> dict:
    rng = seeded_rng(8)
    batches = [(_lab_params(rng), *_lab_batch(rng)) for _ in range(3)]
    calls = [call(params, {"built": 0}, x, y) for params, x, y in batches]
    return {"kind": "jax", "target": "train_step", "build": _lab_opt_state(batches[0][0]), "calls": calls}


def _lab_report_calls() -> dict:
    rng = seeded_rng(9)
    params, (x, y) = _lab_params(rng), _lab_batch(rng)
    return {"kind": "value", "target": "report", "build": _lab_opt_state(params),
            "calls": [call(params, {"built": 0}, x, y)]}


def _lab_init_calls() -> dict:
    key = np.asarray([0, 7], np.uint32)  # a raw (uint32[2]) key: a jax.random.key is not plain data
    return {"kind": "value", "target": "init_params", "calls": [call(key, (4, 8, 3))]}


SPEC = ExerciseSpec(
    "training-lab",
    (Measurement("loss_fn", _lab_calls("loss_fn")), Measurement("per_example", _lab_calls("per_example")),
     Measurement("train_step", _lab_step_calls), Measurement("init_params", _lab_init_calls, False),
     Measurement("report", _lab_report_calls, False)),
    note="the jaxprs of loss_fn, per_example and train_step (optimizer state from the learner's own "
         "make_optimizer, donation and compile count) on a [4, 8, 3] MLP, batch of 6")

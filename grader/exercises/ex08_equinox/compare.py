"""What ``grade compare`` measures for exercise 8 (Equinox modules): ``SPEC``, its measurements
and their fixed inputs (``grader.compare.specs`` documents the kinds and collects every ``SPEC``)."""

from __future__ import annotations

import numpy as np

from grader.compare.specs import ExerciseSpec, Measurement, call, f32, seeded_rng


_EQX_MODEL = {"target": "make_model", "args": [[3, 5, 5, 2], "tanh", 0.25, 8]}  # two hidden layers, dropout on


def _eqx_key(n: int) -> np.ndarray:
    return np.asarray([0, n], np.uint32)  # a raw key: jax.random.key(...) cannot cross as plain data


def _eqx_step_calls() -> dict:
    rng = seeded_rng(10)
    calls = [call({"built": 0}, {"built": 1}, f32(rng, 6, 3), f32(rng, 6, 2), _eqx_key(n)) for n in range(3)]
    return {"kind": "jax", "target": "train_step", "calls": calls,
            "build": [_EQX_MODEL, {"target": "init_opt_state", "args": [{"built": 0}]}]}


def _eqx_predict_calls() -> dict:
    rng = seeded_rng(11)
    calls = [call({"built": 0}, f32(rng, 6, 3), _eqx_key(n)) for n in range(3)]
    return {"kind": "jax", "target": "predict", "build": [_EQX_MODEL], "calls": calls}


def _eqx_weights_calls() -> dict:
    return {"kind": "value", "target": "weights", "build": [_EQX_MODEL], "calls": [call({"built": 0})]}


SPEC = ExerciseSpec(
    "equinox-modules",
    (Measurement("train_step", _eqx_step_calls), Measurement("predict", _eqx_predict_calls),
     Measurement("weights", _eqx_weights_calls, False)),
    note="the jaxprs and compile counts of train_step and predict on a model make_model builds in the "
         "sandbox ([3, 5, 5, 2], tanh, dropout 0.25), the model's array leaves traced")

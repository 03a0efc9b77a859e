"""What ``grade compare`` measures for exercise 1 (counting recompilations): ``SPEC``, its measurements
and their fixed inputs (``grader.compare.specs`` documents the kinds and collects every ``SPEC``)."""

from __future__ import annotations

import numpy as np

from grader.compare.specs import ExerciseSpec, Measurement, call, f32, seeded_rng


def _score_calls() -> dict:
    rng = seeded_rng(1)
    calls = [call(f32(rng, 4, 6), 0.7, 0.5),
             call(f32(rng, 4, 6), 1.3, np.asarray(0.25, np.float32)),  # shift as a 0-d array
             call(f32(rng, 4, 6), 0.9, -0.5)]
    return {"kind": "jax", "target": "score", "static": {"mode": "entropy"}, "calls": calls}


def _predict_compiles_calls() -> dict:
    x3 = {"array": "float32", "shape": [3]}
    x4 = {"array": "float32", "shape": [4]}
    sequences = [
        [call(x3, 0.5), call(x3, 2.0), call(x4, 0.5)],
        [call(x3, 0.5), call(x3, 0.5, mode="max"), call(x3, 0.5, "max"), call({**x3, "numpy": True}, 1.0)],
        [call({"tuple": [x3, 1]}, 1.0), call({"dict": {"b": x3, "a": 2.0}}, 1.0),
         call({"array": "int32", "shape": [3]}, 1.0)],
    ]
    return {"kind": "value", "target": "predict_compiles", "numpy": True, "calls": [call(s) for s in sequences]}


SPEC = ExerciseSpec(
    "recompile-counting",
    (Measurement("score", _score_calls), Measurement("predict_compiles", _predict_compiles_calls, False)),
    source_functions=("predict_compiles",),
    note="score's jaxpr and compile count (shift sent as a float and as an array); "
         "predict_compiles by its normalised source")

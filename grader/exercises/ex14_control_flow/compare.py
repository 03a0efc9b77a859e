"""What ``grade compare`` measures for exercise 14 (control flow under jit): ``SPEC``, its
measurements and their fixed inputs (``grader.compare.specs`` documents the kinds and collects
every ``SPEC``)."""

from __future__ import annotations

import numpy as np

from grader.compare.specs import ExerciseSpec, Measurement, call, f32, seeded_rng


def _switch_calls() -> dict:
    x = f32(seeded_rng(141), 6)
    return {"kind": "jax", "target": "apply_branch", "calls": [call(i, x) for i in (1, 0, 2, -1, 5)]}


def _piecewise_calls(transform: str = "") -> dict:
    x = f32(seeded_rng(142), 6)
    x = x if float(x.sum()) > 0 else -x
    spec = {"kind": "jax", "target": "piecewise", "calls": [call(x), call(-x), call(np.float32(2.0) * x)]}
    if transform:
        spec.update(transform=transform, argnums=[0])
    return spec


def _sqrt_calls(transform: str = "") -> dict:
    x = np.float32([-2.0, -0.0, 0.0, 1e-30, 0.25, 4.0])
    spec = {"kind": "jax", "target": "safe_sqrt", "calls": [call(x), call(x[::-1].copy())]}
    if transform:
        spec.update(transform=transform, argnums=[0])
    return spec


SPEC = ExerciseSpec(
    "control-flow-under-jit",
    (Measurement("apply_branch", _switch_calls), Measurement("piecewise", _piecewise_calls),
     Measurement("grad of piecewise", lambda: _piecewise_calls("grad")), Measurement("safe_sqrt", _sqrt_calls),
     Measurement("grad of safe_sqrt", lambda: _sqrt_calls("grad")),
     Measurement("answers", lambda: {"kind": "value", "target": "answers", "calls": [call()]}, False)),
    note="apply_branch's jaxpr and compile count over five indices, piecewise's and safe_sqrt's jaxprs and those "
         "of their gradients (where vs cond, single vs double where); the answers side by side")

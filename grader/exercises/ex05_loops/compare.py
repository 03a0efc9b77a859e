"""What ``grade compare`` measures for exercise 5 (while_loop vs scan): ``SPEC``, its measurements
and their fixed inputs (``grader.compare.specs`` documents the kinds and collects every ``SPEC``)."""

from __future__ import annotations

import numpy as np

from grader.compare.specs import ExerciseSpec, Measurement, call, f32, seeded_rng


def _scan_calls(transform: str = "") -> dict:
    rng = seeded_rng(6)
    calls = [call(np.asarray(theta, np.float32), f32(rng, 4)) for theta in (0.6, -0.4, 0.3)]
    spec = {"kind": "jax", "target": "scan_version", "static": {"max_steps": 20}, "calls": calls}
    if transform:
        spec.update(transform=transform, argnums=[0, 1])
    return spec


SPEC = ExerciseSpec(
    "while-loop-vs-scan",
    (Measurement("scan_version", _scan_calls), Measurement("grad of scan_version", lambda: _scan_calls("grad"))),
    note="scan_version's jaxpr (max_steps = 20) and that of its reverse-mode gradient")

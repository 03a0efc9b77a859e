"""What ``grade compare`` measures for exercise 5 (while_loop vs scan): ``SPEC``, its measurements
and their fixed inputs, and the strategies an instructor names (``grader.compare.specs`` documents the
kinds and collects every ``SPEC``; ``grader.compare.features`` the features the predicates read)."""

from __future__ import annotations

import numpy as np

from grader.compare.features import Features
from grader.compare.specs import ExerciseSpec, Measurement, call, f32, seeded_rng
from grader.compare.strategy import Strategy

MAX_STEPS, GROWN_MAX_STEPS = 20, 35


def _scan_calls(transform: str = "") -> dict:
    rng = seeded_rng(6)
    calls = [call(np.asarray(theta, np.float32), f32(rng, 4)) for theta in (0.6, -0.4, 0.3)]
    spec = {"kind": "jax", "target": "scan_version", "static": {"max_steps": MAX_STEPS}, "calls": calls,
            "grow": {"call": calls[0], "static": {"max_steps": GROWN_MAX_STEPS}}}
    if transform:
        spec.update(transform=transform, argnums=[0, 1])
    return spec


def _forward(f: Features):
    return f.part("scan_version")


def _while_inside(f: Features) -> bool:
    return any(c.split(" ")[0] == "while" for c in _forward(f).constructs)


STRATEGIES = (
    Strategy("Python loop over the steps", lambda f: bool(_forward(f).grows),
             "the program grows with max_steps: a Python loop unrolled into it"),
    Strategy("custom_vjp around a while loop", lambda f: _while_inside(f) and any(
        p.startswith("custom_vjp") for p in _forward(f).primitives),
             "a while loop inside a custom_vjp (reverse mode supplied by hand)"),
    Strategy("while loop (no reverse mode)", _while_inside, "a while loop in the forward program"),
    Strategy("scan over the steps", lambda f: any(c.split(" ")[0] == "scan" for c in _forward(f).constructs),
             "a scan, no while and no unrolling; the steps after convergence frozen"),
)

SPEC = ExerciseSpec(
    "while-loop-vs-scan",
    (Measurement("scan_version", _scan_calls), Measurement("grad of scan_version", lambda: _scan_calls("grad"))),
    note="scan_version's jaxpr (max_steps = 20, and 35 to see how it grows) and that of its reverse-mode gradient",
    strategies=STRATEGIES)

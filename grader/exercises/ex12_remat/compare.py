"""What ``grade compare`` measures for exercise 12 (remat and donation): ``SPEC``, its measurements
and their fixed inputs (``grader.compare.specs`` documents the kinds and collects every ``SPEC``)."""

from __future__ import annotations

import numpy as np

from grader.compare.specs import ExerciseSpec, Measurement, call, f32, seeded_rng


def _remat_model(rng: np.random.Generator) -> tuple:
    """Five blocks of width 8 (segments of 2 leave a shorter last one), a batch of 4."""
    params = [{"w": f32(rng, 8, 8) / np.float32(np.sqrt(8.0)), "b": f32(rng, 8) * np.float32(0.1)}
              for _ in range(5)]
    return params, f32(rng, 4, 8), f32(rng, 4, 8)


def _remat_calls(transform: str = "") -> dict:
    rng = seeded_rng(12)
    calls = [call(*_remat_model(rng)) for _ in range(3)]
    spec = {"kind": "jax", "target": "remat_loss", "static": {"segment": 2}, "calls": calls}
    if transform:
        spec.update(transform=transform, argnums=[0])
    return spec


def _momentum_step_calls() -> dict:
    rng = seeded_rng(13)
    calls = []
    for lr, beta in ((0.05, 0.9), (0.1, 0.8), (0.02, 0.5)):  # new lr and beta each call: traced, one compile
        params, x, y = _remat_model(rng)
        momentum = [{"w": f32(rng, 8, 8), "b": f32(rng, 8)} for _ in params]
        calls.append(call(params, momentum, x, y, lr, beta))
    return {"kind": "jax", "target": "train_step", "calls": calls}


def _choose_segment_calls() -> dict:
    params, x, y = _remat_model(seeded_rng(14))
    # Budgets between the residual bytes segments of 1..5 keep on this model (JAX 0.10.2): the
    # smallest fitting sizes are 1, 2, 3 and 5 (2212, 1956, 1828 and 1700 bytes; 3 and 4 both make
    # two segments).
    return {"kind": "value", "target": "choose_segment",
            "calls": [call(params, x, y, budget) for budget in (2300, 2000, 1900, 1750)]}


SPEC = ExerciseSpec(
    "remat-and-donation",
    (Measurement("remat_loss", _remat_calls), Measurement("grad of remat_loss", lambda: _remat_calls("grad")),
     Measurement("train_step", _momentum_step_calls),
     Measurement("choose_segment", _choose_segment_calls, False)),
    note="remat_loss's jaxpr and its gradient's (5 blocks, segment 2), train_step's jaxpr, donation and "
         "compile count over three lr/beta; choose_segment's answers for four budgets side by side")

"""What ``grade compare`` measures for exercise 15 (PRNG discipline): ``SPEC``, its measurements and
their fixed inputs (``grader.compare.specs`` documents the kinds and collects every ``SPEC``).

Keys are legacy ``uint32[2]`` keys here (plain data carries no typed key); the jaxprs show how
each function splits and draws: one ``random_split`` for every layer or a chain of them, a
``bernoulli`` or a ``uniform`` comparison, one ``random_bits`` under ``vmap`` or one per example."""

from __future__ import annotations

import numpy as np

from grader.compare.specs import ExerciseSpec, Measurement, call, f32, seeded_rng


def _key(seed: int) -> np.ndarray:
    return np.uint32([0, seed])  # what jax.random.PRNGKey(seed) holds


def _init_calls() -> dict:
    return {"kind": "jax", "target": "init_mlp", "static": {"sizes": [6, 16, 4]},
            "calls": [call(_key(s)) for s in (1, 2, 3)]}


def _dropout_calls() -> dict:
    x = np.abs(f32(seeded_rng(151), 8, 16)) + np.float32(0.5)
    return {"kind": "jax", "target": "dropout", "static": {"rate": 0.25, "training": True},
            "calls": [call(_key(s), x) for s in (1, 2)]}


def _epoch_calls() -> dict:
    rng = seeded_rng(152)
    params = [{"w": f32(rng, 3, 16) / np.float32(np.sqrt(3.0)), "b": np.zeros(16, np.float32)},
              {"w": f32(rng, 16, 1) / np.float32(4.0), "b": np.zeros(1, np.float32)}]
    batches = [(f32(rng, 8, 3), f32(rng, 8, 1)) for _ in range(3)]
    return {"kind": "jax", "target": "train_epoch", "static": {"rate": 0.25, "lr": 0.1},
            "calls": [call(_key(s), params, batches) for s in (1, 2)]}


def _noise_calls() -> dict:
    xs = f32(seeded_rng(153), 5, 3)
    return {"kind": "jax", "target": "per_example_noise", "calls": [call(_key(s), xs) for s in (1, 2)]}


SPEC = ExerciseSpec(
    "prng-discipline",
    (Measurement("init_mlp", _init_calls), Measurement("dropout", _dropout_calls),
     Measurement("train_epoch", _epoch_calls), Measurement("per_example_noise", _noise_calls)),
    note="each function's jaxpr on a legacy key (how keys are split and threaded, how masks and noise are "
         "drawn) and its outputs side by side; train_epoch over three batches, per_example_noise on five examples")

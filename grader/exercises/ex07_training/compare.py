"""What ``grade compare`` measures for exercise 7 (the training lab): ``SPEC``, its measurements
and their fixed inputs (``grader.compare.specs`` documents the kinds and collects every ``SPEC``)."""

from __future__ import annotations

from typing import Callable

import numpy as np

from grader.compare.features import Features
from grader.compare.specs import ExerciseSpec, Measurement, call, f32, seeded_rng
from grader.compare.strategy import Strategy


_LAB_CONSTANTS = (0.05, 1.0, 0.01)  # LEARNING_RATE, CLIP_NORM, WEIGHT_DECAY: the statement fixes them


def _lab_params(rng: np.random.Generator) -> list:
    return [{"w": f32(rng, 4, 8), "b": f32(rng, 8)}, {"w": f32(rng, 8, 3), "b": f32(rng, 3)}]


BATCH, GROWN_BATCH = 6, 11


def _lab_batch(rng: np.random.Generator, batch: int = BATCH) -> tuple:
    return f32(rng, batch, 4), rng.integers(0, 3, size=batch).astype(np.int32)


def _lab_calls(target: str) -> Callable[[], dict]:
    def payload() -> dict:
        rng = seeded_rng(7)
        calls = [call(_lab_params(rng), *_lab_batch(rng)) for _ in range(3)]
        grown = call(_lab_params(rng), *_lab_batch(rng, GROWN_BATCH))
        return {"kind": "jax", "target": target, "calls": calls, "grow": {"call": grown}}
    return payload


def _lab_opt_state(params: list) -> list:
    """The learner's own optimizer state for ``params``: made in the sandbox (optax's state
    is not plain data), afresh for every call since train_step donates it."""
    return [{"target": "make_optimizer", "args": list(_LAB_CONSTANTS), "method": "init", "method_args": [params]}]


def _lab_step_calls() -> dict:
    rng = seeded_rng(8)
    batches = [(_lab_params(rng), *_lab_batch(rng)) for _ in range(3)]
    calls = [call(params, {"built": 0}, x, y) for params, x, y in batches]
    grown = call(batches[0][0], {"built": 0}, *_lab_batch(rng, GROWN_BATCH))
    return {"kind": "jax", "target": "train_step", "build": _lab_opt_state(batches[0][0]), "calls": calls,
            "grow": {"call": grown}}


def _lab_update_calls() -> dict:
    """The optimizer alone: ``make_optimizer(...).update(grads, state, params)``, so the order of
    its stages (clip, Adam's moments, weight decay, the learning rate) is measured by itself."""
    rng = seeded_rng(15)
    params = _lab_params(rng)
    calls = [call(_lab_params(rng), {"built": 1}, params) for _ in range(2)]
    build = [{"target": "make_optimizer", "args": list(_LAB_CONSTANTS)}, *_lab_opt_state(params)]
    # run under the grader's jit: run eagerly, each of its ~70 operations compiles alone
    return {"kind": "jax", "target": {"built": 0, "method": "update"}, "build": build, "calls": calls, "jit": True}


def _lab_report_calls() -> dict:
    rng = seeded_rng(9)
    params, (x, y) = _lab_params(rng), _lab_batch(rng)
    return {"kind": "value", "target": "report", "build": _lab_opt_state(params),
            "calls": [call(params, {"built": 0}, x, y)]}


def _lab_init_calls() -> dict:
    key = np.asarray([0, 7], np.uint32)  # a raw (uint32[2]) key: a jax.random.key is not plain data
    return {"kind": "value", "target": "init_params", "calls": [call(key, (4, 8, 3))]}


def _stage(f: Features, family: str) -> float | None:
    """Where the optimizer's work of ``family`` sits in its update (0 first, 1 last)."""
    return dict(f.part("optimizer update").order).get(family)


def _clips_last(f: Features) -> bool:
    norm, adam = _stage(f, "reduction"), _stage(f, "transcendental")
    return norm is not None and adam is not None and norm > adam


STRATEGIES = (
    Strategy("metric: a Python loop over the examples", lambda f: bool(f.part("per_example").grows),
             "per_example grows with the batch"),
    Strategy("metric on the whole batch, no vmap",
             lambda f: f.part("per_example").state == "ok"
             and not any("vmap" in x.split("·") for x in f.part("per_example").forms),
             "per_example's equations were made by no vmap"),
    Strategy("train_step compiled afresh on every call", lambda f: f.part("train_step").compiles == "again",
             "calling train_step again with the same shapes compiles again"),
    Strategy("optimizer clips each element (no global norm)",
             lambda f: f.part("optimizer update").state == "ok" and _stage(f, "reduction") is None,
             "the optimizer's update has no reduction: nothing computes a global norm"),
    Strategy("optimizer: AdamW, then clip", _clips_last,
             "the optimizer's global norm comes after Adam's square roots"),
    Strategy("optax chain (clip, then AdamW), vmapped metric, one compile",
             lambda f: f.part("optimizer update").state == "ok" and not _clips_last(f),
             "the global norm first, then Adam; per_example under vmap"),
)

SPEC = ExerciseSpec(
    "training-lab",
    (Measurement("loss_fn", _lab_calls("loss_fn")), Measurement("per_example", _lab_calls("per_example")),
     Measurement("train_step", _lab_step_calls), Measurement("optimizer update", _lab_update_calls),
     Measurement("init_params", _lab_init_calls, False),
     Measurement("report", _lab_report_calls, False)),
    note="the jaxprs of loss_fn, per_example and train_step (optimizer state from the learner's own "
         "make_optimizer, donation and compile count) and of the optimizer's update alone, on a [4, 8, 3] MLP, "
         "batch of 6 (and 11, to see how they grow)",
    strategies=STRATEGIES)

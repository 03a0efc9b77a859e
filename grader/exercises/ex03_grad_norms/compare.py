"""What ``grade compare`` measures for exercise 3 (per-example gradient norms): ``SPEC``, its measurements
and their fixed inputs (``grader.compare.specs`` documents the kinds and collects every ``SPEC``)."""

from __future__ import annotations

from grader.compare.specs import ExerciseSpec, Measurement, call, f32, seeded_rng


def _grad_norm_calls() -> dict:
    rng = seeded_rng(4)

    def params() -> dict:
        return {"layers": [{"w": f32(rng, 5, 8), "b": f32(rng, 8)}, {"w": f32(rng, 8, 8), "b": f32(rng, 8)}],
                "out": {"w": f32(rng, 8, 3), "b": f32(rng, 3)}}

    calls = [call(params(), f32(rng, 6, 5), f32(rng, 6, 3)) for _ in range(3)]
    return {"kind": "jax", "target": "per_example_grad_norms", "calls": calls}


SPEC = ExerciseSpec(
    "per-example-grad-norms",
    (Measurement("per_example_grad_norms", _grad_norm_calls),),
    note="per_example_grad_norms's jaxpr and compile count on a two-layer MLP, batch of 6")

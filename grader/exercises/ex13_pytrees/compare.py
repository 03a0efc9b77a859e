"""What ``grade compare`` measures for exercise 13 (pure functions and pytrees): ``SPEC``, its
measurements and their fixed inputs (``grader.compare.specs`` documents the kinds and collects
every ``SPEC``).  Plain data carries dicts, lists, tuples and ``None`` but no namedtuple, so the
fixed trees here hold those only."""

from __future__ import annotations

from grader.compare.specs import ExerciseSpec, Measurement, call, f32, seeded_rng


def _tree(rng) -> dict:
    return {"w": f32(rng, 3, 2), "b": [f32(rng, 2), None, (f32(rng), f32(rng, 4))], "a": {"scale": f32(rng, 1)}}


def _shapes_calls() -> dict:
    rng = seeded_rng(131)
    return {"kind": "value", "target": "tree_shapes", "calls": [call(_tree(rng)) for _ in range(2)]}


def _norm_calls() -> dict:
    rng = seeded_rng(132)
    return {"kind": "jax", "target": "global_norm", "calls": [call(_tree(rng)) for _ in range(3)]}


def _apply_calls() -> dict:
    """Three layers of one activation, then one of another: the compile count shows how the
    activation reaches the program (a static field: two)."""
    rng = seeded_rng(133)
    build = [{"target": "Dense", "args": [f32(rng, 4, 3), f32(rng, 3), act]}
             for act in ("tanh", "tanh", "tanh", "relu")]
    calls = [call({"built": i}, f32(rng, 5, 4)) for i in range(len(build))]
    return {"kind": "jax", "target": "apply", "build": build, "calls": calls}


def _pure_step_calls() -> dict:
    rng = seeded_rng(134)
    calls = [call(f32(rng, 3), 0, f32(rng, 6, 3), f32(rng, 6), lr) for lr in (0.1, 0.05, 0.02)]
    return {"kind": "jax", "target": "pure_step", "calls": calls}


SPEC = ExerciseSpec(
    "pytrees-and-purity",
    (Measurement("global_norm", _norm_calls), Measurement("apply", _apply_calls),
     Measurement("pure_step", _pure_step_calls), Measurement("tree_shapes", _shapes_calls, False)),
    note="global_norm's jaxpr on a nested tree, apply's jaxpr and compile count over three layers of one "
         "activation and one of another, pure_step's jaxpr and compile count over three learning rates; "
         "tree_shapes' outputs side by side")

"""What ``grade compare`` measures for exercise 17 (predicting collectives; FSDP): ``SPEC``, its
measurements and their fixed inputs (``grader.compare.specs`` documents the kinds and collects
every ``SPEC``).  ``predict_collectives`` is plain Python by the statement's rule (it may not
trace), so its approach is read from its normalised source; the FSDP forward pass is compiled
on the 2x4 mesh with the learner's own ``fsdp_specs()``."""

from __future__ import annotations

from grader.compare.specs import ExerciseSpec, Measurement, f32, seeded_rng


def _fsdp_calls() -> dict:
    rng = seeded_rng(17)
    return {"kind": "mesh", "target": "fsdp_mlp", "mesh_arg": True, "specs_from": "fsdp_specs",
            "arg_names": ["x", "w1", "w2"], "mesh_shape": [2, 4], "axes": ["data", "model"],
            "args": [f32(rng, 16, 8), f32(rng, 8, 32), f32(rng, 32, 8)]}


SPEC = ExerciseSpec(
    "predicting-collectives-fsdp",
    (Measurement("fsdp_mlp on fsdp_specs' layout", _fsdp_calls),),
    source_functions=("predict_collectives",),
    note="the rules of predict_collectives, read from its source; the FSDP layout's input shardings and the "
         "collectives XLA compiles for it on a 2x4 mesh")

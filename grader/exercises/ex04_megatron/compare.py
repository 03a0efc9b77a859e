"""What ``grade compare`` measures for exercise 4 (Megatron-style PartitionSpecs): ``SPEC``, its measurements
and their fixed inputs (``grader.compare.specs`` documents the kinds and collects every ``SPEC``)."""

from __future__ import annotations

from grader.compare.specs import ExerciseSpec, Measurement, call, f32, seeded_rng


def _mesh_calls() -> dict:
    rng = seeded_rng(5)
    return {"kind": "mesh", "target": "mlp", "place": "shard_inputs", "mesh_shape": [2, 4],
            "axes": ["data", "model"], "args": [f32(rng, 16, 8), f32(rng, 8, 32), f32(rng, 32, 8)]}


def _partition_specs_calls() -> dict:
    return {"kind": "value", "target": "partition_specs", "numpy": True, "calls": [call()]}


SPEC = ExerciseSpec(
    "megatron-partition-specs",
    (Measurement("mlp on shard_inputs' layout", _mesh_calls),
     Measurement("partition_specs", _partition_specs_calls, False)),
    note="the input layouts shard_inputs gives on a 2x4 mesh and the collectives XLA then needs")

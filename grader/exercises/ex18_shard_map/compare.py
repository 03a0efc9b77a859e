"""What ``grade compare`` measures for exercise 18 (shard_map: collectives by hand): ``SPEC``, its
measurements and their fixed inputs (``grader.compare.specs`` documents the kinds and collects
every ``SPEC``).  Each part is compiled on the 2x4 mesh with the inputs laid out as the checks
lay them out; the ring runs inside the grader's own ``shard_map``, as in the checks."""

from __future__ import annotations

from grader.compare.specs import ExerciseSpec, Measurement, f32, seeded_rng

MESH = {"mesh_shape": [2, 4], "axes": ["data", "model"]}


def _megatron() -> dict:
    rng = seeded_rng(181)
    return {"kind": "mesh", "target": "megatron_mlp", "mesh_arg": True, **MESH,
            "specs": [["data", None], [None, "model"], ["model", None]],
            "args": [f32(rng, 16, 8), f32(rng, 8, 32), f32(rng, 32, 8)]}


def _ring() -> dict:
    return {"kind": "mesh", "target": "ring_allreduce", **MESH, "specs": [["model", None]],
            "shard_map": {"in_specs": [["model", None]], "out_specs": ["model", None]},
            "args": [f32(seeded_rng(182), 4, 6)]}


def _data_parallel() -> dict:
    rng = seeded_rng(183)
    params = {"w1": f32(rng, 8, 32), "w2": f32(rng, 32, 8)}
    return {"kind": "mesh", "target": "data_parallel_grads", "mesh_arg": True, **MESH,
            "specs": [[], ["data", None], ["data", None]], "args": [params, f32(rng, 16, 8), f32(rng, 16, 8)]}


SPEC = ExerciseSpec(
    "shard-map-collectives-by-hand",
    (Measurement("megatron_mlp", _megatron), Measurement("ring_allreduce", _ring),
     Measurement("data_parallel_grads", _data_parallel)),
    note="each part's jaxpr (its shard_maps and collectives by hand) and the collectives XLA compiled from it on a "
         "2x4 mesh")

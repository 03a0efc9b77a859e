"""What `grade compare` measures for each exercise, and on which fixed inputs.

One ``ExerciseSpec`` per exercise slug.  Each ``Measurement`` is sent to the sandbox probe
``fingerprint:measure`` (``grader/probes/fingerprint.py`` documents the kinds) with inputs
drawn from a fixed seed, so every submission is measured on exactly the same data and
the facts of two submissions can be compared.  ``structural`` measurements make up the
*approach* key (canonical jaxpr, compile count, layouts and collectives); the others only
feed the side-by-side view ("do the outputs agree?").  ``source_functions`` are
pure-Python functions whose approach is read from their normalised source (the function
and every module-level function it calls), since they have no jaxpr.

An exercise without a spec here (a new one) is grouped by normalised source only, and
the report says so.  Changing a spec changes ``spec_digest``, which invalidates the
cached fingerprints of that exercise.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any, Callable

import numpy as np

SEED = 20_240_607
#: Bump when the probe's measurements change meaning: cached fingerprints are then stale.
PROBE_VERSION = 2


_DIGESTS: dict[str, str] = {}


@dataclasses.dataclass(frozen=True)
class Measurement:
    name: str  # what the report calls it, e.g. "per_example_grad_norms"
    payload: Callable[[], dict]  # the plain-data request for the probe (fixed inputs)
    structural: bool = True  # part of the approach key


@dataclasses.dataclass(frozen=True)
class ExerciseSpec:
    slug: str
    measurements: tuple[Measurement, ...]
    source_functions: tuple[str, ...] = ()
    note: str = ""  # one line for the report: what the approach is read from

    def payloads(self) -> list[dict]:
        return [m.payload() for m in self.measurements]

    def digest(self) -> str:
        """Changes whenever a measurement, its inputs or the probe change."""
        if self.slug not in _DIGESTS:
            _DIGESTS[self.slug] = self._digest()
        return _DIGESTS[self.slug]

    def _digest(self) -> str:
        from grader import plaindata

        text = plaindata.dumps(plaindata.to_plain({
            "probe": PROBE_VERSION, "names": [m.name for m in self.measurements],
            "structural": [m.structural for m in self.measurements], "payloads": self.payloads(),
            "source_functions": list(self.source_functions)}))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _rng(salt: int) -> np.random.Generator:
    return np.random.default_rng([SEED, salt])


def _f32(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.normal(size=shape).astype(np.float32)


def _call(*args: Any, **kwargs: Any) -> dict:
    return {"args": list(args), "kwargs": kwargs}


# --- exercise 1: counting recompilations ---------------------------------------------------

def _score_calls() -> dict:
    rng = _rng(1)
    calls = [_call(_f32(rng, 4, 6), 0.7, 0.5),
             _call(_f32(rng, 4, 6), 1.3, np.asarray(0.25, np.float32)),  # shift as a 0-d array
             _call(_f32(rng, 4, 6), 0.9, -0.5)]
    return {"kind": "jax", "target": "score", "static": {"mode": "entropy"}, "calls": calls}


def _predict_compiles_calls() -> dict:
    x3 = {"array": "float32", "shape": [3]}
    x4 = {"array": "float32", "shape": [4]}
    sequences = [
        [_call(x3, 0.5), _call(x3, 2.0), _call(x4, 0.5)],
        [_call(x3, 0.5), _call(x3, 0.5, mode="max"), _call(x3, 0.5, "max"), _call({**x3, "numpy": True}, 1.0)],
        [_call({"tuple": [x3, 1]}, 1.0), _call({"dict": {"b": x3, "a": 2.0}}, 1.0),
         _call({"array": "int32", "shape": [3]}, 1.0)],
    ]
    return {"kind": "value", "target": "predict_compiles", "numpy": True, "calls": [_call(s) for s in sequences]}


# --- exercise 2: diagnosing retraces -------------------------------------------------------

def _retrace_params(rng: np.random.Generator) -> dict:
    return {"embed": _f32(rng, 20, 8), "w": _f32(rng, 8), "b": np.asarray(rng.normal(), np.float32)}


def _padded_batch(rng: np.random.Generator, length: int, width: int) -> tuple:
    tokens = np.zeros((4, width), np.int32)
    tokens[:, :length] = rng.integers(0, 20, size=(4, length))
    targets = np.zeros((4, width), np.float32)
    targets[:, :length] = rng.normal(size=(4, length))
    mask = np.zeros((4, width), np.float32)
    mask[:, :length] = 1.0
    return tokens, targets, mask


def _train_step_calls() -> dict:
    rng = _rng(2)
    params = _retrace_params(rng)
    calls = [_call(params, *_padded_batch(rng, n, 16), lr=lr) for n, lr in ((11, 0.1), (14, 0.05), (9, 0.02))]
    return {"kind": "jax", "target": "train_step", "calls": calls}


def _pad_calls() -> dict:
    rng = _rng(3)
    calls = []
    for length in (11, 16, 3):
        tokens = rng.integers(0, 20, size=(4, length)).astype(np.int32)
        calls.append(_call(tokens, _f32(rng, 4, length), (8, 16, 32, 64)))
    return {"kind": "value", "target": "pad_to_bucket", "numpy": True, "calls": calls}


# --- exercise 3: per-example gradient norms ------------------------------------------------

def _grad_norm_calls() -> dict:
    rng = _rng(4)

    def params() -> dict:
        return {"layers": [{"w": _f32(rng, 5, 8), "b": _f32(rng, 8)}, {"w": _f32(rng, 8, 8), "b": _f32(rng, 8)}],
                "out": {"w": _f32(rng, 8, 3), "b": _f32(rng, 3)}}

    calls = [_call(params(), _f32(rng, 6, 5), _f32(rng, 6, 3)) for _ in range(3)]
    return {"kind": "jax", "target": "per_example_grad_norms", "calls": calls}


# --- exercise 4: Megatron-style PartitionSpecs ---------------------------------------------

def _mesh_calls() -> dict:
    rng = _rng(5)
    return {"kind": "mesh", "target": "mlp", "place": "shard_inputs", "mesh_shape": [2, 4],
            "axes": ["data", "model"], "args": [_f32(rng, 16, 8), _f32(rng, 8, 32), _f32(rng, 32, 8)]}


def _partition_specs_calls() -> dict:
    return {"kind": "value", "target": "partition_specs", "numpy": True, "calls": [_call()]}


# --- exercise 5: while_loop vs scan --------------------------------------------------------

def _scan_calls(transform: str = "") -> dict:
    rng = _rng(6)
    calls = [_call(np.asarray(theta, np.float32), _f32(rng, 4)) for theta in (0.6, -0.4, 0.3)]
    spec = {"kind": "jax", "target": "scan_version", "static": {"max_steps": 20}, "calls": calls}
    if transform:
        spec.update(transform=transform, argnums=[0, 1])
    return spec


# --- exercise 6: reading a jaxpr -----------------------------------------------------------

_NESTED_SOURCE = '''
@jax.jit
def _helper(v):
    return jnp.tanh(v) * 2.0

def fixed_nested(x, w):
    h = _helper(x @ w)
    def body(carry, row):
        return carry + jnp.sum(row), jnp.maximum(row, 0.0)
    total, rows = lax.scan(body, 0.0, h)
    return lax.cond(total > 0, lambda r: _helper(r), lambda r: -r, rows)
'''

_FLAT_SOURCE = '''
def fixed_flat(x):
    return jnp.where(x > 0, jnp.sin(x), jnp.cos(x)) * 3.0 + jnp.sum(x)
'''


def _count_primitives_calls(source: str, fn_name: str, arg_specs: list) -> Callable[[], dict]:
    def payload() -> dict:
        return {"kind": "jaxpr_arg", "target": "count_primitives", "source": source, "fn_name": fn_name,
                "arg_specs": arg_specs}
    return payload


def _answers_calls() -> dict:
    return {"kind": "value", "target": "answers", "numpy": True, "calls": [_call()]}


# --- exercise 7: the training lab ----------------------------------------------------------

_LAB_CONSTANTS = (0.05, 1.0, 0.01)  # LEARNING_RATE, CLIP_NORM, WEIGHT_DECAY: the statement fixes them


def _lab_params(rng: np.random.Generator) -> list:
    return [{"w": _f32(rng, 4, 8), "b": _f32(rng, 8)}, {"w": _f32(rng, 8, 3), "b": _f32(rng, 3)}]


def _lab_batch(rng: np.random.Generator) -> tuple:
    return _f32(rng, 6, 4), rng.integers(0, 3, size=6).astype(np.int32)


def _lab_calls(target: str) -> Callable[[], dict]:
    def payload() -> dict:
        rng = _rng(7)
        calls = [_call(_lab_params(rng), *_lab_batch(rng)) for _ in range(3)]
        return {"kind": "jax", "target": target, "calls": calls}
    return payload


def _lab_opt_state(params: list) -> list:
    """The learner's own optimizer state for ``params``: made in the sandbox (optax's state
    is not plain data), afresh for every call since train_step donates it."""
    return [{"target": "make_optimizer", "args": list(_LAB_CONSTANTS), "method": "init", "method_args": [params]}]


def _lab_step_calls() -> dict:
    rng = _rng(8)
    batches = [(_lab_params(rng), *_lab_batch(rng)) for _ in range(3)]
    calls = [_call(params, {"built": 0}, x, y) for params, x, y in batches]
    return {"kind": "jax", "target": "train_step", "build": _lab_opt_state(batches[0][0]), "calls": calls}


def _lab_report_calls() -> dict:
    rng = _rng(9)
    params, (x, y) = _lab_params(rng), _lab_batch(rng)
    return {"kind": "value", "target": "report", "build": _lab_opt_state(params),
            "calls": [_call(params, {"built": 0}, x, y)]}


def _lab_init_calls() -> dict:
    key = np.asarray([0, 7], np.uint32)  # a raw (uint32[2]) key: a jax.random.key is not plain data
    return {"kind": "value", "target": "init_params", "calls": [_call(key, (4, 8, 3))]}


# --- exercise 8: Equinox modules -----------------------------------------------------------

_EQX_MODEL = {"target": "make_model", "args": [[3, 5, 5, 2], "tanh", 0.25, 8]}  # two hidden layers, dropout on


def _eqx_key(n: int) -> np.ndarray:
    return np.asarray([0, n], np.uint32)  # a raw key: jax.random.key(...) cannot cross as plain data


def _eqx_step_calls() -> dict:
    rng = _rng(10)
    calls = [_call({"built": 0}, {"built": 1}, _f32(rng, 6, 3), _f32(rng, 6, 2), _eqx_key(n)) for n in range(3)]
    return {"kind": "jax", "target": "train_step", "calls": calls,
            "build": [_EQX_MODEL, {"target": "init_opt_state", "args": [{"built": 0}]}]}


def _eqx_predict_calls() -> dict:
    rng = _rng(11)
    calls = [_call({"built": 0}, _f32(rng, 6, 3), _eqx_key(n)) for n in range(3)]
    return {"kind": "jax", "target": "predict", "build": [_EQX_MODEL], "calls": calls}


def _eqx_weights_calls() -> dict:
    return {"kind": "value", "target": "weights", "build": [_EQX_MODEL], "calls": [_call({"built": 0})]}


# --- exercise 9: lowering and export -------------------------------------------------------

_IR_SOURCE = '''
@jax.jit
def _twice(v):
    return jnp.sin(v) * 2.0

def fixed_stages(x, w):
    v = _twice(x) @ w
    v = lax.cond(jnp.max(v) > 0, jnp.tanh, _twice, v)
    v = jnp.sort(v, axis=-1) + jnp.sum(v, axis=0)
    v = lax.fori_loop(0, 2, lambda i, u: u * 0.5 + 1.0, v)
    return lax.erf(v) / jnp.sqrt(2.0)
'''


def _ir_stats_calls() -> dict:
    return {"kind": "fn_arg", "target": "ir_stats", "source": _IR_SOURCE, "fn_name": "fixed_stages",
            "arg_specs": [[[4, 3], "float32"], [[3, 5], "float32"]]}


# --- exercise 10: reading fusion -----------------------------------------------------------

# Optimized HLO of one fixed program (relu(x @ w + 1), three loop steps of tanh(c) * 0.5 +
# sum(c, 0), then exp(h - max(h))), f32[16,32] @ f32[32,24], from JAX 0.10.2 on CPU with
# metadata and source tables trimmed: a kCustom dot, kLoop fusions in ENTRY and in the loop's
# body and condition, reductions whose adders are named by to_apply.  Once with the default
# pipeline, once with "fusion,fusion-wrapper" disabled (bare elementwise work left in ENTRY).
_HLO_DEFAULT = '''HloModule jit_f, is_scheduled=true, entry_computation_layout={(f32[16,32]{1,0}, f32[32,24]{1,0})->f32[16,24]{1,0}}, allow_spmd_sharding_propagation_to_parameters={true,true}, allow_spmd_sharding_propagation_to_output={true}

FileNames
1 "fixed.py"

FunctionNames
1 "f"

FileLocations
1 {file_name_id=1 function_name_id=1 line=1 end_line=1 column=0 end_column=1}

StackFrames
1 {file_location_id=1 parent_frame_id=1}


%fused_computation.1 (param_0.2: f32[24], param_1.4: f32[16,24]) -> f32[16,24] {
  %param_1.4 = f32[16,24]{1,0} parameter(1)
  %tanh.2 = f32[16,24]{1,0} tanh(%param_1.4)
  %constant.3 = f32[] constant(0.5)
  %mul.5 = f32[16,24]{1,0} broadcast(%constant.3), dimensions={}
  %mul.4 = f32[16,24]{1,0} multiply(%tanh.2, %mul.5)
  %param_0.2 = f32[24]{0} parameter(0)
  %add.5 = f32[16,24]{1,0} broadcast(%param_0.2), dimensions={1}
  ROOT %add.4 = f32[16,24]{1,0} add(%mul.4, %add.5)
}

%wrapped_add_computation (param_0.7: s32[], param_1.11: s32[]) -> s32[] {
  %param_0.7 = s32[] parameter(0)
  %param_1.11 = s32[] parameter(1)
  ROOT %add.15 = s32[] add(%param_0.7, %param_1.11)
}

%region_1.2 (reduce_sum.3: f32[], reduce_sum.4: f32[]) -> f32[] {
  %reduce_sum.3 = f32[] parameter(0)
  %reduce_sum.4 = f32[] parameter(1)
  ROOT %reduce_sum.5 = f32[] add(%reduce_sum.3, %reduce_sum.4)
}

%wrapped_reduce_computation (param_0.8: f32[16,24], param_1.12: f32[]) -> f32[24] {
  %param_0.8 = f32[16,24]{1,0} parameter(0)
  %param_1.12 = f32[] parameter(1)
  ROOT %reduce_sum.1 = f32[24]{0} reduce(%param_0.8, %param_1.12), dimensions={0}, to_apply=%region_1.2
}

%region_0.4 (arg_tuple.1: (s32[], f32[16,24])) -> (s32[], f32[16,24]) {
  %arg_tuple.1 = (s32[], f32[16,24]{1,0}) parameter(0)
  %constant.10 = s32[] constant(1)
  %constant.1 = f32[] constant(0)
  %get-tuple-element.5 = f32[16,24]{1,0} get-tuple-element(%arg_tuple.1), index=1
  %get-tuple-element.4 = s32[] get-tuple-element(%arg_tuple.1), index=0
  %wrapped_reduce = f32[24]{0} fusion(%get-tuple-element.5, %constant.1), kind=kLoop, calls=%wrapped_reduce_computation
  %wrapped_add = s32[] fusion(%get-tuple-element.4, %constant.10), kind=kLoop, calls=%wrapped_add_computation
  %broadcast_add_fusion = f32[16,24]{1,0} fusion(%wrapped_reduce, %get-tuple-element.5), kind=kLoop, calls=%fused_computation.1
  ROOT %tuple.3 = (s32[], f32[16,24]{1,0}) tuple(%wrapped_add, %broadcast_add_fusion)
}

%wrapped_compare_computation (param_0.9: s32[], param_1.13: s32[]) -> pred[] {
  %param_0.9 = s32[] parameter(0)
  %param_1.13 = s32[] parameter(1)
  ROOT %lt.0 = pred[] compare(%param_0.9, %param_1.13), direction=LT
}

%region_2.5 (arg_tuple.3: (s32[], f32[16,24])) -> pred[] {
  %arg_tuple.3 = (s32[], f32[16,24]{1,0}) parameter(0)
  %constant.12 = s32[] constant(3)
  %get-tuple-element.6 = s32[] get-tuple-element(%arg_tuple.3), index=0
  ROOT %wrapped_compare = pred[] fusion(%get-tuple-element.6, %constant.12), kind=kLoop, calls=%wrapped_compare_computation
}

%fused_computation (param_0: f32[16,32], param_1: f32[32,24]) -> f32[16,24] {
  %param_0 = f32[16,32]{1,0} parameter(0)
  %param_1 = f32[32,24]{1,0} parameter(1)
  ROOT %dot_general.0 = f32[16,24]{1,0} dot(%param_0, %param_1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%fused_computation.2 (param_0.4: f32[16,24], param_1.6: f32[16]) -> f32[16,24] {
  %param_0.4 = f32[16,24]{1,0} parameter(0)
  %param_1.6 = f32[16]{0} parameter(1)
  %sub.1 = f32[16,24]{1,0} broadcast(%param_1.6), dimensions={0}
  %sub.0 = f32[16,24]{1,0} subtract(%param_0.4, %sub.1)
  ROOT %exp.0 = f32[16,24]{1,0} exponential(%sub.0)
}

%fused_computation.3 (param_0.6: f32[16,24]) -> f32[16,24] {
  %param_0.6 = f32[16,24]{1,0} parameter(0)
  %constant.6 = f32[] constant(1)
  %add.14 = f32[16,24]{1,0} broadcast(%constant.6), dimensions={}
  %add.10 = f32[16,24]{1,0} add(%param_0.6, %add.14)
  %constant.5 = f32[] constant(0)
  %max.5 = f32[16,24]{1,0} broadcast(%constant.5), dimensions={}
  ROOT %max.4 = f32[16,24]{1,0} maximum(%add.10, %max.5)
}

%region_3.6 (reduce_max.3: f32[], reduce_max.4: f32[]) -> f32[] {
  %reduce_max.3 = f32[] parameter(0)
  %reduce_max.4 = f32[] parameter(1)
  ROOT %reduce_max.5 = f32[] maximum(%reduce_max.3, %reduce_max.4)
}

%wrapped_reduce_computation.1 (param_0.10: f32[16,24], param_1.14: f32[]) -> f32[16] {
  %param_0.10 = f32[16,24]{1,0} parameter(0)
  %param_1.14 = f32[] parameter(1)
  ROOT %reduce_max.0 = f32[16]{0} reduce(%param_0.10, %param_1.14), dimensions={1}, to_apply=%region_3.6
}

ENTRY %main.7 (x.1: f32[16,32], w.1: f32[32,24]) -> f32[16,24] {
  %x.1 = f32[16,32]{1,0} parameter(0)
  %w.1 = f32[32,24]{1,0} parameter(1)
  %constant.14 = f32[] constant(-inf)
  %constant.15 = s32[] constant(0)
  %ynn_fusion = f32[16,24]{1,0} fusion(%x.1, %w.1), kind=kCustom, calls=%fused_computation, backend_config={"fusion_config":{"kind":"__ynn_fusion"},"outer_dimension_partitions":[]}
  %copy.6 = s32[] copy(%constant.15)
  %broadcast_maximum_fusion = f32[16,24]{1,0} fusion(%ynn_fusion), kind=kLoop, calls=%fused_computation.3
  %tuple = (s32[], f32[16,24]{1,0}) tuple(%copy.6, %broadcast_maximum_fusion)
  %while.5 = (s32[], f32[16,24]{1,0}) while(%tuple), condition=%region_2.5, body=%region_0.4, backend_config={"dynamic_variables":[],"known_induction_variable":{"tuple_index":"0"},"known_init_step":{"init":"0","step":"1"},"known_trip_count":{"n":"3"}}
  %while.7 = f32[16,24]{1,0} get-tuple-element(%while.5), index=1
  %wrapped_reduce.1 = f32[16]{0} fusion(%while.7, %constant.14), kind=kLoop, calls=%wrapped_reduce_computation.1
  ROOT %subtract_exponential_fusion = f32[16,24]{1,0} fusion(%while.7, %wrapped_reduce.1), kind=kLoop, calls=%fused_computation.2
}
'''

_HLO_UNFUSED = '''HloModule jit_f, is_scheduled=true, entry_computation_layout={(f32[16,32]{1,0}, f32[32,24]{1,0})->f32[16,24]{1,0}}, allow_spmd_sharding_propagation_to_parameters={true,true}, allow_spmd_sharding_propagation_to_output={true}

FileNames
1 "fixed.py"

FunctionNames
1 "f"

FileLocations
1 {file_name_id=1 function_name_id=1 line=1 end_line=1 column=0 end_column=1}

StackFrames
1 {file_location_id=1 parent_frame_id=1}


%region_1.2 (reduce_sum.3: f32[], reduce_sum.4: f32[]) -> f32[] {
  %reduce_sum.3 = f32[] parameter(0)
  %reduce_sum.4 = f32[] parameter(1)
  ROOT %reduce_sum.5 = f32[] add(%reduce_sum.3, %reduce_sum.4)
}

%region_0.4 (arg_tuple.1: (s32[], f32[16,24])) -> (s32[], f32[16,24]) {
  %arg_tuple.1 = (s32[], f32[16,24]{1,0}) parameter(0)
  %constant.10 = s32[] constant(1)
  %constant.0 = f32[] constant(0.5)
  %constant.1 = f32[] constant(0)
  %get-tuple-element.5 = f32[16,24]{1,0} get-tuple-element(%arg_tuple.1), index=1
  %get-tuple-element.4 = s32[] get-tuple-element(%arg_tuple.1), index=0
  %mul.0 = f32[16,24]{1,0} broadcast(%constant.0), dimensions={}
  %reduce_sum.0 = f32[24]{0} reduce(%get-tuple-element.5, %constant.1), dimensions={0}, to_apply=%region_1.2
  %tanh.0 = f32[16,24]{1,0} tanh(%get-tuple-element.5)
  %add.11 = s32[] add(%get-tuple-element.4, %constant.10)
  %add.2 = f32[16,24]{1,0} broadcast(%reduce_sum.0), dimensions={1}
  %mul.1 = f32[16,24]{1,0} multiply(%tanh.0, %mul.0)
  %add.3 = f32[16,24]{1,0} add(%mul.1, %add.2)
  ROOT %tuple.3 = (s32[], f32[16,24]{1,0}) tuple(%add.11, %add.3)
}

%region_2.5 (arg_tuple.3: (s32[], f32[16,24])) -> pred[] {
  %arg_tuple.3 = (s32[], f32[16,24]{1,0}) parameter(0)
  %constant.12 = s32[] constant(3)
  %get-tuple-element.6 = s32[] get-tuple-element(%arg_tuple.3), index=0
  ROOT %lt.1 = pred[] compare(%get-tuple-element.6, %constant.12), direction=LT
}

%region_3.6 (reduce_max.3: f32[], reduce_max.4: f32[]) -> f32[] {
  %reduce_max.3 = f32[] parameter(0)
  %reduce_max.4 = f32[] parameter(1)
  ROOT %reduce_max.5 = f32[] maximum(%reduce_max.3, %reduce_max.4)
}

%fused_computation (param_0: f32[16,32], param_1: f32[32,24]) -> f32[16,24] {
  %param_0 = f32[16,32]{1,0} parameter(0)
  %param_1 = f32[32,24]{1,0} parameter(1)
  ROOT %dot_general.0 = f32[16,24]{1,0} dot(%param_0, %param_1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

ENTRY %main.7 (x.1: f32[16,32], w.1: f32[32,24]) -> f32[16,24] {
  %x.1 = f32[16,32]{1,0} parameter(0)
  %w.1 = f32[32,24]{1,0} parameter(1)
  %constant.13 = f32[] constant(1)
  %constant.14 = f32[] constant(-inf)
  %constant.15 = s32[] constant(0)
  %constant.2 = f32[] constant(0)
  %ynn_fusion = f32[16,24]{1,0} fusion(%x.1, %w.1), kind=kCustom, calls=%fused_computation, backend_config={"fusion_config":{"kind":"__ynn_fusion"},"outer_dimension_partitions":[]}
  %add.12 = f32[16,24]{1,0} broadcast(%constant.13), dimensions={}
  %copy.6 = s32[] copy(%constant.15)
  %max.0 = f32[16,24]{1,0} broadcast(%constant.2), dimensions={}
  %add.13 = f32[16,24]{1,0} add(%ynn_fusion, %add.12)
  %max.1 = f32[16,24]{1,0} maximum(%add.13, %max.0)
  %tuple = (s32[], f32[16,24]{1,0}) tuple(%copy.6, %max.1)
  %while.5 = (s32[], f32[16,24]{1,0}) while(%tuple), condition=%region_2.5, body=%region_0.4, backend_config={"dynamic_variables":[],"known_induction_variable":{"tuple_index":"0"},"known_init_step":{"init":"0","step":"1"},"known_trip_count":{"n":"3"}}
  %while.7 = f32[16,24]{1,0} get-tuple-element(%while.5), index=1
  %reduce_max.7 = f32[16]{0} reduce(%while.7, %constant.14), dimensions={1}, to_apply=%region_3.6
  %sub.6 = f32[16,24]{1,0} broadcast(%reduce_max.7), dimensions={0}
  %sub.7 = f32[16,24]{1,0} subtract(%while.7, %sub.6)
  ROOT %exp.1 = f32[16,24]{1,0} exponential(%sub.7)
}
'''


def _hlo_reader_calls(target: str) -> Callable[[], dict]:
    def payload() -> dict:
        return {"kind": "value", "target": target, "numpy": True, "calls": [_call(_HLO_DEFAULT), _call(_HLO_UNFUSED)]}
    return payload


def _rewrites_calls() -> dict:
    return {"kind": "value", "target": "rewrites", "numpy": True, "calls": [_call()]}


# --- exercise 11: cost and timing ----------------------------------------------------------

def _dot_cost_calls() -> dict:
    return {"kind": "value", "target": "dot_cost", "numpy": True,
            "calls": [_call(16, 32, 8), _call(3, 5, 7), _call(64, 2, 33)]}


def _elementwise_cost_calls() -> dict:
    return {"kind": "value", "target": "elementwise_cost", "numpy": True,
            "calls": [_call((64, 64), "float32"), _call((5,), "float16"), _call((2, 3, 4), "float32")]}


_CHAIN_SOURCE = '''
def tanh_chain(x, y):
    return jnp.tanh(x * y + 1.0)
'''

_UPDATE_SOURCE = '''
def sgd_update(w, g):
    return w - 0.1 * g
'''


def _analyze_calls(source: str, fn_name: str, arg_specs: list, **kwargs: Any) -> Callable[[], dict]:
    def payload() -> dict:
        return {"kind": "fn_arg", "target": "analyze", "source": source, "fn_name": fn_name, "arg_specs": arg_specs,
                "kwargs": kwargs}
    return payload


# --- exercise 12: remat and donation -------------------------------------------------------

def _remat_model(rng: np.random.Generator) -> tuple:
    """Five blocks of width 8 (segments of 2 leave a shorter last one), a batch of 4."""
    params = [{"w": _f32(rng, 8, 8) / np.float32(np.sqrt(8.0)), "b": _f32(rng, 8) * np.float32(0.1)}
              for _ in range(5)]
    return params, _f32(rng, 4, 8), _f32(rng, 4, 8)


def _remat_calls(transform: str = "") -> dict:
    rng = _rng(12)
    calls = [_call(*_remat_model(rng)) for _ in range(3)]
    spec = {"kind": "jax", "target": "remat_loss", "static": {"segment": 2}, "calls": calls}
    if transform:
        spec.update(transform=transform, argnums=[0])
    return spec


def _momentum_step_calls() -> dict:
    rng = _rng(13)
    calls = []
    for lr, beta in ((0.05, 0.9), (0.1, 0.8), (0.02, 0.5)):  # new lr and beta each call: traced, one compile
        params, x, y = _remat_model(rng)
        momentum = [{"w": _f32(rng, 8, 8), "b": _f32(rng, 8)} for _ in params]
        calls.append(_call(params, momentum, x, y, lr, beta))
    return {"kind": "jax", "target": "train_step", "calls": calls}


def _choose_segment_calls() -> dict:
    params, x, y = _remat_model(_rng(14))
    # Budgets between the residual bytes segments of 1..5 keep on this model (JAX 0.10.2): the
    # smallest fitting sizes are 1, 2, 3 and 5 (2212, 1956, 1828 and 1700 bytes; 3 and 4 both make
    # two segments).
    return {"kind": "value", "target": "choose_segment",
            "calls": [_call(params, x, y, budget) for budget in (2300, 2000, 1900, 1750)]}


SPECS: dict[str, ExerciseSpec] = {
    "recompile-counting": ExerciseSpec(
        "recompile-counting",
        (Measurement("score", _score_calls), Measurement("predict_compiles", _predict_compiles_calls, False)),
        source_functions=("predict_compiles",),
        note="score's jaxpr and compile count (shift sent as a float and as an array); "
             "predict_compiles by its normalised source"),
    "retrace-diagnosis": ExerciseSpec(
        "retrace-diagnosis",
        (Measurement("train_step", _train_step_calls), Measurement("pad_to_bucket", _pad_calls, False)),
        source_functions=("pad_to_bucket",),
        note="train_step's jaxpr and compile count over three learning rates; pad_to_bucket by its normalised source"),
    "per-example-grad-norms": ExerciseSpec(
        "per-example-grad-norms",
        (Measurement("per_example_grad_norms", _grad_norm_calls),),
        note="per_example_grad_norms's jaxpr and compile count on a two-layer MLP, batch of 6"),
    "megatron-partition-specs": ExerciseSpec(
        "megatron-partition-specs",
        (Measurement("mlp on shard_inputs' layout", _mesh_calls),
         Measurement("partition_specs", _partition_specs_calls, False)),
        note="the input layouts shard_inputs gives on a 2x4 mesh and the collectives XLA then needs"),
    "while-loop-vs-scan": ExerciseSpec(
        "while-loop-vs-scan",
        (Measurement("scan_version", _scan_calls), Measurement("grad of scan_version", lambda: _scan_calls("grad"))),
        note="scan_version's jaxpr (max_steps = 20) and that of its reverse-mode gradient"),
    "reading-a-jaxpr": ExerciseSpec(
        "reading-a-jaxpr",
        (Measurement("count_primitives (nested)", _count_primitives_calls(
            _NESTED_SOURCE, "fixed_nested", [[[6, 4], "float32"], [[4, 3], "float32"]]), False),
         Measurement("count_primitives (flat)", _count_primitives_calls(
             _FLAT_SOURCE, "fixed_flat", [[[5], "float32"]]), False),
         Measurement("answers", _answers_calls, False)),
        source_functions=("count_primitives",),
        note="count_primitives by its normalised source (a walker has no jaxpr of its own); "
             "its counts on two fixed jaxprs and answers() for the side-by-side view"),
    "training-lab": ExerciseSpec(
        "training-lab",
        (Measurement("loss_fn", _lab_calls("loss_fn")), Measurement("per_example", _lab_calls("per_example")),
         Measurement("train_step", _lab_step_calls), Measurement("init_params", _lab_init_calls, False),
         Measurement("report", _lab_report_calls, False)),
        note="the jaxprs of loss_fn, per_example and train_step (optimizer state from the learner's own "
             "make_optimizer, donation and compile count) on a [4, 8, 3] MLP, batch of 6"),
    "equinox-modules": ExerciseSpec(
        "equinox-modules",
        (Measurement("train_step", _eqx_step_calls), Measurement("predict", _eqx_predict_calls),
         Measurement("weights", _eqx_weights_calls, False)),
        note="the jaxprs and compile counts of train_step and predict on a model make_model builds in the "
             "sandbox ([3, 5, 5, 2], tanh, dropout 0.25), the model's array leaves traced"),
    "lowering-and-export": ExerciseSpec(
        "lowering-and-export",
        (Measurement("ir_stats (fixed function)", _ir_stats_calls, False),
         Measurement("answers", _answers_calls, False)),
        source_functions=("ir_stats", "export_gelu"),
        note="ir_stats and export_gelu by their normalised source (text and API work has no jaxpr of its "
             "own); ir_stats on a fixed function and answers() for the side-by-side view"),
    "reading-fusion": ExerciseSpec(
        "reading-fusion",
        (Measurement("fusions", _hlo_reader_calls("fusions"), False),
         Measurement("unfused", _hlo_reader_calls("unfused"), False),
         Measurement("rewrites", _rewrites_calls, False)),
        source_functions=("fusions", "unfused"),
        note="fusions and unfused by their normalised source (HLO readers have no jaxpr); their output on "
             "two fixed optimized modules and rewrites() for the side-by-side view"),
    "cost-and-timing": ExerciseSpec(
        "cost-and-timing",
        (Measurement("dot_cost", _dot_cost_calls, False),
         Measurement("elementwise_cost", _elementwise_cost_calls, False),
         Measurement("analyze (tanh chain)", _analyze_calls(
             _CHAIN_SOURCE, "tanh_chain", [[[64, 64], "float32"], [[64, 64], "float32"]]), False),
         Measurement("analyze (donated update)", _analyze_calls(
             _UPDATE_SOURCE, "sgd_update", [[[32, 16], "float32"], [[32, 16], "float32"]], donate_argnums=(0,)),
             False)),
        source_functions=("benchmark",),
        note="benchmark by its normalised source (how the clock is read; timings are no fingerprint); the "
             "predictions and analyze's numbers on two fixed functions for the side-by-side view"),
    "remat-and-donation": ExerciseSpec(
        "remat-and-donation",
        (Measurement("remat_loss", _remat_calls), Measurement("grad of remat_loss", lambda: _remat_calls("grad")),
         Measurement("train_step", _momentum_step_calls),
         Measurement("choose_segment", _choose_segment_calls, False)),
        note="remat_loss's jaxpr and its gradient's (5 blocks, segment 2), train_step's jaxpr, donation and "
             "compile count over three lr/beta; choose_segment's answers for four budgets side by side"),
}


def spec_for(slug: str) -> ExerciseSpec | None:
    """The exercise's spec, or None: then approaches are grouped by normalised source only."""
    return SPECS.get(slug)


def payload_json(payload: dict) -> str:
    """A payload as it travels, for digests and tests."""
    from grader import plaindata

    return json.dumps(plaindata.to_plain(payload), sort_keys=True)

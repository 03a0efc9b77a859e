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
PROBE_VERSION = 1


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
}


def spec_for(slug: str) -> ExerciseSpec | None:
    """The exercise's spec, or None: then approaches are grouped by normalised source only."""
    return SPECS.get(slug)


def payload_json(payload: dict) -> str:
    """A payload as it travels, for digests and tests."""
    from grader import plaindata

    return json.dumps(plaindata.to_plain(payload), sort_keys=True)

"""What ``grade compare`` measures for exercise 6 (reading a jaxpr): ``SPEC``, its measurements
and their fixed inputs (``grader.compare.specs`` documents the kinds and collects every ``SPEC``)."""

from __future__ import annotations

from typing import Callable

from grader.compare.specs import ExerciseSpec, Measurement, call


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
    return {"kind": "value", "target": "answers", "numpy": True, "calls": [call()]}


SPEC = ExerciseSpec(
    "reading-a-jaxpr",
    (Measurement("count_primitives (nested)", _count_primitives_calls(
        _NESTED_SOURCE, "fixed_nested", [[[6, 4], "float32"], [[4, 3], "float32"]]), False),
     Measurement("count_primitives (flat)", _count_primitives_calls(
         _FLAT_SOURCE, "fixed_flat", [[[5], "float32"]]), False),
     Measurement("answers", _answers_calls, False)),
    source_functions=("count_primitives",),
    note="count_primitives by its normalised source (a walker has no jaxpr of its own); "
         "its counts on two fixed jaxprs and answers() for the side-by-side view")

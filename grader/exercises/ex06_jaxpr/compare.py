"""What ``grade compare`` measures for exercise 6 (reading a jaxpr): ``SPEC``, its measurements
and their fixed inputs (``grader.compare.specs`` documents the kinds and collects every ``SPEC``)."""

from __future__ import annotations

from typing import Callable

from grader.compare.features import CORE_PYTHON, Features
from grader.compare.specs import ExerciseSpec, Measurement, call
from grader.compare.strategy import Strategy


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


def _walk(f: Features) -> frozenset[str]:
    return f.py("count_primitives").tokens


STRATEGIES = (
    Strategy("parses the printed jaxpr (text)", lambda f: "reads text" in _walk(f),
             "regular expressions or string splitting over the jaxpr's printout"),
    Strategy("explicit stack or queue (iterative walk)",
             lambda f: "explicit stack" in _walk(f) and "recursion" not in _walk(f),
             "a while loop popping sub-jaxprs from a list or deque, no recursion"),
    Strategy("recursive walk", lambda f: "recursion" in _walk(f), "a function that calls itself on each sub-jaxpr"),
    Strategy("generator of equations", lambda f: "recursive generator" in _walk(f),
             "a recursive generator yields every equation; the counting is done over it"),
    Strategy("fixed-depth loops (no recursion)", lambda f: not (_walk(f) & CORE_PYTHON),
             "for loops over equations a fixed number of levels deep"),
)

SPEC = ExerciseSpec(
    "reading-a-jaxpr",
    (Measurement("count_primitives (nested)", _count_primitives_calls(
        _NESTED_SOURCE, "fixed_nested", [[[6, 4], "float32"], [[4, 3], "float32"]]), False),
     Measurement("count_primitives (flat)", _count_primitives_calls(
         _FLAT_SOURCE, "fixed_flat", [[[5], "float32"]]), False),
     Measurement("answers", _answers_calls, False)),
    source_functions=("count_primitives",),
    note="count_primitives by its normalised source and the shape of its syntax tree (a walker has no jaxpr "
         "of its own); its counts on two fixed jaxprs and answers() for the side-by-side view",
    strategies=STRATEGIES)

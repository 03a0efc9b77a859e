"""What ``grade compare`` measures for exercise 11 (cost and timing): ``SPEC``, its measurements
and their fixed inputs (``grader.compare.specs`` documents the kinds and collects every ``SPEC``)."""

from __future__ import annotations

from typing import Any, Callable

from grader.compare.specs import ExerciseSpec, Measurement, call


def _dot_cost_calls() -> dict:
    return {"kind": "value", "target": "dot_cost", "numpy": True,
            "calls": [call(16, 32, 8), call(3, 5, 7), call(64, 2, 33)]}


def _elementwise_cost_calls() -> dict:
    return {"kind": "value", "target": "elementwise_cost", "numpy": True,
            "calls": [call((64, 64), "float32"), call((5,), "float16"), call((2, 3, 4), "float32")]}


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


SPEC = ExerciseSpec(
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
         "predictions and analyze's numbers on two fixed functions for the side-by-side view")

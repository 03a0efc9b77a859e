"""What ``grade compare`` measures for exercise 9 (lowering and export): ``SPEC``, its measurements
and their fixed inputs (``grader.compare.specs`` documents the kinds and collects every ``SPEC``)."""

from __future__ import annotations

from grader.compare.specs import ExerciseSpec, Measurement, call


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


def _answers_calls() -> dict:
    return {"kind": "value", "target": "answers", "numpy": True, "calls": [call()]}


SPEC = ExerciseSpec(
    "lowering-and-export",
    (Measurement("ir_stats (fixed function)", _ir_stats_calls, False),
     Measurement("answers", _answers_calls, False)),
    source_functions=("ir_stats", "export_gelu"),
    note="ir_stats and export_gelu by their normalised source (text and API work has no jaxpr of its "
         "own); ir_stats on a fixed function and answers() for the side-by-side view")

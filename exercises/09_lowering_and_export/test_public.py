"""Public checks for exercise 9 (run by `grade exercise 9`; they carry no points).

The hidden checks run ir_stats on functions written when you are graded (reductions,
sort, cond, loops, nested jit, where, erf, dots), run your export at feature counts and
batch sizes this file never uses, and check every reading answer against the JAX that
grades you.  The truth is measured in a second, learner-free JAX process, from the
modules' structure rather than their text.
"""

import numpy as np
import pytest

from grader.exercises.ex09_lowering.judges import GELU_SOURCE, QUESTIONS, judge_answers, judge_export_numbers, \
    judge_export_shapes, judge_stats, learner_answers, run_learner_export
from grader.feedback import CheckFailed

# The stub's example functions, written out here so the check does not trust your copy.
EXAMPLES = {
    "example_small": ('''
def example_small(x):
    return jnp.tanh(x) * 2.0 + jnp.sum(x)
''', [[[4, 3], "float32"]]),
    "example_nested": ('''
@jax.jit
def _scale(v):
    return jnp.sin(v) * 3.0


def example_nested(x, w):
    v = _scale(x) @ w
    v = lax.cond(jnp.max(v) > 0, jnp.cos, _scale, v)
    return lax.fori_loop(0, 3, lambda i, u: u * 0.5 + 1.0, v)
''', [[[4, 3], "float32"], [[3, 3], "float32"]]),
    # a jax.debug.print: XLA prints its custom-call after the ROOT line of the optimized ENTRY
    "example_side_effect": ('''
def example_side_effect(x):
    v = jnp.sin(x) * 2.0
    jax.debug.print("v: {}", jnp.cos(v) + 1.0)
    return v * 3.0
''', [[[4, 4], "float32"]]),
}
STATS_KEYS = ("jaxpr_eqns", "stablehlo_ops", "hlo_opcodes", "optimized_entry_opcodes")


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_stats_on_example_functions(submission, truth, name):
    source, specs = EXAMPLES[name]
    right = truth.probe("ex09_lowering:truth_stats", source, name, specs)
    got = submission.probe("ex09_lowering:stats_in_source", source, name, specs)
    for key in STATS_KEYS:
        judge_stats(got, right, key, f"{name} (the stub's example)")


def test_export_runs_at_two_batches(submission, truth):
    rng = np.random.default_rng(0)
    xs = [(rng.normal(size=(b, 8)) * 3).astype(np.float32) for b in (2, 5)]
    got = run_learner_export(submission, truth, 8, xs)
    judge_export_numbers(got, xs, features_named=True)
    judge_export_shapes(got, 8)


def test_answers_are_well_formed(submission):
    got = learner_answers(submission)
    if not isinstance(got, dict):
        raise CheckFailed("answers() should return a dict", measured=type(got).__name__, expected="dict",
                          hint="return {'gelu_jaxpr_eqns': ..., ...} with the keys the stub lists")
    missing, extra = sorted(set(QUESTIONS) - set(got)), sorted(set(got) - set(QUESTIONS))
    if missing or extra:
        raise CheckFailed("answers() has the wrong keys", measured=f"missing {missing}, unexpected {extra}",
                          expected=str(sorted(QUESTIONS)), hint="use exactly the keys listed in the docstring")
    for key, (kind, _, _) in QUESTIONS.items():
        value = got[key]
        ok = (isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)) if kind == "list" \
            else type(value) is {"str": str, "int": int}[kind]
        if not ok:
            raise CheckFailed(f"answers()[{key!r}] has the wrong type", measured=type(value).__name__,
                              expected="a list of str" if kind == "list" else kind,
                              hint="names are strings such as 'multiply'; counts are ints")


def test_reads_erf_lowering(submission, truth):
    got = learner_answers(submission)
    facts = truth.probe("ex09_lowering:gelu_truth", GELU_SOURCE)
    judge_answers(got, facts, ("gelu_jaxpr_eqns", "erf_in_stablehlo"))

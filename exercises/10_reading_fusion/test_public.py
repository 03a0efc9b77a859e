"""Public checks for exercise 10 (run by `grade exercise 10`; they carry no points).

The hidden checks read optimized HLO compiled when you are graded, from functions written
then (matmuls, reductions, loops, several dtypes, the three compile pipelines below), and
compile every rewrite case at shapes drawn then.  The truth is read from each compiled
module's structure (XLA's HloModuleProto), in a second, learner-free JAX process.
"""

import pytest

from grader.exercises.ex10_fusion.judges import CASES, EXAMPLE_PIPELINES, EXAMPLES, compile_module, judge_fusions, \
    judge_rewrite, judge_unfused, learner_rewrites, rewrite_applied
from grader.feedback import CheckFailed

# The stub's examples: the grader's own copies (grader/exercises/ex10_fusion/judges.py,
# EXAMPLES), so the check does not trust yours, each compiled under the pipelines of
# EXAMPLE_PIPELINES: "default" is compile(); "wrapper_off" is compile(compiler_options=
# {"xla_disable_hlo_passes": "fusion-wrapper"}); "fusion_off" is {"xla_disable_hlo_passes":
# "fusion,fusion-wrapper"}.  example_loop_print puts fusions in a loop body and, after
# ENTRY's ROOT line, a fusion or bare elementwise work; example_folds_away has no tables;
# example_argmax has a tuple-shaped fusion (an argmax is a variadic reduce).
MODULES = [(name, pipeline) for name in EXAMPLES for pipeline in EXAMPLE_PIPELINES[name]]


@pytest.mark.parametrize("name,pipeline", MODULES)
def test_reads_example_modules(submission, truth, name, pipeline):
    source, specs = EXAMPLES[name]
    module = compile_module(truth, source, name, specs, pipeline)
    got = submission.probe("ex10_fusion:read_text", module["text"])
    what = f"{name} compiled with the {pipeline!r} pipeline"
    judge_fusions(got["fusions"], module, what)
    judge_unfused(got["unfused"], module, what)


def test_rewrites_well_formed(submission):
    got = learner_rewrites(submission)
    if not isinstance(got, dict):
        raise CheckFailed("rewrites() should return a dict", measured=type(got).__name__, expected="dict",
                          hint="return {'x_plus_zero': True, ...} with every key the docstring lists")
    missing, extra = sorted(set(CASES) - set(got)), sorted(set(got) - set(CASES))
    if missing or extra:
        raise CheckFailed("rewrites() has the wrong keys", measured=f"missing {missing}, unexpected {extra}",
                          expected=str(sorted(CASES)), hint="use exactly the keys of the docstring's table")
    bad = sorted(k for k, v in got.items() if type(v) is not bool)
    if bad:
        raise CheckFailed("every answer of rewrites() should be True or False", measured=f"not a bool: {bad}",
                          expected="bool values", hint="True when the case's rule holds in the optimized module")


@pytest.mark.parametrize("key", ["x_times_one", "x_minus_x_f32"])
def test_reads_two_rewrites(submission, truth, key):
    judge_rewrite(learner_rewrites(submission), rewrite_applied(truth, key, [8, 16]), key)

"""Hidden checks for exercise 10: fusions() and unfused() judged on optimized HLO compiled
at grading time from functions written from the seed (several shapes, dtypes and compile
pipelines), and the rewrite answers judged by compiling each case now, at a shape drawn
now.  The truth is read from each module's structure in the clean worker."""

import numpy as np
import pytest

from grader.exercises.ex10_fusion.judges import CASES, EXAMPLES, PIPELINES, REWRITE_ADVICE, REWRITE_DISAGREES, \
    compile_module, judge_fusions, judge_rewrite, judge_unfused, learner_rewrites, rewrite_applied
from grader.coverage import Coverage, CoverageError, ensure
from grader.feedback import CheckFailed

# --------------------------------------------------------------------------------------
# Functions written at grading time
# --------------------------------------------------------------------------------------

UNARY = ("jnp.sin({v})", "jnp.tanh({v})", "jnp.exp(-{v} * {v})", "jax.nn.sigmoid({v})", "jnp.abs({v})",
         "jnp.cos({v})", "jnp.log1p(jnp.abs({v}))", "jnp.sqrt({v} * {v} + {c})")
BINARY = ("{a} + {b}", "{a} * {b}", "{a} - {c} * {b}", "jnp.maximum({a}, {b})", "jnp.minimum({a}, {b})",
          "{a} / (1.0 + jnp.abs({b}))")
INT_UNARY = ("{v} * {k}", "{v} // {k}", "{v} % {k}", "jnp.abs({v})", "-{v}", "{v} >> 1")
INT_BINARY = ("{a} + {b}", "{a} * {b}", "jnp.maximum({a}, {b})", "{a} - {b}", "{a} ^ {b}")


class Writer:
    def __init__(self, rng, dtype):
        self.rng, self.dtype = rng, dtype
        self.integer = dtype == "int32"

    def pick(self, options):
        return options[int(self.rng.integers(len(options)))]

    def c(self):
        return f"{float(self.rng.uniform(0.2, 1.8)):.2f}"

    def unary(self, v):
        if self.integer:
            return self.pick(INT_UNARY).format(v=v, k=int(self.rng.integers(2, 7)))
        return self.pick(UNARY).format(v=v, c=self.c())

    def binary(self, a, b):
        if self.integer:
            return self.pick(INT_BINARY).format(a=a, b=b)
        return self.pick(BINARY).format(a=a, b=b, c=self.c())

    def const(self):
        return str(int(self.rng.integers(2, 7))) if self.integer else self.c()

    def chain(self, v, length):
        """An expression of `length` elementwise steps on `v` (a variable name); a binary step
        takes a constant, so no step is `v - v` or `max(v, v)`, which XLA may fold away."""
        expr = v
        for _ in range(length):
            expr = self.unary(f"({expr})") if self.rng.random() < 0.6 else self.binary(f"({expr})", self.const())
        return expr


def _shape(rng, low, high):
    return [int(rng.integers(low, high + 1)), int(rng.integers(low, high + 1))]


def scenario(rng, name):
    """(source of `f`, arg specs, pipeline, structural labels) for one named scenario."""
    if name == "matmul_epilogue":  # a dot big enough for a kCustom fusion, then elementwise work
        w = Writer(rng, "float32")
        m, k, n = (int(rng.integers(8, 41)) for _ in range(3))
        src = f"def f(x, w, b):\n    v = x @ w + b[None, :]\n    return {w.chain('v', int(rng.integers(1, 4)))}\n"
        specs = [[[m, k], "float32"], [[k, n], "float32"], [[n], "float32"]]
        return src, specs, "default", {"matmul_epilogue", "float32"}
    if name == "reduction":  # a row reduction fused with what feeds and follows it
        dtype = str(rng.choice(["float32", "bfloat16"]))
        w = Writer(rng, dtype)
        red = w.pick(("jnp.sum", "jnp.max", "jnp.mean"))
        # an argmax too: a variadic reduce, tuple-shaped ((f32[], s32[])), inside a fusion
        src = (f"def f(x):\n    u = {w.chain('x', int(rng.integers(1, 3)))}\n"
               f"    s = {red}(u, axis=-1, keepdims=True)\n    return {w.chain('(u - s)', int(rng.integers(1, 3)))}, "
               f"jnp.argmax(u, axis=-1)\n")
        return src, [[_shape(rng, 3, 24), dtype]], "default", {"reduction", dtype}
    if name == "loop":  # elementwise work in a loop body: fusions outside ENTRY
        dtype = str(rng.choice(["float32", "bfloat16"]))
        w = Writer(rng, dtype)
        body = w.chain("u", int(rng.integers(2, 4)))
        src = (f"def f(x):\n    v = lax.fori_loop(0, {int(rng.integers(2, 6))}, lambda i, u: {body}, x)\n"
               f"    return {w.chain('v', 1)}\n")
        return src, [[_shape(rng, 2, 16), dtype]], "default", {"loop", dtype}
    if name == "chain":  # elementwise work on two inputs, two outputs, not f32, default or wrapper off
        dtype = str(rng.choice(["bfloat16", "float16", "int32"]))
        w = Writer(rng, dtype)
        pipeline = str(rng.choice(["default", "wrapper_off"]))
        src = (f"def f(x, y):\n    a = {w.binary('(' + w.chain('x', int(rng.integers(1, 4))) + ')', 'y')}\n"
               f"    return a, {w.chain('a', int(rng.integers(1, 3)))}\n")
        shape = _shape(rng, 2, 32)
        return src, [[shape, dtype], [shape, dtype]], pipeline, {"chain", dtype, "not_float32", pipeline}
    if name == "lone_ops":  # wrapper off: single elementwise ops stay bare in ENTRY, chains fuse
        dtype = str(rng.choice(["float32", "int32"]))  # (CPU computes f16/bf16 in f32: convert chains)
        w = Writer(rng, dtype)
        src = (f"def f(x, y):\n    lone = {w.unary('x')}\n    pair = {w.binary('x', 'y')}\n"
               f"    fused = {w.chain('y', int(rng.integers(2, 4)))}\n    return lone, pair, fused\n")
        shape = _shape(rng, 2, 32)
        return src, [[shape, dtype], [shape, dtype]], "wrapper_off", {"lone_ops", dtype, "wrapper_off"}
    if name == "nothing_fused":  # fusion off: every elementwise op bare, in ENTRY and in a loop body
        dtype = str(rng.choice(["float32", "bfloat16", "int32"]))
        w = Writer(rng, dtype)
        body = w.chain("u", int(rng.integers(1, 3)))
        src = (f"def f(x):\n    v = {w.chain('x', int(rng.integers(1, 3)))}\n"
               f"    v = lax.fori_loop(0, {int(rng.integers(2, 5))}, lambda i, u: {body}, v)\n"
               f"    return {w.chain('v', int(rng.integers(1, 3)))}\n")
        return src, [[_shape(rng, 2, 16), dtype]], "fusion_off", {"nothing_fused", dtype, "fusion_off"}
    if name in ("side_effect", "side_effect_bare"):  # a jax.debug.print: XLA prints it, and the work
        # only it reads, after ENTRY's ROOT line (a fusion there, or with fusion off bare elementwise
        # work).  The printed value reads the returned one, a dot, which XLA never recomputes inside
        # another fusion: so the print's work must come after ROOT.
        dtype = str(rng.choice(["float32", "bfloat16", "float16", "int32"]))
        w = Writer(rng, dtype)
        pipeline = "fusion_off" if name == "side_effect_bare" else str(rng.choice(["default", "wrapper_off"]))
        src = (f"def f(x, w):\n    y = ({w.chain('x', int(rng.integers(1, 3)))}) @ w\n"
               f"    jax.debug.print('y: {{}}', {w.chain('y', int(rng.integers(2, 4)))})\n    return y\n")
        m, k, n = (int(rng.integers(2, 17)) for _ in range(3))
        return src, [[[m, k], dtype], [[k, n], dtype]], pipeline, {name, dtype, pipeline}
    if name == "no_tables":  # simplified down to a copy: no source locations, so no tables in the text
        pipeline = str(rng.choice(["default", "wrapper_off", "fusion_off"]))
        src = f"def f(x):\n    return {Writer(rng, 'float32').pick(('x + 0.0', 'x * 1.0'))}\n"
        return src, [[_shape(rng, 2, 16), "float32"]], pipeline, {"no_tables", pipeline}
    if name == "small_dot":  # default pipeline: nothing elementwise left, a bare dot and reduce
        w = Writer(rng, "float32")
        m, k, n = (int(rng.integers(2, 5)) for _ in range(3))
        src = (f"def f(x, w):\n    v = ({w.chain('x', int(rng.integers(1, 3)))}) @ w\n"
               f"    return {w.chain('v', int(rng.integers(1, 3)))}, jnp.sum(v)\n")
        return src, [[[m, k], "float32"], [[k, n], "float32"]], "default", {"small_dot", "default"}
    if name == "bare_reduction":  # wrapper off: a lone reduction stays bare and is not elementwise
        dtype = "float32"
        w = Writer(rng, dtype)
        src = (f"def f(x):\n    return jnp.sum(x, axis=0), {w.chain('x', int(rng.integers(1, 3)))}\n")
        return src, [[_shape(rng, 2, 24), dtype]], "wrapper_off", {"bare_reduction", dtype, "wrapper_off"}
    raise ValueError(name)


FUSION_SCENARIOS = ("matmul_epilogue", "reduction", "loop", "chain", "side_effect", "no_tables")
UNFUSED_SCENARIOS = ("lone_ops", "nothing_fused", "small_dot", "bare_reduction", "side_effect_bare", "no_tables")
# What the compiled modules must hold between them (read from their structure at grading
# time -- and, for what comes after ROOT, from the print order of the text; a draw that
# misses one is a grader error, never a silent pass).  "..._outside_examples": an opcode no
# module of the stub's examples holds, so a reader that knows only the examples' opcodes fails.
FUSION_MEASURED = {"fusion_kLoop", "fusion_kCustom", "fusion_outside_entry", "fused_computation_calls",
                   "fusion_after_root", "no_tables", "tuple_shaped_in_fusion", "fused_opcode_outside_examples"}
UNFUSED_MEASURED = {"unfused_elementwise", "no_unfused_elementwise", "bare_non_elementwise",
                    "elementwise_outside_entry", "elementwise_after_root", "no_tables",
                    "unfused_opcode_outside_examples"}


def draw(rng, scenarios):
    return [scenario(np.random.default_rng([int(rng.integers(2**31)), i]), name)
            for i, name in enumerate(scenarios)]


def structural_labels(drawn):
    return set().union(*(labels for _, _, _, labels in drawn))


COVERAGE = {
    "fusions_match_module": Coverage(
        required=set(FUSION_SCENARIOS) | {"float32", "not_float32"},
        labels=lambda rng: structural_labels(draw(rng, FUSION_SCENARIOS)), test="test_fusions_match_module"),
    "unfused_match_module": Coverage(
        required=set(UNFUSED_SCENARIOS) | {"wrapper_off", "fusion_off", "default"},
        labels=lambda rng: structural_labels(draw(rng, UNFUSED_SCENARIOS)), test="test_unfused_match_module"),
}
WHAT = "optimized HLO compiled at grading time"


def opcodes_of_examples(truth):
    """Every opcode of every module the stub's examples compile to, under every pipeline
    (compiled now, with the JAX that grades)."""
    return set().union(*(compile_module(truth, source, name, specs, pipeline)["all_opcodes"]
                         for name, (source, specs) in EXAMPLES.items() for pipeline in PIPELINES))


@pytest.fixture(scope="module")
def example_opcodes(truth):
    return opcodes_of_examples(truth)


def outside_examples(module, known):
    labels = set()
    if set(module["unfused"]) - known:
        labels.add("unfused_opcode_outside_examples")
    if any(set(f["opcodes"]) - known for f in module["fusions"]):
        labels.add("fused_opcode_outside_examples")
    return labels


def _compiled(truth, rng, check, scenarios, measured_required, known):
    drawn = draw(rng, scenarios)
    ensure(check, COVERAGE[check].required, structural_labels(drawn))
    modules = [compile_module(truth, src, "f", specs, pipeline) for src, specs, pipeline, _ in drawn]
    measured = set().union(*(set(m["labels"]) | outside_examples(m, known) for m in modules))
    missing = sorted(measured_required - measured)
    if missing:
        raise CoverageError(f"the modules compiled for `{check}` hold no {missing}: XLA changed; fix the draw")
    return modules


def test_fusions_match_module(submission, truth, rng, example_opcodes):
    for module in _compiled(truth, rng, "fusions_match_module", FUSION_SCENARIOS, FUSION_MEASURED, example_opcodes):
        got = submission.probe("ex10_fusion:read_text", module["text"])
        judge_fusions(got["fusions"], module, WHAT)


def test_unfused_match_module(submission, truth, rng, example_opcodes):
    for module in _compiled(truth, rng, "unfused_match_module", UNFUSED_SCENARIOS, UNFUSED_MEASURED, example_opcodes):
        got = submission.probe("ex10_fusion:read_text", module["text"])
        judge_unfused(got["unfused"], module, WHAT)


# --------------------------------------------------------------------------------------
# Rewrites: every case compiled now, each at a shape drawn now (both dimensions at least 2).
# One test for all cases: with yes/no answers, even the number of wrong ones is a clue.
# --------------------------------------------------------------------------------------

def test_rewrites_match_xla(submission, truth, rng):
    answers = learner_rewrites(submission)
    wrong = []
    for key in sorted(CASES):
        shape = [int(rng.integers(2, 65)), int(rng.integers(2, 65))]
        try:
            judge_rewrite(answers, rewrite_applied(truth, key, shape), key)
        except CheckFailed as failed:
            if failed.diagnosis != REWRITE_DISAGREES:  # a missing key or a non-bool: say so now
                raise
            wrong.append(f"{key} at {shape}: {failed.measured}, expected {failed.expected}")
    if wrong:
        raise CheckFailed(f"{len(wrong)} rewrite answer(s) disagree with XLA", measured="; ".join(wrong),
                          expected="every answer as the case's rule reads the optimized module",
                          diagnosis=REWRITE_DISAGREES, advice=REWRITE_ADVICE)

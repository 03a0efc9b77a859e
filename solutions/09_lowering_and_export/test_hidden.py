"""Hidden checks for exercise 9: ir_stats judged on functions written at grading time, the
exported GELU run at batch sizes drawn at grading time, and the reading answers judged
against what the installed JAX produces (all truth measured in the clean worker)."""

import numpy as np
import pytest

from grader.exercises.ex09_lowering.judges import GELU_SOURCE, QUESTIONS, judge_answers, judge_export_numbers, \
    judge_export_shapes, judge_stats, learner_answers, run_learner_export
from grader.coverage import Coverage, ensure

# --------------------------------------------------------------------------------------
# Functions written at grading time: f(x, w) with x: f32[m, n] and w: f32[n, n]
# --------------------------------------------------------------------------------------

# One line each: elementwise work that keeps v's shape.
SIMPLE = (
    "v = jnp.sin(v) + {c}",
    "v = jnp.tanh(v * {c})",
    "v = v * v - {c}",
    "v = jnp.exp(-v * v)",
    "v = jnp.maximum(v, {c}) - jnp.minimum(v, -{c})",
    "v = jax.nn.sigmoid(v) * {c}",
    "v = jnp.sqrt(v * v + {c})",
    "v = jnp.log1p(jnp.abs(v))",
    "v = jnp.abs(v) / (1.0 + {c} * v * v)",
    "v = jnp.cos(v) * v",
)
# The constructs each check must meet at every seed: each prints differently in StableHLO
# and HLO (a short-form reduce, a reducer body, a case with regions, a while with cond/do
# regions, a private function and its calls, a chlo op, a sort comparator, a dot).
CONSTRUCTS = ("reduce_short", "reduce_full", "case", "while", "call", "where", "erf", "sort", "dot")
# ... and a side effect, in a function of its own: jax.debug.print's custom-call, which XLA
# schedules after the ROOT line of the optimized ENTRY when the function returns one array
# (a reader that stops at ROOT misses it).  The checks confirm it sits there (``AFTER_ROOT``).
SIDE_EFFECT = "side_effect"
SIDE_EFFECT_BODIES = (  # the print last: before XLA's passes too, it sits after ROOT (``HLO_AFTER_ROOT``)
    'v = x\n{s1}\n{s2}\njax.debug.print("v: {{}}", jnp.cos(v) + {c})',
    'v = x\n{s1}\n{s2}\njax.debug.print("v: {{}}", jnp.sum(v * {c}))',
    'v = x\n{s1}\n{s2}\njax.debug.print("x: {{}}", jnp.sum(x) + {c})',
)


class FunctionWriter:
    """Writes the source of ``f(x, w)``; helpers ``h1, h2, ...`` hold a few simple lines."""

    def __init__(self, rng):
        self.rng = rng
        self.defs = []
        self.used = []
        self.count = 0

    def _c(self):
        return f"{float(self.rng.uniform(0.2, 1.8)):.2f}"

    def _pick(self, options):
        return options[int(self.rng.integers(len(options)))]

    def simple(self):
        line = self._pick(SIMPLE)
        while "{c}" in line:
            line = line.replace("{c}", self._c(), 1)
        return line

    def helper(self, decorator=""):
        self.count += 1
        name = f"h{self.count}"
        lines = [self.simple() for _ in range(int(self.rng.integers(1, 3)))]
        self.defs.append((f"@{decorator}\n" if decorator else "") + f"def {name}(v):\n"
                         + "".join(f"    {line}\n" for line in lines) + "    return v\n")
        return name

    def construct(self, kind):
        self.used.append(kind)
        c = self._c()
        if kind == "reduce_short":
            return self._pick((f"v = v - jnp.sum(v, axis=-1, keepdims=True) * {c}",
                               "v = v / (1.0 + jnp.max(jnp.abs(v)))",
                               f"v = v * jnp.min(v, axis=0) + {c}"))
        if kind == "reduce_full":
            return self._pick((f"v = v + {c} * jnp.argmax(v, axis=-1, keepdims=True).astype(v.dtype)",
                               "v = v * jnp.argmin(v, axis=0, keepdims=True).astype(v.dtype)"))
        if kind == "case":
            a = self.helper()
            b = a if self.rng.random() < 0.3 else self.helper()
            return f"v = lax.cond(jnp.sum(v) > {c}, {a}, {b}, v)"
        if kind == "while":
            h = self.helper()
            k = int(self.rng.integers(2, 5))
            return self._pick((f"v = lax.fori_loop(0, {k}, lambda i, u: {h}(u), v)",
                               f"_, v = lax.while_loop(lambda s: s[0] < {k}, lambda s: (s[0] + 1, {h}(s[1])), (0, v))"))
        if kind == "call":
            h = self.helper("jax.jit")
            # called twice, always: one private function, written once, counted once
            return self._pick((f"v = {h}({h}(v))", f"v = {h}(v) + {h}(v * {c})"))
        if kind == "where":
            return self._pick((f"v = jnp.where(v > {c}, v, {c} * v)", f"v = jnp.where(v < 0, -v, v * {c})"))
        if kind == "erf":
            return self._pick((f"v = lax.erf(v * {c})", "v = v * (1.0 + lax.erf(v))"))
        if kind == "sort":
            return self._pick(("v = jnp.sort(v, axis=-1)", f"v = jnp.sort(v, axis=0) * {c}"))
        if kind == "dot":
            return self._pick(("v = v @ w", f"v = jnp.tanh(v @ w) + {c} * v"))
        raise ValueError(kind)

    def function(self, forced):
        """The source of ``f``: every construct in ``forced``, in random order, among simple lines."""
        kinds = list(forced) + [self._pick(CONSTRUCTS) for _ in range(int(self.rng.integers(0, 2)))]
        self.rng.shuffle(kinds)
        lines = ["v = x"]
        for kind in kinds:
            if self.rng.random() < 0.5:
                lines.append(self.simple())
            lines.append(self.construct(kind))
        ret = self._pick(("return v", "return v, jnp.sum(v)"))
        body = "".join(f"    {line}\n" for line in lines) + f"    {ret}\n"
        return "\n".join(self.defs) + "\n\ndef f(x, w):\n" + body

    def side_effect_function(self):
        """``f`` of a few elementwise lines and a jax.debug.print, returning one array."""
        self.used.append(SIDE_EFFECT)
        lines = self._pick(SIDE_EFFECT_BODIES).format(s1=self.simple(), s2=self.simple(), c=self._c()).split("\n")
        return "def f(x, w):\n" + "".join(f"    {line}\n" for line in lines) + "    return v\n"


def draw_functions(rng, n_functions=2):
    """``n_functions`` functions that between them hold every construct, and one with a side
    effect: [(source, specs, kinds)]."""
    order = list(CONSTRUCTS)
    rng.shuffle(order)
    out = []
    for i in range(n_functions + 1):
        writer = FunctionWriter(rng)
        source = writer.function(order[i::n_functions]) if i < n_functions else writer.side_effect_function()
        m, n = int(rng.choice([2, 3, 4, 5, 6, 16])), int(rng.choice([2, 3, 4, 5, 32]))
        out.append((source, [[[m, n], "float32"], [[n, n], "float32"]], sorted(set(writer.used))))
    return out


def labels_of(drawn):
    return {kind for _, _, kinds in drawn for kind in kinds}


def _stats_coverage(test):
    return Coverage(required=set(CONSTRUCTS) | {SIDE_EFFECT}, labels=lambda rng: labels_of(draw_functions(rng)),
                    test=test)


# --------------------------------------------------------------------------------------
# The export's draw: a feature count and batch sizes the statement never names
# --------------------------------------------------------------------------------------

PUBLIC_FEATURES, PUBLIC_BATCHES = 8, (2, 5)


def draw_export(rng):
    """(features, [batch sizes]): a batch of one, a large batch, one more; never the public values."""
    features = int(rng.choice([f for f in range(3, 41) if f != PUBLIC_FEATURES]))
    middle = int(rng.choice([b for b in range(3, 17) if b not in PUBLIC_BATCHES]))
    large = int(rng.integers(33, 97))
    batches = [1, middle, large]
    rng.shuffle(batches)
    return features, batches


def export_labels(features, batches):
    labels = {"batch_one" if b == 1 else "batch_large" if b > 32 else "batch_other" for b in batches}
    if features != PUBLIC_FEATURES:
        labels.add("features_not_public")
    if not set(batches) & set(PUBLIC_BATCHES):
        labels.add("batches_not_public")
    return labels


COVERAGE = {
    "jaxpr_and_stablehlo_counts": _stats_coverage("test_jaxpr_and_stablehlo_counts"),
    "hlo_opcode_counts": _stats_coverage("test_hlo_opcode_counts"),
    "optimized_entry_counts": _stats_coverage("test_optimized_entry_counts"),
    "export_matches_gelu": Coverage(
        required={"batch_one", "batch_other", "batch_large", "features_not_public", "batches_not_public"},
        labels=lambda rng: export_labels(*draw_export(rng)), test="test_export_matches_gelu"),
    "export_batch_is_symbolic": Coverage(
        required={"features_not_public"},
        labels=lambda rng: export_labels(*draw_export(rng)), test="test_export_batch_is_symbolic"),
}

WHAT = ("a function written at grading time (reductions, sort, cond, loops, nested jit, where, erf, a dot, "
        "a jax.debug.print)")


AFTER_ROOT = "an instruction after the optimized ENTRY's ROOT line"
HLO_AFTER_ROOT = "an instruction after a ROOT line of the module before XLA's passes"


def judge_functions(submission, truth, rng, check, keys):
    drawn = draw_functions(rng)
    ensure(check, COVERAGE[check].required, labels_of(drawn))
    rights = [truth.probe("ex09_lowering:truth_stats", source, "f", specs) for source, specs, _ in drawn]
    if check == "optimized_entry_counts":  # the side effect must really sit after ROOT in this JAX
        ensure(check, {AFTER_ROOT}, {AFTER_ROOT} if any(r["entry_after_root"] for r in rights) else set())
    if check == "hlo_opcode_counts":  # ... and before XLA's passes, after some computation's ROOT
        ensure(check, {HLO_AFTER_ROOT}, {HLO_AFTER_ROOT} if any(r["module_after_root"] for r in rights) else set())
    for (source, specs, _), right in zip(drawn, rights):
        got = submission.probe("ex09_lowering:stats_in_source", source, "f", specs)
        for key in keys:
            judge_stats(got, right, key, WHAT)


def test_jaxpr_and_stablehlo_counts(submission, truth, rng):
    judge_functions(submission, truth, rng, "jaxpr_and_stablehlo_counts", ("jaxpr_eqns", "stablehlo_ops"))


def test_hlo_opcode_counts(submission, truth, rng):
    judge_functions(submission, truth, rng, "hlo_opcode_counts", ("hlo_opcodes",))


def test_optimized_entry_counts(submission, truth, rng):
    judge_functions(submission, truth, rng, "optimized_entry_counts", ("optimized_entry_opcodes",))


def _export_inputs(rng, check):
    features, batches = draw_export(rng)
    ensure(check, COVERAGE[check].required, export_labels(features, batches))
    xs = [(rng.normal(size=(b, features)) * 3).astype(np.float32) for b in batches]
    return features, xs


def test_export_matches_gelu(submission, truth, rng):
    features, xs = _export_inputs(rng, "export_matches_gelu")
    got = run_learner_export(submission, truth, features, xs)
    judge_export_numbers(got, xs, features_named=False)


def test_export_batch_is_symbolic(submission, truth, rng):
    features, xs = _export_inputs(rng, "export_batch_is_symbolic")
    got = run_learner_export(submission, truth, features, xs[:1])
    judge_export_shapes(got, features)


# --------------------------------------------------------------------------------------
# Reading answers, each measured now in the clean worker
# --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gelu_facts(truth):
    return truth.probe("ex09_lowering:gelu_truth", GELU_SOURCE)


def test_reading_answers(submission, gelu_facts):
    judge_answers(learner_answers(submission), gelu_facts, sorted(QUESTIONS))

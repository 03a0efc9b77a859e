"""Hidden checks for exercise 11: shapes, dtypes and functions drawn at grading time.

The truth is measured live in the clean worker (`grader/exercises/ex11_cost/probes.py`): the same
programs compiled with the installed JAX, their `cost_analysis()` and `memory_analysis()`
read there.  The learner's predictions run in a worker where JAX does not exist
(`without_jax`, `grader.sandbox.nojax`): a prediction that asks XLA instead of using a
formula fails there, whatever route to XLA it takes.  The timing checks compare
the learner's `benchmark` with the probe's own timing of an equivalent fresh function in
the same process, before and after (bounds and their reasons: `grader/exercises/ex11_cost/judges.py`).
"""

import zlib

import numpy as np
import pytest

from grader.coverage import Coverage, ensure
from grader.exercises.ex11_cost import judges as ref
from grader.feedback import CheckFailed

PROBE = "ex11_cost:"


# --- Part A ------------------------------------------------------------------------------------
def draw_dot_shapes(rng):
    """One (m, k, n) of each kind, in random order; every dimension at least 2."""
    def ints(lo, hi, size=3):
        return [int(v) for v in rng.integers(lo, hi + 1, size=size)]

    square = int(rng.integers(8, 65))
    thin = ints(32, 160)
    thin[int(rng.integers(3))] = 2
    shapes = {"tiny": ints(2, 4), "square": [square] * 3, "thin": thin, "large": ints(100, 300),
              "mixed": ints(2, 200)}
    order = [str(k) for k in rng.permutation(list(shapes))]
    return [(kind, tuple(shapes[kind])) for kind in order]


def draw_elementwise_cases(rng):
    """Ranks 1, 2, 3 and one more; float32 and float16 both present; dimensions 1..40."""
    ranks = [int(r) for r in rng.permutation([1, 2, 3])] + [int(rng.integers(1, 4))]
    dtypes = [str(d) for d in rng.permutation(["float32", "float16"])] + \
             [str(rng.choice(["float32", "float16"])) for _ in range(2)]
    return [(tuple(int(d) for d in rng.integers(1, 41, size=r)), dt) for r, dt in zip(ranks, dtypes)]


def elementwise_labels(cases):
    return {f"rank{len(shape)}" for shape, _ in cases} | {dtype for _, dtype in cases}


# --- Part B ------------------------------------------------------------------------------------
def dims(rng, lo=2, hi=64):
    return int(rng.integers(lo, hi + 1))


def draw_reports(rng):
    """Every function of FUNCTIONS once, with drawn f32 shapes (donation only for `update`)."""
    b, k, n = dims(rng), dims(rng), dims(rng)
    cases = {
        "matmul": [[b, k], [k, n]],
        "chain": [[b, n]] * 2,
        "layer": [[b, k], [k, n], [n]],
        "twice": [[b, k], [k, n]],
        "softmax": [[b, dims(rng)]],
        "update": [[dims(rng), dims(rng)]] * 2,
        "sumsq": [[dims(rng), dims(rng)]],
    }
    order = [str(name) for name in rng.permutation(list(cases))]
    return [{"name": name, "shapes": cases[name], "donate": [0] if name == "update" else []} for name in order]


COVERAGE = {
    "predicts_dot_cost": Coverage(required={"tiny", "square", "thin", "large", "mixed"},
                                  labels=lambda rng: {kind for kind, _ in draw_dot_shapes(rng)},
                                  test="test_predicts_dot_cost"),
    "predicts_elementwise_cost": Coverage(required={"rank1", "rank2", "rank3", "float32", "float16"},
                                          labels=lambda rng: elementwise_labels(draw_elementwise_cases(rng)),
                                          test="test_predicts_elementwise_cost"),
    "analyze_matches_live": Coverage(required={"matmul", "chain", "layer", "twice", "softmax", "update", "sumsq"},
                                     labels=lambda rng: {c["name"] for c in draw_reports(rng)},
                                     test="test_analyze_matches_live"),
}


def test_predicts_dot_cost(without_jax, truth, rng):
    drawn = draw_dot_shapes(rng)
    ensure("predicts_dot_cost", COVERAGE["predicts_dot_cost"].required, {kind for kind, _ in drawn})
    want = truth.probe(PROBE + "dot_costs", [list(s) for _, s in drawn])
    outputs = ref.predictions(without_jax, "dot_cost", [list(s) for _, s in drawn])
    wrong = {"flops": [], "bytes": []}
    for (kind, shape), out, w in zip(drawn, outputs, want):
        got = ref.read_dict(out, ("flops", "bytes"), "dot_cost(m, k, n)")
        for key in wrong:
            if ref.mismatches(got, w, (key,)):
                wrong[key].append(f"{kind} {shape}: {got[key]:g} vs {w[key]:g}")
    if wrong["flops"] or wrong["bytes"]:
        which = " and ".join(k for k in ("flops", "bytes") if wrong[k])
        raise CheckFailed(f"dot_cost's {which} disagree with XLA's cost analysis",
                          measured="; ".join(wrong["flops"] + wrong["bytes"]), expected="the live cost analysis",
                          diagnosis=f"dot_cost predicts the wrong {which} for at least one shape",
                          advice={"flops": "each of the m*n outputs is a dot product of length k: count its "
                                           "multiplies and its adds",
                                  "bytes": "count every byte of both operands and of the result, 4 per float32, "
                                           "each exactly once",
                                  "flops and bytes": "flops: multiplies and adds of m*n dot products of length k; "
                                                     "bytes: both operands and the result, 4 bytes per float32"
                                  }[which])


def test_predicts_elementwise_cost(without_jax, truth, rng):
    cases = draw_elementwise_cases(rng)
    ensure("predicts_elementwise_cost", COVERAGE["predicts_elementwise_cost"].required, elementwise_labels(cases))
    want = truth.probe(PROBE + "elementwise_costs", [[list(s), d] for s, d in cases])
    outputs = ref.predictions(without_jax, "elementwise_cost", [[s, d] for s, d in cases])
    keys = ("flops", "bytes", "transcendentals")
    wrong = {k: [] for k in keys}
    dtypes_wrong = set()
    for (shape, dtype), out, w in zip(cases, outputs, want):
        got = ref.read_dict(out, keys, "elementwise_cost(shape, dtype)")
        for key in keys:
            if ref.mismatches(got, w, (key,)):
                wrong[key].append(f"{shape} {dtype}: {got[key]:g} vs {w[key]:g}")
                dtypes_wrong.add(dtype)
    bad = [k for k in keys if wrong[k]]
    if bad:
        advice = {"flops": "the multiply and the add are flops; tanh is counted apart, as a transcendental",
                  "transcendentals": "one tanh per element",
                  "bytes": "after fusion only the two inputs are read and the output written; the size of an "
                           "element depends on the dtype"}
        raise CheckFailed(f"elementwise_cost's {', '.join(bad)} disagree with XLA's cost analysis",
                          measured="; ".join(wrong["flops"] + wrong["bytes"] + wrong["transcendentals"]),
                          expected="the live cost analysis",
                          diagnosis=f"elementwise_cost predicts the wrong {', '.join(bad)} for "
                                    f"{' and '.join(sorted(dtypes_wrong))} inputs",
                          advice="; ".join(advice[k] for k in bad))


# --- Part B ------------------------------------------------------------------------------------
def test_analyze_matches_live(submission, truth, rng):
    cases = draw_reports(rng)
    ensure("analyze_matches_live", COVERAGE["analyze_matches_live"].required, {c["name"] for c in cases})
    want = truth.probe(PROBE + "reports", cases)
    got = submission.probe(PROBE + "analyze_each", cases, int(rng.integers(2**31 - 1)))
    wrong, unoptimized, cases_wrong = {}, [], 0
    for case, g, w in zip(cases, got, want):
        g = ref.read_dict(g, ref.REPORT_KEYS, "analyze(fn, *args)")
        full = {**w, "intensity": w["flops"] / w["bytes"]}
        lines = ref.mismatches(g, full, ref.REPORT_KEYS)
        cases_wrong += bool(lines)
        for line in lines:
            wrong.setdefault(line.split(":")[0], []).append(f"{case['name']}: {line}")
        before = {**w["unoptimized"], "intensity": w["unoptimized"]["flops"] / w["unoptimized"]["bytes"]}
        costs = ("flops", "bytes", "intensity")
        if ref.mismatches(g, full, costs) and not ref.mismatches(g, before, costs):
            unoptimized.append(case["name"])
    if wrong:
        advice = {"flops": "read 'flops' from the compiled program's cost_analysis()",
                  "bytes": "'bytes accessed' of the compiled program's cost_analysis()",
                  "transcendentals": "the entry is missing when there are none: count that as 0",
                  "intensity": "intensity is flops divided by bytes accessed",
                  "argument_bytes": "memory_analysis().argument_size_in_bytes",
                  "output_bytes": "memory_analysis().output_size_in_bytes",
                  "alias_bytes": "memory_analysis().alias_size_in_bytes, with donate_argnums passed to jax.jit"}
        keys = [k for k in ref.REPORT_KEYS if k in wrong]
        diagnosis = f"analyze reports the wrong {', '.join(keys)} for some functions"
        if unoptimized:
            diagnosis += ("; its costs match the program before XLA optimized it (Lowered.cost_analysis), not "
                          "the compiled one")
        elif cases_wrong == len(cases) and {"flops", "bytes", "argument_bytes"} <= set(keys):
            diagnosis = ("analyze's numbers match none of the seven compiled programs (their flops, bytes and "
                         "sizes all differ): numbers that do not follow the function and its shapes were not "
                         "read from the compiled program")
            advice = {k: "" for k in advice} | {
                keys[0]: "compile fn for these args -- jax.jit(fn, donate_argnums=...).lower(*args).compile() -- and "
                         "read every number from its cost_analysis() (a dict) and memory_analysis() on each call: "
                         "none of them can be written in advance"}
        raise CheckFailed(f"analyze disagrees with the compiled programs' analyses on {', '.join(keys)}",
                          measured="\n".join(line for k in keys for line in wrong[k]),
                          expected="the live analyses of the same compiled programs",
                          diagnosis=diagnosis, advice="; ".join(advice[k] for k in keys if advice[k]))


# --- Part C ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def timing(submission, seed):
    rng = np.random.default_rng([seed, zlib.crc32(b"ex11-timing")])
    return ref.measure_timing(lambda: submission.probe(PROBE + "benchmark_against_probe", ref.TIMING_SIZES,
                                                       ref.LEARNER_REPEATS, int(rng.integers(2**31 - 1)),
                                                       ref.REPEATS_AGAIN))


def test_run_time_honest(timing):
    problems = ref.run_problems(timing)
    if problems:
        code = problems[0][0]
        diagnosis, advice = {
            "not_measured": ("benchmark returned times without compiling fn: nothing it reports was measured",
                             "compile jax.jit(fn) for these arguments inside benchmark, then time its runs"),
            "not_run": ("benchmark returned a run time without running the compiled fn once per timed call: "
                        "the grader counts fn's runs, and fewer happened than `repeats`",
                        "call the compiled function `repeats` times after the warm-up, time each call (blocking on "
                        "its result), and return the median of what you measured"),
            "no_block": ("your run time is far below what one call takes: the clock stopped before the result "
                         "was ready (JAX dispatches asynchronously)",
                         "wait for each timed call: jax.block_until_ready(compiled(*args)) inside the timed region"),
            "total": ("your run time is many runs long: it grows with repeats, so it is the total of the timed "
                      "calls, not one call",
                      "return the median (or the minimum) of the per-call times, not their sum"),
            "compile_in_run": ("your run time is as long as a compilation: a timed call compiled (or traced) "
                               "the function",
                               "compile and warm up before the timed loop, and time calls of the compiled function"),
            "no_scaling": ("your run times do not follow the work: a workload with far more arithmetic did not "
                           "take longer (the light workload compiles slower and runs faster: a run time that "
                           "holds a compile, the first call of a fresh jit say, follows the compile instead)",
                           "compile and warm up first, then time fn(*args) itself on every repeat, and return what "
                           "you measured"),
        }[code]
        raise CheckFailed("benchmark's run time is not an honest measurement",
                          measured="\n".join(text for _, text in problems),
                          expected="run times close to the grader's own runs of the same function",
                          diagnosis=diagnosis, advice=advice)


def test_compile_time_honest(timing):
    problems = ref.compile_problems(timing)
    if problems and problems[0][0] == "not_measured":
        raise CheckFailed("benchmark's compile time is not a measurement", measured="\n".join(t for _, t in problems),
                          expected="fn lowered and compiled inside benchmark",
                          diagnosis="benchmark returned a compile time without compiling fn",
                          advice="time jax.jit(fn).lower(*args).compile(), or the first call of a fresh jitted fn")
    if problems and problems[0][0] == "no_compile_scaling":
        raise CheckFailed(
            "benchmark's compile times do not follow the program", measured="\n".join(t for _, t in problems),
            expected="the light workload (eight layers) taking longer to compile than the heavy one (one layer), "
                     "as the grader's own compiles do",
            diagnosis="your compile time did not grow with the program to compile: it was not measured around "
                      "the compile of fn (a constant, or a time taken of something else)",
            advice="time jax.jit(fn).lower(*args).compile() itself, for the arguments given, and return that time")
    if problems:
        low = problems[0][0] == "low"
        raise CheckFailed(
            "benchmark's compile time is not an honest measurement",
            measured="\n".join(text for _, text in problems),
            expected="compile times close to the grader's own compiles of the same function",
            diagnosis=("your compile time is far below what compiling this function takes: nothing was compiled "
                       "inside your timed region" if low else
                       "your compile time is far above what compiling this function takes: more than one "
                       "compile (or the runs) were timed"),
            advice=("jax.jit(fn) only wraps the function (jit is lazy): time jax.jit(fn).lower(*args).compile(), "
                    "or the first call of a fresh jitted function" if low else
                    "time one compile of a fresh jax.jit(fn), nothing else"))

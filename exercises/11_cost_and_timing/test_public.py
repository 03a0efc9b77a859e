"""Public checks for exercise 11 (run by `grade exercise 11`; they carry no points).

The truth is measured live: a second, learner-free JAX process compiles the same programs
and reads their cost and memory analyses.  The hidden checks do the same on shapes and
functions drawn at grading time.
"""

from grader.exercises.ex11_cost import judges as ref
from grader.feedback import CheckFailed

PROBE = "ex11_cost:"


def test_predicts_known_costs(without_jax, truth):
    dot_truth = truth.probe(PROBE + "dot_costs", [(16, 32, 8)])[0]
    got = ref.read_dict(ref.predictions(without_jax, "dot_cost", [(16, 32, 8)])[0], ("flops", "bytes"),
                        "dot_cost(16, 32, 8)")
    bad = ref.mismatches(got, dot_truth, ("flops", "bytes"))
    if bad:
        raise CheckFailed("dot_cost(16, 32, 8) disagrees with XLA's cost analysis", measured="; ".join(bad),
                          expected=f"flops {dot_truth['flops']:g}, bytes {dot_truth['bytes']:g}",
                          hint="count a multiply and an add per term of each dot product; bytes: both operands "
                               "are read and the result written once, 4 bytes per float32")
    ew_truth = truth.probe(PROBE + "elementwise_costs", [((64, 64), "float32")])[0]
    keys = ("flops", "bytes", "transcendentals")
    got = ref.read_dict(ref.predictions(without_jax, "elementwise_cost", [((64, 64), "float32")])[0], keys,
                        "elementwise_cost((64, 64), 'float32')")
    bad = ref.mismatches(got, ew_truth, keys)
    if bad:
        raise CheckFailed("elementwise_cost((64, 64), 'float32') disagrees with XLA's cost analysis",
                          measured="; ".join(bad), expected=", ".join(f"{k} {ew_truth[k]:g}" for k in keys),
                          hint="the three operations fuse into one loop: which of them count as flops, which as "
                               "transcendentals, and which arrays ever touch memory?")


def test_analyze_small(submission, truth):
    cases = [{"name": "matmul", "shapes": [[16, 32], [32, 8]], "donate": []},
             {"name": "chain", "shapes": [[64, 64], [64, 64]], "donate": []},
             {"name": "update", "shapes": [[40, 30], [40, 30]], "donate": [0]}]
    want = truth.probe(PROBE + "reports", cases)
    got = submission.probe(PROBE + "analyze_each", cases, 0)
    for case, g, w in zip(cases, got, want):
        what = f"analyze({case['name']}, ...)"
        g = ref.read_dict(g, ref.REPORT_KEYS, what)
        w = {**w, "intensity": w["flops"] / w["bytes"]}
        bad = ref.mismatches(g, w, ref.REPORT_KEYS)
        if bad:
            raise CheckFailed(f"{what} disagrees with the compiled program's analyses", measured="; ".join(bad),
                              expected=", ".join(f"{k} {w[k]:g}" for k in ref.REPORT_KEYS),
                              hint="jax.jit(fn, donate_argnums=donate_argnums).lower(*args).compile(), then "
                                   ".cost_analysis() (a dict) and .memory_analysis()")


def test_benchmark_small(submission):
    timing = submission.probe(PROBE + "benchmark_against_probe", ref.TIMING_SIZES, ref.TIMING_REPEATS, 0)
    problems = ref.run_problems(timing) + ref.compile_problems(timing)
    if problems:
        raise CheckFailed("benchmark's numbers are not honest timings", measured="\n".join(t for _, t in problems),
                          expected="compile and run times close to the grader's own timing of the same function",
                          hint={"no_block": "block on every timed call: jax.block_until_ready(out)",
                                "compile_in_run": "warm up (and compile) before timing the runs",
                                "no_scaling": "time fn(*args) itself, every call",
                                "low": "jax.jit is lazy: time .lower(*args).compile() (or the first call)",
                                "high": "time only the compile, once"}[problems[0][0]])

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
    # Both dtypes: a bytes formula that ignores the element size is right for float32 only.
    cases = [((64, 64), "float32"), ((48, 32), "float16")]
    keys = ("flops", "bytes", "transcendentals")
    ew_truths = truth.probe(PROBE + "elementwise_costs", [[list(s), d] for s, d in cases])
    outs = ref.predictions(without_jax, "elementwise_cost", [[s, d] for s, d in cases])
    for (shape, dtype), out, ew_truth in zip(cases, outs, ew_truths):
        what = f"elementwise_cost({shape}, {dtype!r})"
        bad = ref.mismatches(ref.read_dict(out, keys, what), ew_truth, keys)
        if bad:
            dtype_only = dtype == "float16" and [b.split(":")[0] for b in bad] == ["bytes"]
            raise CheckFailed(f"{what} disagrees with XLA's cost analysis",
                              measured="; ".join(bad), expected=", ".join(f"{k} {ew_truth[k]:g}" for k in keys),
                              hint="a float16 element is 2 bytes, a float32 one 4: np.dtype(dtype).itemsize"
                              if dtype_only else
                              "the three operations fuse into one loop: which of them count as flops, which as "
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
    timing = ref.measure_timing(lambda: submission.probe(PROBE + "benchmark_against_probe", ref.TIMING_SIZES,
                                                         ref.LEARNER_REPEATS, 0, ref.REPEATS_AGAIN))
    # both lists start with the same 'not_measured' lines: each once
    problems = list(dict.fromkeys(ref.run_problems(timing) + ref.compile_problems(timing)))
    if problems:
        raise CheckFailed("benchmark's numbers are not honest timings", measured="\n".join(t for _, t in problems),
                          expected="compile and run times close to the grader's own timing of the same function",
                          hint={"not_measured": "benchmark returned times without lowering and compiling fn: "
                                                "compile jax.jit(fn) for these arguments inside benchmark, then "
                                                "time its runs",
                                "not_run": "run the compiled fn once per timed call, `repeats` calls after a warm-up, "
                                           "and return the median of what you measured",
                                "no_block": "block on every timed call: jax.block_until_ready(out)",
                                "total": "return the median (or minimum) of the per-call times, not their sum",
                                "compile_in_run": "warm up (and compile) before timing the runs",
                                "no_scaling": "time fn(*args) itself, every call",
                                "low": "jax.jit is lazy: time .lower(*args).compile() (or the first call)",
                                "no_compile_scaling": "time the compile of fn itself: the eight-layer light workload "
                                                      "takes longer to compile than the one-layer heavy one",
                                "high": "time only the compile, once"}[problems[0][0]])

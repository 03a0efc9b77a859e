"""Exercise 11's timing verdicts (grader/exercises/ex11_cost/judges.py) on synthetic measurements, and
its probes' truth against JAX itself: each rule accepts an honest benchmark even when the
machine is busy, and rejects the mistake it is there for."""

import jax
import jax.numpy as jnp
import pytest

from grader.exercises.ex11_cost import judges as ref
from grader.feedback import CheckFailed
from grader.exercises.ex11_cost import probes as probe

MS = 1e-3


class Ctx:
    """What a probe sees of the learner's module: ``function(name)`` gives the one function."""

    def __init__(self, fn):
        self.fn = fn

    def function(self, name):
        return self.fn


def timing(light, heavy, *, probe_light=(60 * MS, 0.06 * MS), probe_heavy=(60 * MS, 0.8 * MS),
           evidence=None):
    """A probe result: the grader's (compile, run) before and after, the learner's pair, and
    what JAX's caches saw during the learner's call (default: fn lowered and compiled once)."""
    def entry(probe_pair, learner):
        c, r = probe_pair
        return {"probe": [{"compile": c, "run": r}, {"compile": c * 1.5, "run": r * 1.2}], "learner": learner,
                "evidence": evidence or {"compiles": 1, "lowered": True}}
    return {"light": entry(probe_light, light), "heavy": entry(probe_heavy, heavy)}


@pytest.mark.parametrize("evidence", [{"compiles": 0, "lowered": False}, {"compiles": 2, "lowered": False},
                                      {"compiles": 0, "lowered": True}])
def test_times_without_compiling_fn_are_not_measurements(evidence):
    """Plausible numbers (these pass every bound) with no sign in JAX's caches that fn was
    lowered and compiled during the call: both timing checks fail."""
    honest = timing((60 * MS, 0.07 * MS), (60 * MS, 0.9 * MS), evidence=evidence)
    assert codes(ref.run_problems(honest))[:2] == ["not_measured", "not_measured"]
    assert codes(ref.compile_problems(honest))[:2] == ["not_measured", "not_measured"]


def test_the_probe_sees_whether_benchmark_compiled_fn():
    """The evidence comes from JAX's own caches, read around the learner's call."""
    import numpy as np

    def honest(fn, *args, repeats=5):
        jax.jit(fn).lower(*args).compile()
        return 0.05, 0.001

    def numpy_only(fn, *args, repeats=5):
        np.tanh(np.asarray(args[0]) @ np.asarray(args[1]))
        return 0.05, 0.001

    def wrapped(fn, *args, repeats=5):  # a wrapper jax.jit traces: fn's work is compiled, under another name
        jax.jit(lambda *a: fn(*a)).lower(*args).compile()
        return 0.05, 0.001

    def cleared(fn, *args, repeats=5):  # the counters restart: what counts is what compiled after the clear
        jax.clear_caches()
        jax.block_until_ready(jax.jit(fn)(*args))
        return 0.05, 0.001

    def traced_only(fn, *args, repeats=5):
        jax.make_jaxpr(fn)(*args)
        return 0.05, 0.001

    sizes = {"light": 8, "heavy": 16}
    for right in (honest, wrapped, cleared):
        seen = probe.benchmark_against_probe(Ctx(right), sizes, 1, 0)
        assert all(seen[k]["evidence"]["lowered"] and seen[k]["evidence"]["compiles"] >= 1 for k in sizes), right
    for wrong in (numpy_only, traced_only):
        seen = probe.benchmark_against_probe(Ctx(wrong), sizes, 1, 0)
        assert all(seen[k]["evidence"]["compiles"] == 0 for k in sizes), wrong
    seen = probe.benchmark_against_probe(Ctx(numpy_only), sizes, {"light": 1, "heavy": 3}, 0, {"heavy": 2})
    assert not any(seen[k]["evidence"]["lowered"] for k in sizes)
    assert (seen["light"]["repeats"], seen["heavy"]["repeats"], seen["heavy"]["repeats_again"]) == (1, 3, 2)
    assert "learner_again" in seen["heavy"] and "learner_again" not in seen["light"]


def test_the_probe_counts_only_real_runs_of_the_counted_copy():
    """The heavy workload's second copy records each run in its program: a compiled run, a
    jitted wrapper's or an eager call's record counts; a benchmark that compiles but never
    runs fn, or one that makes records up (the right type, the wrong bytes), counts 0."""
    def runs_each(fn, *args, repeats=5):
        compiled = jax.jit(fn).lower(*args).compile()
        jax.block_until_ready(compiled(*args))
        for _ in range(repeats):
            jax.block_until_ready(compiled(*args))
        return 0.05, 0.001

    def wrapper_and_eager(fn, *args, repeats=5):
        jitted = jax.jit(lambda *a: fn(*a))
        for _ in range(repeats):
            jax.block_until_ready(jitted(*args))
        jax.block_until_ready(fn(*args))
        return 0.05, 0.001

    def compiles_only(fn, *args, repeats=5):
        jax.jit(fn).lower(*args).compile()
        return 0.05, 0.001

    def forges_records(fn, *args, repeats=5):
        jax.jit(fn).lower(*args).compile()
        for cell in fn.__closure__ or ():  # the record list, reached through the closure
            if isinstance(cell.cell_contents, list):
                cell.cell_contents.extend([b"\0" * 64] * repeats)
        return 0.05, 0.001

    sizes = {"light": 8, "heavy": 16}
    want = {runs_each: 4, wrapper_and_eager: 4, compiles_only: 0, forges_records: 0}
    for bench, runs in want.items():
        seen = probe.benchmark_against_probe(Ctx(bench), sizes, 1, 0, {"heavy": 3})
        assert seen["heavy"]["runs_again"] == runs, bench
        assert "runs_again" not in seen["light"]
        problems = codes(ref.unmeasured(seen))
        assert ("not_run" in problems) == (runs < 3), bench
        assert "not_run" not in codes(ref.unmeasured(seen, runs=False))


def codes(problems):
    return [code for code, _ in problems]


def compiles_scaled(t):
    """``t`` with the light workload's compiles four times the heavy one's, the grader's and the
    learner's (as measured: eight small layers compile slower than one large one), so the
    compile-scaling rule is judged and holds."""
    for entry in t["light"]["probe"]:
        entry["compile"] *= 4
    compile_s, run_s = t["light"]["learner"]
    t["light"]["learner"] = (compile_s * 4, run_s)
    return t


def test_honest_benchmarks_pass_even_when_slowed_or_quick():
    assert ref.run_problems(timing((60 * MS, 0.06 * MS), (60 * MS, 0.8 * MS))) == []
    assert ref.compile_problems(timing((60 * MS, 0.06 * MS), (60 * MS, 0.8 * MS))) == []
    # the learner's measurement three times slower than the grader's (a busy machine)...
    slow = timing((180 * MS, 0.18 * MS), (180 * MS, 2.4 * MS))
    assert ref.run_problems(slow) == [] and ref.compile_problems(slow) == []
    # ...or three times faster (the grader's was the busy one); the first call as the compile
    quick = timing((20 * MS, 0.02 * MS), (20.3 * MS, 0.27 * MS))
    assert ref.run_problems(quick) == [] and ref.compile_problems(quick) == []


def test_compile_times_must_follow_the_program():
    """The light workload's eight layers take longer to compile than the heavy one's single
    layer: a compile time that does not follow (a constant) is caught whenever the grader's own
    compiles scaled, an honest one (even slowed) passes, and nothing is judged when the
    grader's own compiles did not scale (a busy machine)."""
    scaled = {"probe_light": (240 * MS, 0.15 * MS), "probe_heavy": (60 * MS, 1.2 * MS)}
    honest = timing((250 * MS, 0.16 * MS), (70 * MS, 1.3 * MS), **scaled)
    constant = timing((50 * MS, 0.16 * MS), (50 * MS, 1.3 * MS), **scaled)
    slowed = timing((400 * MS, 0.16 * MS), (200 * MS, 1.3 * MS), **scaled)  # a spike on the heavy compile
    assert ref.compile_scaled(honest) and ref.compile_problems(honest) == []
    assert codes(ref.compile_problems(constant)) == ["no_compile_scaling"]
    assert ref.compile_problems(slowed) == []
    unscaled = timing((50 * MS, 0.16 * MS), (50 * MS, 1.3 * MS), probe_light=(100 * MS, 0.15 * MS),
                      probe_heavy=(60 * MS, 1.2 * MS))
    assert not ref.compile_scaled(unscaled) and ref.compile_problems(unscaled) == []
    assert "no_compile_scaling" in ref.TRANSIENT


def test_not_blocking_is_caught():
    dispatch = 5e-6
    assert "no_block" in codes(ref.run_problems(timing((60 * MS, dispatch), (60 * MS, dispatch))))


def test_compile_inside_the_run_is_caught():
    assert "compile_in_run" in codes(ref.run_problems(timing((60 * MS, 60 * MS), (60 * MS, 61 * MS))))


def test_constants_are_caught():
    assert "no_scaling" in codes(ref.run_problems(timing((80 * MS, 0.5 * MS), (80 * MS, 0.5 * MS))))


def _again(t, run_again, repeats=40, again=4):
    t["heavy"].update(repeats=repeats, repeats_again=again, learner_again=(60 * MS, run_again))
    return t


def test_a_total_of_the_repeats_is_caught_and_named():
    total = _again(timing((60 * MS, 5 * 0.06 * MS), (60 * MS, 40 * 0.8 * MS)), 4 * 0.8 * MS)
    assert codes(ref.run_problems(total))[0] == "total"
    # even when the grader's own runs were slowed down as much as the total
    slowed = _again(timing((60 * MS, 5 * 0.06 * MS), (60 * MS, 40 * 0.8 * MS), probe_heavy=(200 * MS, 8 * MS)),
                    4 * 1.5 * MS)  # and the 4-repeat total taken when the machine was slower still
    assert "total" in codes(ref.run_problems(slowed))
    # a median three times slower than the grader's fastest (a busy machine), as slow with 5 repeats: not a total
    slow = _again(timing((60 * MS, 0.2 * MS), (60 * MS, 3 * 0.8 * MS)), 2.5 * 0.8 * MS)
    assert ref.run_problems(slow) == []
    # a median that moved with the load between the two calls looks like a total once: it is measured again
    moved = _again(timing((60 * MS, 0.06 * MS), (60 * MS, 2.1 * MS)), 0.6 * MS)
    honest = compiles_scaled(_again(timing((60 * MS, 0.06 * MS), (60 * MS, 0.9 * MS)), 0.8 * MS))
    assert codes(ref.run_problems(moved)) == ["total"] and ref.run_problems(honest) == []
    seen = iter([moved, honest])
    assert ref.measure_timing(lambda: next(seen)) is honest


def test_only_a_rule_load_can_break_is_measured_again():
    honest = compiles_scaled(timing((60 * MS, 0.06 * MS), (60 * MS, 0.8 * MS)))
    spiked = timing((60 * MS, 0.7 * MS), (60 * MS, 0.8 * MS))  # light runs inflated: no_scaling alone
    block = timing((60 * MS, 5e-6), (60 * MS, 5e-6))
    seen = iter([spiked, honest])
    assert ref.measure_timing(lambda: next(seen)) is honest
    seen = iter([spiked] * ref.TIMING_ATTEMPTS)
    assert codes(ref.run_problems(ref.measure_timing(lambda: next(seen)))) == ["no_scaling"]
    calls = []
    assert ref.measure_timing(lambda: calls.append(1) or block) is block and len(calls) == 1  # a mistake: once
    # the grader's own runs did not scale (its light runs slowed down): the scaling rule was not judged
    guess = timing((60 * MS, 1 * MS), (60 * MS, 1 * MS), probe_light=(60 * MS, 0.5 * MS))
    scaled = timing((60 * MS, 1 * MS), (60 * MS, 1 * MS))
    assert not ref.probe_scaled(guess) and ref.run_problems(guess) == []
    seen = iter([guess, scaled, scaled])  # no_scaling is measured again too
    assert codes(ref.run_problems(ref.measure_timing(lambda: next(seen)))) == ["no_scaling"]


def test_scaling_rule_is_off_when_the_probe_saw_no_scaling():
    flat = timing((60 * MS, 0.5 * MS), (60 * MS, 0.5 * MS), probe_light=(60 * MS, 0.4 * MS),
                  probe_heavy=(60 * MS, 0.6 * MS))
    assert "no_scaling" not in codes(ref.run_problems(flat))


def test_lazy_jit_and_cached_calls_are_not_compiles():
    assert codes(ref.compile_problems(timing((2e-6, 0.06 * MS), (2e-6, 0.8 * MS)))) == ["low", "low"]
    assert "low" in codes(ref.compile_problems(timing((0.06 * MS, 0.06 * MS), (0.8 * MS, 0.8 * MS))))


def test_timing_must_be_two_positive_numbers():
    for bad in [(0.1,), "0.1, 0.2", (0.1, -1.0), (float("nan"), 0.1), None]:
        with pytest.raises(CheckFailed):
            ref.read_timing(bad)


def test_truth_probes_read_the_compiled_program():
    """dot_costs / elementwise_costs / reports say what JAX says for the same programs."""
    got = probe.dot_costs(None, [(5, 6, 7)])[0]
    want = jax.jit(lambda x, w: x @ w).lower(jnp.ones((5, 6)), jnp.ones((6, 7))).compile().cost_analysis()
    assert got == {"flops": want["flops"], "bytes": want["bytes accessed"], "transcendentals": 0.0}
    assert got["flops"] == 2 * 5 * 6 * 7 and got["bytes"] == 4 * (5 * 6 + 6 * 7 + 5 * 7)
    chain = probe.elementwise_costs(None, [((64, 64), "float32"), ((10, 3), "float16")])
    assert chain == [{"flops": 8192.0, "bytes": 49152.0, "transcendentals": 4096.0},
                     {"flops": 60.0, "bytes": 180.0, "transcendentals": 30.0}]
    update, = probe.reports(None, [{"name": "update", "shapes": [[8, 4], [8, 4]], "donate": [0]}])
    assert update["alias_bytes"] == 8 * 4 * 4 and update["argument_bytes"] == 2 * 8 * 4 * 4
    chain_report, = probe.reports(None, [{"name": "chain", "shapes": [[16, 16], [16, 16]], "donate": []}])
    assert chain_report["bytes"] < chain_report["unoptimized"]["bytes"]  # fusion keeps intermediates in registers

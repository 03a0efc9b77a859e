"""Exercise 11's timing verdicts (grader/checks/ex11_cost.py) on synthetic measurements, and
its probes' truth against JAX itself: each rule accepts an honest benchmark even when the
machine is busy, and rejects the mistake it is there for."""

import jax
import jax.numpy as jnp
import pytest

from grader.checks import ex11_cost as ref
from grader.feedback import CheckFailed
from grader.probes import ex11_cost as probe

MS = 1e-3


def timing(light, heavy, *, probe_light=(60 * MS, 0.06 * MS), probe_heavy=(60 * MS, 0.8 * MS)):
    """A probe result: the grader's (compile, run) before and after, and the learner's pair."""
    def entry(probe_pair, learner):
        c, r = probe_pair
        return {"probe": [{"compile": c, "run": r}, {"compile": c * 1.5, "run": r * 1.2}], "learner": learner}
    return {"light": entry(probe_light, light), "heavy": entry(probe_heavy, heavy)}


def codes(problems):
    return [code for code, _ in problems]


def test_honest_benchmarks_pass_even_when_slowed_or_quick():
    assert ref.run_problems(timing((60 * MS, 0.06 * MS), (60 * MS, 0.8 * MS))) == []
    assert ref.compile_problems(timing((60 * MS, 0.06 * MS), (60 * MS, 0.8 * MS))) == []
    # the learner's measurement three times slower than the grader's (a busy machine)...
    slow = timing((180 * MS, 0.18 * MS), (180 * MS, 2.4 * MS))
    assert ref.run_problems(slow) == [] and ref.compile_problems(slow) == []
    # ...or three times faster (the grader's was the busy one); the first call as the compile
    quick = timing((20 * MS, 0.02 * MS), (20.3 * MS, 0.27 * MS))
    assert ref.run_problems(quick) == [] and ref.compile_problems(quick) == []


def test_not_blocking_is_caught():
    dispatch = 5e-6
    assert "no_block" in codes(ref.run_problems(timing((60 * MS, dispatch), (60 * MS, dispatch))))


def test_compile_inside_the_run_is_caught():
    assert "compile_in_run" in codes(ref.run_problems(timing((60 * MS, 60 * MS), (60 * MS, 61 * MS))))


def test_constants_are_caught():
    assert "no_scaling" in codes(ref.run_problems(timing((80 * MS, 0.5 * MS), (80 * MS, 0.5 * MS))))


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

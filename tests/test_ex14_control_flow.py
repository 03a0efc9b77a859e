"""Exercise 14's trusted side and probes, against the live JAX: the float64 references equal what
JAX computes, the structure probe tells a switch from computing every branch, the truth about
the questions is what the statement says, and the verdicts name the mistakes they catch."""

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from grader.exercises.ex14_control_flow import judges, probes
from grader.feedback import CheckFailed

BRANCHES = (lambda x: 2.0 * x, jnp.sin, lambda x: x * x)


def _ctx(**functions):
    return types.SimpleNamespace(function=lambda name: functions[name])


def test_truth_answers_are_what_the_statement_measured():
    assert probes.truth_answers(None) == {"cond_branches_traced": 2, "switch_index_minus_1": 0, "switch_index_5": 2,
                                          "jit_if_error": "TracerBoolConversionError", "grad_if_raises": False,
                                          "where_grad_finite": False}


def test_switch_reference_clamps_like_lax_switch():
    x = np.float32([0.5, -1.0, 2.0])
    switch = jax.jit(lambda i, v: lax.switch(i, BRANCHES, v))
    for i in range(-4, 8):
        np.testing.assert_allclose(np.asarray(switch(i, x)), judges.branch(i, x), rtol=1e-6)
    wrapped = [np.asarray(jax.jit(lambda i, v: lax.switch(i % 3, BRANCHES, v))(i, x)) for i in (-1, 5)]
    with pytest.raises(CheckFailed) as err:
        judges.judge_switch(wrapped, [-1, 5], x)
    assert "below 0" in err.value.diagnosis


def test_structure_probe_tells_switch_from_select():
    x = np.float32([1.0, 2.0])
    switch = jax.jit(lambda i, v: lax.switch(i, BRANCHES, v))
    facts = probes.switch_structure(_ctx(apply_branch=switch), x)
    assert facts["conds"] == [3] and "sin" not in facts["outside"]
    judges.judge_switch_structure(facts, x)

    def select(i, v):
        i = jnp.clip(i, 0, 2)
        return jnp.select([i == 0, i == 1, i == 2], [f(v) for f in BRANCHES])

    facts = probes.switch_structure(_ctx(apply_branch=jax.jit(select)), x)
    with pytest.raises(CheckFailed):
        judges.judge_switch_structure(facts, x)
    nested = jax.jit(lambda i, v: lax.cond(i <= 0, BRANCHES[0], lambda u: lax.cond(i == 1, BRANCHES[1],
                                                                                  BRANCHES[2], u), v))
    judges.judge_switch_structure(probes.switch_structure(_ctx(apply_branch=nested), x), x)


def test_work_outside_a_cond_is_found_whatever_primitives_compute_it():
    """What runs on every path is read from the data flow, not from a list of primitives: a
    branch computed with other operations (cos for sin, a power for sqrt) beside a cond and
    picked with where shows; choosing (the predicate's sum) and moving values do not; nested
    jits are followed through."""
    from grader import ir

    x = np.float32([0.5, -1.0, 2.0])
    pos = lambda v: jnp.sum(jnp.sin(v) * v)  # noqa: E731
    neg = lambda v: jnp.sqrt(-jnp.sum(v))  # noqa: E731

    def honest(v):
        return lax.cond(jnp.sum(v) > 0, pos, neg, v.astype(jnp.float32).reshape(-1))

    def closure(v):
        return lax.cond(jnp.sum(v) > 0, lambda: pos(v), lambda: neg(v))

    def disguised(v):
        p = jnp.sum(v) > 0
        a = jnp.sum(jnp.cos(v - jnp.pi / 2) * v)
        b = jnp.power(jnp.where(p, 1.0, -jnp.sum(v)), 0.5)
        return jnp.where(p, a, b) + 0.0 * lax.cond(p, pos, neg, v)

    def fed_ready_made(v):
        return lax.cond(jnp.sum(v) > 0, lambda a, b: a, lambda a, b: b, pos(v), neg(v))

    for fn in (honest, closure, jax.jit(honest)):
        assert ir.work_outside_control_flow(jax.make_jaxpr(fn)(x), (0,)) == [], fn
    assert {"cos", "pow", "select_n"} <= set(ir.work_outside_control_flow(jax.make_jaxpr(jax.jit(disguised))(x), (0,)))
    assert {"sin", "sqrt"} <= set(ir.work_outside_control_flow(jax.make_jaxpr(fed_ready_made)(x), (0,)))
    switch = jax.make_jaxpr(lambda i, v: lax.switch(i, BRANCHES, v))(1, x)
    assert ir.work_outside_control_flow(switch, (1,)) == []
    picked = jax.make_jaxpr(lambda i, v: jnp.where(i == 0, 2.0 * v, lax.cond(i == 1, jnp.sin, lambda u: u, v)))(1, x)
    assert ir.work_outside_control_flow(picked, (1,)) == ["mul", "select_n"]


def test_structure_is_judged_on_the_program_that_computes():
    """A function that shows tracers a switch and computes every branch on concrete values
    (red team 2, attack 12) is judged by the traced program, whose output must be wave(x)."""
    x = np.float32([1.0, 2.0])

    def two_faced(i, v):
        if isinstance(v, jax.core.Tracer):
            return lax.switch(i, (BRANCHES[0], lambda u: u * 0.0, BRANCHES[2]), v)
        return jnp.select([i <= 0, i == 1, i >= 2], [f(v) for f in BRANCHES])

    with pytest.raises(CheckFailed) as err:
        judges.judge_switch_structure(probes.switch_structure(_ctx(apply_branch=two_faced), x), x)
    assert "traced" in err.value.diagnosis


def _pos(x):
    return jnp.sum(jnp.sin(x) * x)


def _neg(x):
    return jnp.sqrt(-jnp.sum(x))


def test_piecewise_reference_and_the_where_trap():
    xs = judges.draw_piecewise_inputs(np.random.default_rng(0))
    assert {judges.sign_label(x) for x in xs} == {"positive_sum", "negative_sum"}
    cond = jax.jit(lambda v: lax.cond(jnp.sum(v) > 0, _pos, _neg, v))
    got = probes.piecewise_values(_ctx(piecewise=cond), xs)
    for out, x in zip(got, xs):
        value, grad = judges.reference_piecewise(x)
        assert float(out["value"]) == pytest.approx(value, rel=1e-5)
        np.testing.assert_allclose(out["grad"], grad, rtol=1e-4, atol=1e-6)
    judges.judge_piecewise_values(got, xs)
    judges.judge_piecewise_gradients(got, xs)
    where = jax.jit(lambda v: jnp.where(jnp.sum(v) > 0, _pos(v), _neg(v)))
    got = probes.piecewise_values(_ctx(piecewise=where), xs)
    judges.judge_piecewise_values(got, xs)
    with pytest.raises(CheckFailed) as err:
        judges.judge_piecewise_gradients(got, xs)
    assert "NaN" in err.value.diagnosis and "positive" in err.value.diagnosis


@pytest.mark.parametrize("seed", range(5))
def test_sqrt_reference_and_what_each_mistake_breaks(seed):
    x = judges.draw_sqrt_input(np.random.default_rng(seed))
    assert judges.sqrt_labels(x) == {"negative", "zero", "tiny_positive", "positive"}
    double = lambda v: jnp.where(v > 0, jnp.sqrt(jnp.where(v > 0, v, 1.0)), 0.0)  # noqa: E731
    got = probes.safe_sqrt_values(_ctx(safe_sqrt=double), x)
    judges.judge_sqrt_values(got, x)
    judges.judge_sqrt_gradient(got, x)
    single = probes.safe_sqrt_values(_ctx(safe_sqrt=lambda v: jnp.where(v > 0, jnp.sqrt(v), 0.0)), x)
    judges.judge_sqrt_values(single, x)
    with pytest.raises(CheckFailed, match="negative inputs, exact zeros"):
        judges.judge_sqrt_gradient(single, x)
    eps = probes.safe_sqrt_values(_ctx(safe_sqrt=lambda v: jnp.sqrt(jnp.maximum(v, 1e-12))), x)
    with pytest.raises(CheckFailed):
        judges.judge_sqrt_values(eps, x)


def test_answers_judge_types_before_values():
    truth = probes.truth_answers(None)
    judges.judge_answers(dict(truth), truth)
    with pytest.raises(CheckFailed, match="jit_if_error"):
        judges.judge_answers({**truth, "jit_if_error": 1}, truth)
    with pytest.raises(CheckFailed) as err:
        judges.judge_answers({**truth, "cond_branches_traced": 1}, truth)
    assert "how many" in err.value.diagnosis
    judges.judge_answers({**truth, "cond_branches_traced": 1}, truth, keys=["switch_index_5"])
    as_numpy = {**truth, "switch_index_5": np.asarray(truth["switch_index_5"], np.int32),
                "where_grad_finite": np.asarray(truth["where_grad_finite"])}  # 0-d values of the right kind
    judges.judge_answers(as_numpy, truth)
    with pytest.raises(CheckFailed):
        judges.judge_answers({**truth, "switch_index_5": np.asarray(2.0)}, truth)

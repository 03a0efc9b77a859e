"""Exercise 16's trusted side and probes, against the live JAX: the float64 derivatives equal what
JAX computes, the facts the statement quotes, the costs the clean worker measures, and verdicts
that catch the mistakes the fixtures make (run here in-process on plain Python functions); and
grade compare's ``bind``, which hands a spec's function to the learner's."""

import types
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grader.exercises.ex16_autodiff import functions, judges, probes
from grader.feedback import CheckFailed
from grader.probes import fingerprint


def _ctx(**fns):
    module = types.ModuleType("learner_mod")  # the functions' own module, as in a sandbox
    module.__dict__.update(fns)
    return types.SimpleNamespace(function=lambda name: fns[name], roots=None, module=module)


def fwd_over_rev(f, x, v):
    return jax.jvp(jax.grad(f), (x,), (v,))[1]


@pytest.mark.parametrize("seed", range(3))
def test_float64_references_equal_jax(seed):
    rng = np.random.default_rng(seed)
    for name in functions.SCALAR:
        params, x = functions.draw_params(rng, name, 7), rng.normal(size=7).astype(np.float32)
        np.testing.assert_allclose(functions.hessian(name, params, x), jax.hessian(probes.build(name, params))(x),
                                   rtol=1e-4, atol=1e-5)
    for name in functions.VECTOR:
        params, x = functions.draw_params(rng, name, 5, 9), rng.normal(size=5).astype(np.float32)
        np.testing.assert_allclose(functions.jacobian(name, params, x), jax.jacfwd(probes.build(name, params))(x),
                                   rtol=1e-5, atol=1e-6)


def test_hvp_judges_value_and_the_hessian_it_builds():
    cases = judges.draw_hvp_cases(np.random.default_rng(0))
    judges.judge_hvp(probes.hvp_values(_ctx(hvp=fwd_over_rev), cases), cases)
    with pytest.raises(CheckFailed):
        judges.judge_hvp(probes.hvp_values(_ctx(hvp=lambda f, x, v: jax.grad(f)(x) * v), cases), cases)
    case = judges.draw_hessian_case(np.random.default_rng(1))
    name, params, x, v = case["name"], case["params"], case["x"], case["v"]
    reference = probes.truth_hvp_work(None, name, params, judges.HESSIAN_SIZE)
    judges.judge_hvp_program(probes.hvp_program(_ctx(hvp=fwd_over_rev), name, params, x, v), reference, case)
    quartic = dict(case, name="quartic", params=functions.draw_params(np.random.default_rng(1), "quartic",
                                                                        judges.HESSIAN_SIZE))
    whole = probes.hvp_program(_ctx(hvp=lambda f, x, v: jax.hessian(f)(x) @ v), "quartic", quartic["params"], x, v)
    assert whole["elements"] == judges.HESSIAN_SIZE ** 2
    with pytest.raises(CheckFailed) as err:
        judges.judge_hvp_program(whole, probes.truth_hvp_work(None, "quartic", quartic["params"], judges.HESSIAN_SIZE),
                                 quartic)
    assert "n x n Hessian" in err.value.diagnosis
    # jax.hessian also builds an int32 n x n basis: the message names the float Hessian first
    assert whole["aval"] == f"float32[{judges.HESSIAN_SIZE},{judges.HESSIAN_SIZE}]"
    assert any(a.startswith("int32") for a in whole["avals"])
    assert err.value.message.startswith("hvp's jaxpr holds") and "float32[1024,1024]" in err.value.message
    assert "int32" not in err.value.message and "integer or boolean" in err.value.message


def _rows_in_a_map(f, x, v):  # red team 32: the Hessian a row per trip, no value larger than n
    def row(i):
        return jnp.dot(jax.jvp(jax.grad(f), (x,), (jnp.zeros_like(x).at[i].set(1.0),))[1], v)

    return jax.lax.map(row, jnp.arange(x.shape[0]))


def _rows_in_a_while_loop(f, x, v):  # the same, in a loop whose trip count the jaxpr does not hold
    def body(state):
        i, out = state
        return i + 1, out.at[i].set(jnp.dot(jax.jvp(jax.grad(f), (x,), (jax.nn.one_hot(i, x.shape[0]),))[1], v))

    return jax.lax.while_loop(lambda s: s[0] < x.shape[0], body, (0, jnp.zeros_like(x)))[1]


def _rows_into_a_ref(f, x, v):  # the same, each row's product written into a Ref: the scan returns nothing
    out = jax.new_ref(jnp.zeros_like(x))

    def row(carry, i):
        out[i] = jnp.dot(jax.jvp(jax.grad(f), (x,), (jnp.zeros_like(x).at[i].set(1.0),))[1], v)
        return carry, None

    jax.lax.scan(row, 0, jnp.arange(x.shape[0]))
    return out[...]


def _reverse_over_reverse(f, x, v):
    return jax.grad(lambda y: jnp.vdot(jax.grad(f)(y), v))(x)


@pytest.mark.parametrize("name", ["quartic", "logsumexp"])
def test_hvp_work_counts_loops_by_their_trip_counts(name):
    """The Hessian formed row by row holds no large value but does n gradients' work: over 1000x the
    reference's operations at n = 1024, where honest Hessian-vector products stay within 2x."""
    rng = np.random.default_rng(2)
    case = dict(judges.draw_hessian_case(rng), name=name)
    case["params"] = functions.draw_params(rng, name, judges.HESSIAN_SIZE)
    reference = probes.truth_hvp_work(None, name, case["params"], judges.HESSIAN_SIZE)

    def facts(hvp):
        return probes.hvp_program(_ctx(hvp=hvp), name, case["params"], case["x"], case["v"])

    for honest in (fwd_over_rev, _reverse_over_reverse, jax.jit(fwd_over_rev, static_argnums=0)):
        got = facts(honest)
        assert got["work"] <= 2 * reference
        judges.judge_hvp_program(got, reference, case)
    for loop in (_rows_in_a_map, _rows_into_a_ref):
        rows = facts(loop)
        assert rows["elements"] < judges.HVP_MAX_ELEMENTS_PER_N * judges.HESSIAN_SIZE  # what the old check read
        assert rows["work"] > 1000 * reference
        with pytest.raises(CheckFailed) as err:
            judges.judge_hvp_program(rows, reference, case)
        assert "loops counted by their trip counts" in err.value.measured and "n gradients" in err.value.diagnosis
    with pytest.raises(CheckFailed) as err:
        judges.judge_hvp_program(facts(_rows_in_a_while_loop), reference, case)
    assert "while" in err.value.message
    callback = facts(lambda f, x, v: jax.pure_callback(lambda a, b: np.asarray(b, np.float32) * 0, x, x, v))
    with pytest.raises(CheckFailed) as err:
        judges.judge_hvp_program(callback, reference, case)
    assert "host" in err.value.message


def test_the_cheaper_mode_by_the_statements_numbers():
    def layer(m, n):
        w = (0.01 * (np.arange(m)[:, None] - np.arange(n)[None, :])).astype(np.float32)
        return {"name": "tanh_layer", "params": {"W": w, "b": np.zeros(m, np.float32)},
                "x": np.linspace(-1, 1, n, dtype=np.float32), "m": m}

    cases = [layer(4, 128), layer(128, 4)]
    truth = probes.truth_jacobian_flops(None, cases)
    wide, tall = truth
    assert wide["jacrev"] * 20 < wide["jacfwd"] and tall["jacfwd"] * 20 < tall["jacrev"]
    assert (wide["jacfwd"], wide["jacrev"], tall["jacfwd"], tall["jacrev"]) == (166404, 5188, 6816, 197760)

    def pick(f, x):
        m = jax.eval_shape(f, x).shape[0]
        return jax.jacfwd(f)(x) if m >= x.shape[0] else jax.jacrev(f)(x)

    got = probes.jacobian_values(_ctx(jacobian=pick), cases)
    judges.judge_jacobian_values(got, cases)
    judges.judge_jacobian_cost(got, truth, cases)
    for wrong in (lambda f, x: jax.jacfwd(f)(x), lambda f, x: jax.jacrev(f)(x)):
        got = probes.jacobian_values(_ctx(jacobian=wrong), cases)
        judges.judge_jacobian_values(got, cases)
        with pytest.raises(CheckFailed) as err:
            judges.judge_jacobian_cost(got, truth, cases)
        assert "costs more than" in err.value.diagnosis

    def fwd_in_a_map(f, x):  # red team 32: forward mode a column per trip; XLA counts the body once
        return jax.lax.map(lambda j: jax.jvp(f, (x,), (jnp.zeros_like(x).at[j].set(1.0),))[1],
                           jnp.arange(x.shape[0])).T

    got = probes.jacobian_values(_ctx(jacobian=fwd_in_a_map), cases)
    judges.judge_jacobian_values(got, cases)
    assert got[0]["flops"] < judges.COST_SLACK * truth[0]["jacrev"]  # what the old check read: it passed
    with pytest.raises(CheckFailed) as err:
        judges.judge_jacobian_cost(got, truth, cases)
    assert "once per trip" in err.value.diagnosis and "wide" in err.value.message

    def fwd_over_a_constant_basis(f, x):  # the basis a constant (no n x n value computed), one column per trip
        basis = jnp.asarray(np.eye(x.shape[0], dtype=np.float32))
        return jax.lax.map(lambda e: jax.jvp(f, (x,), (e,))[1], basis).T

    got = probes.jacobian_values(_ctx(jacobian=fwd_over_a_constant_basis), cases)
    judges.judge_jacobian_values(got, cases)
    assert got[0]["work"] > 10 * truth[0]["jacrev_work"]  # each trip's matrix-vector product counts m x n
    with pytest.raises(CheckFailed):
        judges.judge_jacobian_cost(got, truth, cases)
    for honest in (pick, jax.jit(pick, static_argnums=0)):
        got = probes.jacobian_values(_ctx(jacobian=honest), cases)
        assert [g["work"] for g in got] == [min(t["jacfwd_work"], t["jacrev_work"]) for t in truth]
        judges.judge_jacobian_cost(got, truth, cases)


def test_clip_gradient_judges_and_a_custom_jvp_cannot_clip():
    @jax.custom_vjp
    def clip(lo, hi, x):
        return x

    clip.defvjp(lambda lo, hi, x: (x, (lo, hi)), lambda res, g: (None, None, jnp.clip(g, *res)))
    cases = judges.draw_clip_cases(np.random.default_rng(0))
    assert judges.clip_labels(cases) == {"below", "inside", "above", "1d", "2d"}
    judges.judge_clip(probes.clip_values(_ctx(clip_gradient=clip), cases), cases)
    case = judges.draw_composed_case(np.random.default_rng(1))
    judges.judge_clip_composed(probes.clip_composed(_ctx(clip_gradient=clip), case["lo"], case["hi"], case["xs"],
                                                    case["ws"]), case)
    with pytest.raises(CheckFailed) as err:
        judges.judge_clip(probes.clip_values(_ctx(clip_gradient=lambda lo, hi, x: jnp.clip(x, lo, hi)), cases), cases)
    assert "clips the values" in err.value.diagnosis

    @jax.custom_vjp
    def shown(lo, hi, x):  # a forward pass that loses x; only the backward rule is right
        return jnp.zeros_like(x)

    shown.defvjp(lambda lo, hi, x: (jnp.zeros_like(x), (lo, hi)), lambda res, g: (None, None, jnp.clip(g, *res)))

    def two_faced(lo, hi, x):  # red team 2, attack 12: the custom_vjp for tracers, x itself for concrete arrays
        return shown(lo, hi, x) if isinstance(x, jax.core.Tracer) else x

    with pytest.raises(CheckFailed) as err:
        judges.judge_clip_composed(probes.clip_composed(_ctx(clip_gradient=two_faced), case["lo"], case["hi"],
                                                        case["xs"], case["ws"]), case)
    assert "traced under jax.jit" in err.value.diagnosis

    @jax.custom_jvp
    def tangent_clip(x):
        return x

    tangent_clip.defjvp(lambda p, t: (p[0], jnp.clip(t[0], -1.0, 1.0)))
    with pytest.raises(NotImplementedError, match="Transpose rule .* for 'min' not implemented"):
        jax.grad(lambda x: jnp.sum(tangent_clip(x)))(jnp.ones(3))

    @partial(jax.custom_vjp, nondiff_argnums=(0, 1))
    def static_clip(lo, hi, x):
        return x

    static_clip.defvjp(lambda lo, hi, x: (x, None), lambda lo, hi, _, g: (jnp.clip(g, lo, hi),))
    judges.judge_clip(probes.clip_values(_ctx(clip_gradient=static_clip), cases), cases)  # lo, hi never traced
    with pytest.raises(jax.errors.UnexpectedTracerError):
        jax.jit(lambda lo, x: static_clip(lo, 1.0, x))(-1.0, jnp.ones(2))


def _stable(x):
    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    return e / jnp.sum(e, axis=-1, keepdims=True)


def test_softmax_residuals_tell_custom_vjp_from_autodiff():
    @jax.custom_vjp
    def softmax(x):
        return _stable(x)

    softmax.defvjp(lambda x: (_stable(x),) * 2, lambda y, g: (y * (g - jnp.sum(g * y, axis=-1, keepdims=True)),))
    cases, labels = judges.draw_softmax_cases(np.random.default_rng(0))
    got = probes.softmax_values(_ctx(softmax=softmax), cases)
    judges.judge_softmax(got, cases, labels)
    judges.judge_softmax_residuals(got, cases)
    plain = probes.softmax_values(_ctx(softmax=_stable), cases)
    judges.judge_softmax(plain, cases, labels)
    with pytest.raises(CheckFailed) as err:
        judges.judge_softmax_residuals(plain, cases)
    assert "keeps 5 arrays" in err.value.diagnosis
    assert err.value.message.startswith("jax.vjp(softmax, x) keeps 5 residuals; expected 1, the output")

    @jax.custom_vjp
    def keeps_input(x):
        return _stable(x)

    keeps_input.defvjp(lambda x: (_stable(x), x),
                       lambda x, g: ((y := _stable(x)) * (g - jnp.sum(g * y, axis=-1, keepdims=True)),))
    got = probes.softmax_values(_ctx(softmax=keeps_input), cases)
    judges.judge_softmax(got, cases, labels)
    with pytest.raises(CheckFailed) as err:  # one residual, the wrong one: the message must not say "expected 1"
        judges.judge_softmax_residuals(got, cases)
    assert err.value.message.startswith("jax.vjp(softmax, x) keeps 1 residual, but it is the input x, not the output")
    assert "saves the input x" in err.value.diagnosis

    def stop_gradient_softmax(x):  # red team 32: no custom_vjp, a linearisation that keeps only y
        ys = jax.lax.stop_gradient(_stable(x))
        d = x - jax.lax.stop_gradient(x)
        return ys + ys * (d - jnp.sum(ys * d, axis=-1, keepdims=True))

    got = probes.softmax_values(_ctx(softmax=stop_gradient_softmax), cases)
    judges.judge_softmax(got, cases, labels)
    assert all(res["residual_count"] == 1 for res in got)  # what the old check read: it passed
    with pytest.raises(CheckFailed) as err:
        judges.judge_softmax_residuals(got, cases)
    assert err.value.message == "no custom_vjp_call in the jaxpr of softmax"
    x = jnp.float32([1e4, -1e4, 0, 9999])  # the statement's numbers
    np.testing.assert_allclose(_stable(x), [0.7311, 0, 0, 0.2689], atol=1e-4)
    assert np.isnan(np.asarray(jnp.exp(x) / jnp.sum(jnp.exp(x)))).tolist() == [True, False, False, True]
    counts = [[leaf.nbytes for leaf in jax.tree.leaves(jax.vjp(f, x)[1])] for f in (_stable, jax.nn.softmax, softmax)]
    assert [(len(c), sum(c)) for c in counts] == [(5, 44), (3, 24), (1, 16)]


def test_compare_binds_a_function_and_plain_values():
    hvp = fingerprint.measure(_ctx(hvp=fwd_over_rev), {
        "kind": "jax", "target": "hvp", "bind": [{"source": "def f(x):\n    return jnp.sum(x ** 4)\n", "fn_name": "f"}],
        "calls": [{"args": [np.ones(4, np.float32), np.ones(4, np.float32)], "kwargs": {}}]})
    assert "errors" not in hvp and hvp["output"] is not None
    clip = fingerprint.measure(_ctx(clip=lambda lo, hi, x: jnp.clip(x, lo, hi)), {
        "kind": "jax", "target": "clip", "bind": [-1.0, 1.0], "transform": "grad", "argnums": [0],
        "calls": [{"args": [np.float32([-2, 0.5, 3])], "kwargs": {}}]})
    assert "errors" not in clip

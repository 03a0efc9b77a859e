"""Exercise 7's trusted-side logic, against the live JAX: the ENTRY fusion count read off
optimized HLO text, and the NumPy gradient used to draw inputs whose clipping is active."""

import warnings
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grader.exercises.ex07_training.reference import (
    CLIP_NORM,
    draw_params,
    draw_step_case,
    entry_fusions,
    entry_opcodes,
    global_norm,
    grads,
)
from grader.exercises.ex07_training import probes as probe
from grader.exercises.ex07_training.judges import _batch_multiple, judge_donation, judge_per_example
from grader.exercises.ex07_training.reference import per_example
from grader.feedback import CheckFailed
from grader.sandbox.context import to_jax

SYNTHETIC = """HloModule jit_f, is_scheduled=true, entry_computation_layout={(f32[4]{0})->(f32[4]{0}, s32[])}

FileNames
1 "/some/file.py"

FunctionNames
1 "fusion_of_things"

%fused_computation (param_0: f32[4]) -> f32[4] {
  %param_0 = f32[4]{0} parameter(0)
  ROOT %inner = f32[4]{0} fusion(%param_0), kind=kLoop, calls=%other
}

ENTRY %main.3 (x.1: f32[4]) -> (f32[4], s32[]) {
  %x.1 = f32[4]{0} parameter(0), metadata={op_name="x"}
  %loop_fusion = f32[4]{0} fusion(%x.1), kind=kLoop, calls=%fused_computation, metadata={op_name="jit(f)/jit(fusion)/mul"}
  %dot = f32[4]{0} add(%loop_fusion, %loop_fusion), metadata={op_name="uses fusion( in a string"}
  ROOT %tuple_fusion = (f32[4]{0}, /*index=1*/s32[]) fusion(%dot), kind=kLoop, calls=%fused_computation
}
"""


def test_entry_fusions_counts_only_the_entry_computations_fusion_instructions():
    assert entry_opcodes(SYNTHETIC) == ["parameter", "fusion", "add", "fusion"]
    assert entry_fusions(SYNTHETIC) == 2  # not the fused computation's, not names or strings


def _compiled_step_text(sizes, batch):
    rng = np.random.default_rng(0)
    case = draw_step_case(rng, batch, sizes=sizes)
    params = to_jax(case["params"])
    state, _ = probe._state_from(probe._optimizer(0.05, 1.0, 0.01), params, case["adam"])
    with jax.numpy_rank_promotion("allow"):
        lowered = probe._ref_step_jit.lower(params, state, jax.device_put(case["x"]), jax.device_put(case["y"]),
                                            probe._hyper([0.05, 1.0, 0.01]))
    return lowered.compile().as_text()


def test_entry_fusions_on_a_real_optimized_train_step():
    text = _compiled_step_text([5, 9, 3], 24)
    assert not text.startswith("ENTRY") and "\nENTRY" in text  # the optimized text opens with tables
    entry = text[text.index("\nENTRY"):]
    by_kind = sum(1 for line in entry.splitlines() if " kind=k" in line)  # every fusion names its kind
    assert entry_fusions(text) == by_kind > 0


def test_numpy_gradient_matches_jax():
    rng = np.random.default_rng(1)
    for sizes in ([4, 3], [5, 8, 6, 3]):
        params = draw_params(rng, sizes)
        x = rng.normal(size=(7, sizes[0])).astype(np.float32)
        y = rng.integers(0, sizes[-1], size=7).astype(np.int32)
        with jax.numpy_rank_promotion("allow"):
            want = jax.grad(probe._loss)(to_jax(params), x, y)
        got = grads(params, x, y)
        for g, w in zip(got, want):
            for k in ("w", "b"):
                np.testing.assert_allclose(g[k], np.asarray(w[k]), rtol=1e-4, atol=1e-6)


def test_step_draws_have_active_clipping():
    for seed in range(20):
        case = draw_step_case(np.random.default_rng(seed), 24)
        assert case["grad_norm"] >= 2 * CLIP_NORM
        assert global_norm(grads(case["params"], case["x"], case["y"])) == case["grad_norm"]


def test_metric_work_follows_the_batch_for_vmap_and_not_for_a_padded_loop():
    """The metric check's judge on work measured live: the statement's vmapped metric passes
    against itself; a Python loop over a batch padded to 40 keeps one jaxpr size and XLA's
    flops (XLA drops its unused copies) but holds 40 copies; a JAX loop is refused by name."""
    from grader.exercises.ex07_training.judges import judge_metric_work
    vmapped = jax.vmap(probe._one_example, in_axes=(None, 0, 0))

    def padded(params, x, y):
        outs = [probe._one_example(params, x[min(i, x.shape[0] - 1)], y[min(i, x.shape[0] - 1)]) for i in range(40)]
        return jnp.stack([o[0] for o in outs])[: x.shape[0]], jnp.stack([o[1] for o in outs])[: x.shape[0]]

    def mapped(params, x, y):
        return jax.lax.map(lambda xy: probe._one_example(params, *xy), (x, y))

    rng = np.random.default_rng(0)
    params = to_jax(draw_params(rng, [5, 8, 3]))
    want, got = {}, {"padded": {}, "mapped": {}}
    for batch in (3, 10, 30):
        x, y = rng.normal(size=(batch, 5)).astype(np.float32), rng.integers(0, 3, size=batch).astype(np.int32)
        want[batch] = probe._work(vmapped, (params, x, y))
        got["padded"][batch] = probe._work(padded, (params, x, y))
        got["mapped"][batch] = probe._work(mapped, (params, x, y))
    judge_metric_work(want, want, hidden=True)
    with pytest.raises(CheckFailed, match="copies of the one-example computation"):
        judge_metric_work(got["padded"], want, hidden=True)
    with pytest.raises(CheckFailed, match="JAX loop"):
        judge_metric_work(got["mapped"], want, hidden=True)


def test_a_donated_batch_fails_even_when_it_stays_alive():
    """A batch in donate_argnums that no output can reuse is only warned about and stays
    alive: the donation judge reads ``args_donated`` (lowered.args_info) and refuses it."""
    good = {"jitted": True, "alias_bytes": 100, "donatable_bytes": 100, "header": "HloModule m, input_output_alias={}",
            "reused_bytes": 100, "params_deleted": [True], "state_deleted": [True], "batch_deleted": [False, False],
            "args_donated": [True, True, False, False]}
    judge_donation(good)
    with pytest.raises(CheckFailed, match="donates x and y as well"):
        judge_donation(dict(good, args_donated=[True, True, True, True]))


def test_the_donation_probe_reads_what_lower_donated():
    """lowered.args_info says which arguments were donated, batch included."""
    @partial(jax.jit, donate_argnums=(0, 1, 2, 3))
    def step(p, s, x, y):
        return p + 1.0, s * 2.0, jnp.sum(x) + jnp.sum(y)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Some donated buffers were not usable": x and y have no output to reuse them
        lowered = step.lower(jnp.ones(3), jnp.ones(3), jnp.ones((2, 3)), jnp.ones(2, jnp.int32))
    assert [any(a.donated for a in jax.tree.leaves(arg)) for arg in probe._args_info(lowered)[0][2:4]] == [True, True]


def test_correct_must_be_bool():
    rng = np.random.default_rng(0)
    params = draw_params(rng, [4, 6, 3])
    x = rng.normal(size=(5, 4)).astype(np.float32)
    y = rng.integers(0, 3, size=5).astype(np.int32)
    losses, correct, _ = per_example(params, x, y)
    judge_per_example((losses.astype(np.float32), correct.astype(bool)), params, x, y)
    with pytest.raises(CheckFailed, match="bool"):
        judge_per_example((losses.astype(np.float32), correct.astype(np.int32)), params, x, y)


def test_a_loss_summed_over_the_batch_is_named():
    mean = np.float32(0.731)
    assert _batch_multiple(np.asarray(mean * 16, np.float32), mean) == 16
    assert _batch_multiple(np.asarray(mean * 1.5, np.float32), mean) == 0
    assert _batch_multiple(np.asarray(mean, np.float32), mean) == 0


def test_the_step_structure_is_read_from_the_program_the_run_compiles():
    """``prepare_run`` traces train_step once under the grader's jit and returns that
    program's primitives and loss; ``judge_step_program`` asks that train_step be jax.jit's
    own (so its calls trace the same body), that the traced loss is the run's first loss, and
    then that the matmuls are there.  A Python function that hands tracers the jitted step and
    runs something else on arrays (red team 2, attack 12) fails on the first."""
    import types

    from grader.exercises.ex07_training.judges import judge_step_program

    hyper = (0.05, 1.0, 0.01)

    @partial(jax.jit, donate_argnums=(0, 1))
    def step(params, state, x, y):
        loss, grads = jax.value_and_grad(probe._loss)(params, x, y)
        updates, state = probe._optimizer(*hyper).update(grads, state, params)
        return jax.tree.map(lambda p, u: p + u, params, updates), state, loss

    def two_faced(params, state, x, y):
        if isinstance(x, jax.core.Tracer):
            return step(params, state, x, y)
        return params, state, jnp.float32(0.0)

    rng = np.random.default_rng(0)
    params = draw_params(rng, [5, 8, 3])
    x, y = rng.normal(size=(6, 5)).astype(np.float32), rng.integers(0, 3, size=6).astype(np.int32)
    for fn, fails in ((step, None), (two_faced, "not the function jax.jit returns")):
        ctx = types.SimpleNamespace(slots={}, function={"train_step": fn,
                                                        "make_optimizer": probe._optimizer}.__getitem__)
        with jax.numpy_rank_promotion("allow"):  # the grader's model adds its bias by broadcasting
            prepared = probe.prepare_run(ctx, "run", hyper, params, x, y)
        assert not any(a.is_deleted() for a in jax.tree.leaves(ctx.slots["run"]))  # our trace donates nothing
        first = float(prepared["outputs"]["loss"])
        run = {"losses": [first], "step_primitives": prepared["step_primitives"], "traced": prepared}
        if fails is None:
            judge_step_program(run)
            with pytest.raises(CheckFailed) as err:  # a run whose first loss is not the traced program's
                judge_step_program(dict(run, losses=[first + 1.0]))
            assert "traced" in err.value.diagnosis
        else:
            with pytest.raises(CheckFailed, match=fails):
                judge_step_program(run)


def test_compare_measures_an_unjitted_update_as_one_program_under_the_graders_jit():
    """`grade compare` runs exercise 7's optimizer update under its own jit (``"jit": True``):
    run eagerly, each operation compiles alone.  The numbers are the eager ones."""
    import types

    from grader.probes import fingerprint

    def update(grads, params):  # clip by the global norm, then a step: a dozen operations
        norm = jnp.sqrt(sum(jnp.sum(g ** 2) for g in jax.tree.leaves(grads)))
        scale = jnp.minimum(1.0, 1.0 / (norm + 1e-6))
        return jax.tree.map(lambda g, p: p - 0.05 * jnp.tanh(g * scale), grads, params)

    ctx = types.SimpleNamespace(function={"update": update}.__getitem__, roots=None)
    params = {"w": np.ones((3, 2), np.float32), "b": np.zeros(2, np.float32)}
    calls = [{"args": [{"w": np.full((3, 2), v, np.float32), "b": np.full(2, v, np.float32)}, params], "kwargs": {}}
             for v in (0.5, -2.0)]
    spec = {"kind": "jax", "target": "update", "calls": calls, "reps": 1}
    eager, jitted = fingerprint.measure(ctx, spec), fingerprint.measure(ctx, {**spec, "jit": True})
    assert "errors" not in jitted and jitted["compiles_by_name"] == {"under_graders_jit": 1}
    assert sum(eager["compiles_by_name"].values()) > 5  # op by op
    assert jitted["jaxpr"] == eager["jaxpr"]
    np.testing.assert_allclose(np.asarray(jitted["output"]["w"], np.float32), np.asarray(eager["output"]["w"], np.float32),
                               rtol=1e-6)

"""Exercise 18's trusted side and probes, against the live JAX: the float64 references equal JAX's
own, the reference passes every judge on every mesh shape the checks use, each judge catches the
mistake it is there for (the pmap habit under check_vma, a ring in a fori_loop or jumping past
its neighbours, check_vma turned off, a gathered batch), and the compare spec measures it."""

import importlib.util
import types
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from grader.exercises.ex18_shard_map import judges, probes
from grader.feedback import CheckFailed
from grader.probes import fingerprint

REPO = Path(__file__).resolve().parents[1]


def _module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SOLUTION = _module(REPO / "solutions" / "18_shard_map" / "by_hand.py", "ex18_solution")


def _ctx(**functions):
    return types.SimpleNamespace(function=lambda name: functions.get(name) or getattr(SOLUTION, name))


def _run_all(mesh_shape, seed=0, **functions):
    rng = np.random.default_rng(seed)
    drawn = {"megatron": judges.draw_mlp(rng), "ring": judges.draw_ring(rng, mesh_shape[1]), "dp": judges.draw_dp(rng)}
    ctx = _ctx(**functions)
    return drawn, {"megatron": probes.run_megatron(ctx, list(mesh_shape), *drawn["megatron"]),
                   "ring": probes.run_ring(ctx, list(mesh_shape), drawn["ring"]),
                   "dp": probes.run_dp(ctx, list(mesh_shape), *drawn["dp"])}


def test_references_equal_jax():
    params, x, y = judges.draw_dp(np.random.default_rng(1))
    loss, grads = judges.loss_and_grads_reference(params, x, y)
    jloss, jgrads = jax.value_and_grad(SOLUTION.loss_fn)({k: jnp.asarray(v) for k, v in params.items()}, x, y)
    assert float(jloss) == pytest.approx(loss, rel=1e-5)
    for k in grads:
        np.testing.assert_allclose(np.asarray(jgrads[k]), grads[k], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("mesh_shape", [(2, 4), (8, 1)])
def test_the_reference_passes_every_judge(mesh_shape):
    drawn, results = _run_all(mesh_shape)
    judges.judge_megatron_numerics(results["megatron"], drawn["megatron"], mesh_shape, "here")
    judges.judge_megatron_collectives(results["megatron"], mesh_shape, "here")
    judges.judge_ring_numerics(results["ring"], drawn["ring"], mesh_shape, "here")
    judges.judge_ring_collectives(results["ring"], mesh_shape, "here")
    judges.judge_dp_numerics(results["dp"], drawn["dp"], mesh_shape, "here")
    judges.judge_dp_collectives(results["dp"], mesh_shape, "here")
    judges.judge_check_vma({"megatron_mlp": results["megatron"], "data_parallel_grads": results["dp"]}, mesh_shape,
                           "here")


def _dp(mesh, params, x, y, *, where="grads", check_vma=True):
    def per_device(params, xb, yb):
        if where == "grads":  # the pmap habit
            loss, grads = jax.value_and_grad(SOLUTION.loss_fn)(params, xb, yb)
            return jax.lax.pmean(loss, "data"), jax.lax.pmean(grads, "data")
        xs, ys = jax.lax.all_gather(xb, "data", tiled=True), jax.lax.all_gather(yb, "data", tiled=True)
        return jax.value_and_grad(lambda p: jax.lax.pmean(SOLUTION.loss_fn(p, xs, ys), "data"))(params)

    return jax.shard_map(per_device, mesh=mesh, in_specs=(P(), P("data", None), P("data", None)),
                         out_specs=(P(), P()), check_vma=check_vma)(params, x, y)


def test_the_pmap_habit_is_d_times_too_large_and_said_so():
    mesh_shape = (2, 4)
    drawn, results = _run_all(mesh_shape, data_parallel_grads=_dp)
    with pytest.raises(CheckFailed) as err:
        judges.judge_dp_numerics(results["dp"], drawn["dp"], mesh_shape, "here")
    assert "2x the full-batch gradient" in err.value.measured and "multiple of it" in err.value.diagnosis
    _, results = _run_all(mesh_shape, data_parallel_grads=lambda *a: _dp(*a, check_vma=False))
    judges.judge_dp_numerics(results["dp"], drawn["dp"], mesh_shape, "here")  # right with the check off ...
    with pytest.raises(CheckFailed, match="check_vma"):                       # ... which is caught
        judges.judge_check_vma({"data_parallel_grads": results["dp"]}, mesh_shape, "here")
    _, results = _run_all(mesh_shape, data_parallel_grads=lambda *a: _dp(*a, where="gather"))
    judges.judge_dp_numerics(results["dp"], drawn["dp"], mesh_shape, "here")
    with pytest.raises(CheckFailed, match="all-gather"):
        judges.judge_dp_collectives(results["dp"], mesh_shape, "here")


def _fori_ring(x):
    m = jax.lax.axis_size("model")
    perm = [(j, (j + 1) % m) for j in range(m)]
    return jax.lax.fori_loop(0, m - 1, lambda _, c: (c[0] + jax.lax.ppermute(c[1], "model", perm),
                                                     jax.lax.ppermute(c[1], "model", perm)), (x, x))[0]


def _jumping_ring(x):
    m = jax.lax.axis_size("model")
    return x + sum(jax.lax.ppermute(x, "model", [(j, (j + i) % m) for j in range(m)]) for i in range(1, m))


def _backward_ring(x):
    m = jax.lax.axis_size("model")
    total = passing = x
    for _ in range(m - 1):
        passing = jax.lax.ppermute(passing, "model", [(j, (j - 1) % m) for j in range(m)])
        total = total + passing
    return total


def test_ring_judges_tell_a_ring_from_its_lookalikes():
    mesh_shape = (2, 4)
    drawn, results = _run_all(mesh_shape, ring_allreduce=_backward_ring)  # either direction is a ring
    judges.judge_ring_collectives(results["ring"], mesh_shape, "here")
    for ring, words in ((_fori_ring, "inside a loop"), (_jumping_ring, "further than the next device"),
                        (lambda x: jax.lax.psum(x, "model"), "other than collective-permute")):
        _, results = _run_all(mesh_shape, ring_allreduce=ring)
        judges.judge_ring_numerics(results["ring"], drawn["ring"], mesh_shape, "here")
        with pytest.raises(CheckFailed) as err:
            judges.judge_ring_collectives(results["ring"], mesh_shape, "here")
        assert words in err.value.diagnosis


def test_megatron_judges_catch_a_missing_shard_map_and_a_scatter():
    mesh_shape = (2, 4)
    drawn, results = _run_all(mesh_shape, megatron_mlp=lambda mesh, x, w1, w2: jax.nn.relu(x @ w1) @ w2)
    judges.judge_megatron_numerics(results["megatron"], drawn["megatron"], mesh_shape, "here")
    with pytest.raises(CheckFailed, match="does not do its work by hand: no shard_map"):
        judges.judge_megatron_collectives(results["megatron"], mesh_shape, "here")  # the all-reduce is XLA's
    with pytest.raises(CheckFailed, match="holds no shard_map"):
        judges.judge_check_vma({"megatron_mlp": results["megatron"]}, mesh_shape, "here")

    def scatter(mesh, x, w1, w2):
        def per_device(xb, w1b, w2b):
            return jax.lax.psum_scatter(jax.nn.relu(xb @ w1b) @ w2b, "model", scatter_dimension=1, tiled=True)
        return jax.shard_map(per_device, mesh=mesh, in_specs=(P("data", None), P(None, "model"), P("model", None)),
                             out_specs=P("data", "model"))(x, w1, w2)

    _, results = _run_all(mesh_shape, megatron_mlp=scatter)
    with pytest.raises(CheckFailed, match="reduce-scatter"):  # a real reduce-scatter, even on this CPU
        judges.judge_megatron_collectives(results["megatron"], mesh_shape, "here")


def test_a_matmul_outside_the_shard_map_is_named_on_every_mesh():
    """The statement's sentence ("no matmul outside it"), not in_specs: on a mesh whose 'model' axis has size 1,
    XLA inserts nothing for the second matmul left outside, and the collective count alone misleads."""
    def decoy(mesh, x, w1, w2):
        hidden = jax.shard_map(lambda xb, w1b: jax.nn.relu(xb @ w1b), mesh=mesh,
                               in_specs=(P("data", None), P(None, "model")), out_specs=P("data", "model"))(x, w1)
        return hidden @ w2

    for mesh_shape in ((2, 4), (8, 1)):
        _, results = _run_all(mesh_shape, megatron_mlp=decoy)
        with pytest.raises(CheckFailed) as err:
            judges.judge_megatron_collectives(results["megatron"], mesh_shape, "here")
        assert "1 matmul outside every shard_map" in err.value.message, err.value.message
        assert "in_specs" not in err.value.advice + err.value.hint
        if mesh_shape == (8, 1):
            assert "the compiled program holds no collective" in err.value.diagnosis


def test_a_matmul_spelled_as_a_product_and_a_sum_outside_is_named_too():
    """No dot_general outside, yet the matmul's work is done in global view: a value larger than every
    input and output (the broadcast product) appears outside the shard_map."""
    def spelled(mesh, x, w1, w2):
        hidden = jax.nn.relu(jnp.sum(x[:, :, None] * w1[None, :, :], axis=1))
        return jax.shard_map(lambda hb, w2b: jax.lax.psum(hb @ w2b, "model"), mesh=mesh,
                             in_specs=(P("data", "model"), P("model", None)), out_specs=P("data", None))(hidden, w2)

    _, results = _run_all((2, 4), megatron_mlp=spelled)
    largest = results["megatron"]["largest_outside"]
    assert largest["elements"] > largest["io"] and largest["primitive"] == "mul", largest
    with pytest.raises(CheckFailed) as err:
        judges.judge_megatron_collectives(results["megatron"], (2, 4), "here")
    assert "made outside every shard_map, larger than any input or output" in err.value.message, err.value.message
    _, honest = _run_all((2, 4))
    assert honest["megatron"]["largest_outside"]["elements"] <= honest["megatron"]["largest_outside"]["io"]


def test_a_failing_step_is_named():
    def broken(mesh, x, w1, w2):
        return jax.shard_map(lambda a, b, c: jax.nn.relu(a @ b) @ c, mesh=mesh,
                             in_specs=(P("data", None), P(None, "model"), P("model", None)), out_specs=P("data", None))(
            x, w1, w2)

    drawn, results = _run_all((2, 4), megatron_mlp=broken)
    assert results["megatron"]["error"].startswith("tracing: ValueError")
    with pytest.raises(CheckFailed) as err:
        judges.judge_megatron_numerics(results["megatron"], drawn["megatron"], (2, 4), "here")
    assert err.value.diagnosis == "here: megatron_mlp failed while tracing"


def test_compare_spec_measures_the_reference():
    from grader.exercises.ex18_shard_map.compare import SPEC

    found = {}
    for measurement in SPEC.measurements:
        facts = fingerprint.measure(_ctx(), measurement.payload())
        assert "errors" not in facts, (measurement.name, facts.get("errors"))
        found[measurement.name] = {op: n for op, n in facts["collectives"].items() if n}
    assert found == {"megatron_mlp": {"all-reduce": 1}, "ring_allreduce": {"collective-permute": 3},
                     "data_parallel_grads": {"all-reduce": 1}}

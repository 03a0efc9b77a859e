"""Exercise 17's trusted side and probes, against the live JAX: the statement's rules (the
reference predictor) equal what XLA compiles for all 18 layouts of the family, the draws hold
what they promise, the verdicts name what they catch without naming sizes, the FSDP probe and
judges tell the FSDP layout from its usual mistakes, and the compare spec measures it."""

import importlib.util
import re
import types
from pathlib import Path

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from grader.exercises.ex17_collectives import judges, nojax_probes, probes
from grader.feedback import CheckFailed
from grader.probes import fingerprint
from grader.sandbox import nojax

REPO = Path(__file__).resolve().parents[1]
FAMILY = judges.family("batch") + judges.family("features")


def _module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SOLUTION = _module(REPO / "solutions" / "17_predicting_collectives" / "collectives.py", "ex17_solution")


def _ctx(module=SOLUTION, **functions):
    return types.SimpleNamespace(function=lambda name: functions.get(name) or getattr(module, name))


@pytest.fixture(scope="module")
def truths():
    return probes.truth_collectives(None, FAMILY)


def test_the_statements_rules_are_what_xla_compiles_for_every_layout(truths):
    predictions = nojax_probes.predict(_ctx(), FAMILY)
    assert len(truths) == 18 and len({judges.spec_text(lay) for lay in FAMILY}) == 18
    for lay, got, want in zip(FAMILY, predictions, truths):
        assert got == {"counts": want}, judges.describe_layout(lay)
    # the statement's table (x batch split): Megatron, the free slice of w2, the gathered h and w1, the all-to-all
    table = {("column", "row"): {"all-reduce": 1}, ("column", "replicated"): {"all-reduce": 1},
             ("column", "column"): {"all-gather": 1}, ("row", "replicated"): {"all-gather": 1},
             ("row", "row"): {"all-to-all": 1, "all-reduce": 1}}
    for (w1, w2), want in table.items():
        assert truths[FAMILY.index(judges.layout("batch", w1, w2))] == want
    # the given helper agrees with the grader's truth
    assert SOLUTION.collectives_of({n: P(*FAMILY[8][n]) for n in judges.NAMES}) == truths[8]


@pytest.mark.parametrize("seed", range(20))
def test_draws_are_distinct_and_cover(seed):
    for kind in ("batch", "features"):
        drawn = judges.draw_layouts(np.random.default_rng(seed), kind)
        assert len({judges.spec_text(lay) for lay in drawn}) == judges.DRAWN
        assert judges.REQUIRED[kind] <= judges.draw_labels(drawn)
        assert all(judges.kinds(lay)[0] == kind for lay in drawn)


def test_prediction_verdicts(truths):
    layouts, want = FAMILY[:4], truths[:4]
    judges.judge_predictions([{"counts": w} for w in want], want, layouts, hidden=True)
    with pytest.raises(CheckFailed, match="XLA does not have"):
        judges.judge_predictions([{"counts": {"all_reduce": 1}}] * 4, want, layouts, hidden=True)
    with pytest.raises(CheckFailed, match="returned a list"):
        judges.judge_predictions([{"form": "a list"}] * 4, want, layouts, hidden=True)
    wrong = [{"counts": {"all-reduce": 1}}] * 4
    with pytest.raises(CheckFailed) as err:
        judges.judge_predictions(wrong, want, layouts, hidden=True)
    bad = [lay for lay, w in zip(layouts, want) if w != {"all-reduce": 1}]
    assert f"wrong on {len(bad)} of 4" in err.value.diagnosis
    assert all(judges.describe_layout(lay) in err.value.diagnosis for lay in bad)
    words = err.value.diagnosis.split("layouts of this check")[1]
    assert not re.search(r"\d", re.sub(r"\bw[12]\b", "", words))  # the layouts in words: no size, no count


def test_predict_probe_normalises_what_it_is_given():
    from collections import Counter
    layouts = FAMILY[:1]
    predict = nojax_probes.predict
    assert predict(_ctx(predict_collectives=lambda s: Counter(["all-reduce", "all-reduce"])), layouts) == \
        [{"counts": {"all-reduce": 2}}]
    assert predict(_ctx(predict_collectives=lambda s: {"all-gather": 0, "all-reduce": np.int64(1)}),
                   layouts) == [{"counts": {"all-reduce": 1}}]
    assert "form" in predict(_ctx(predict_collectives=lambda s: ["all-reduce"]), layouts)[0]
    assert "form" in predict(_ctx(predict_collectives=lambda s: {"all-reduce": 1.0}), layouts)[0]
    seen = []
    predict(_ctx(predict_collectives=lambda s: seen.append(s) or {}), layouts)
    assert seen == [{"x": nojax.PartitionSpec("data", None), "w1": nojax.PartitionSpec(None, None),
                     "w2": nojax.PartitionSpec(None, None)}]
    # a JAX stand-in, raised or returned, goes up: the check says "used JAX", not "wrong answer"
    for jax_answer in (lambda s: nojax.Absent("jax.numpy.int32")(1),
                       lambda s: {"all-reduce": nojax.Absent("jax.numpy.int32")(1)}):
        with pytest.raises(nojax.JAXNotAvailable):
            predict(_ctx(predict_collectives=jax_answer), layouts)
    with pytest.raises(nojax.JAXNotAvailable):
        predict(_ctx(predict_collectives=lambda s: int(nojax.Absent("jax.jit")(None))), layouts)


def test_the_plain_partition_spec_behaves_like_jaxs():
    """What a prediction may do with a spec in the worker without JAX, it does alike with JAX's."""
    specs = [(), ("data", None), ("data",), (None, "model"), ("model", None), (None, None), (("data",), None),
             (("data", "model"), None)]
    for a in specs:
        real, plain = P(*a), nojax.PartitionSpec(*a)
        assert (tuple(plain), len(plain), repr(plain), str(plain)) == (tuple(real), len(real), repr(real), str(real))
        assert [plain[i] for i in range(len(plain))] == [real[i] for i in range(len(real))]
        assert (plain == tuple(a)) == (real == tuple(a)) and (tuple(a) == plain) == (tuple(a) == real)
        for b in specs:
            assert (P(*a) == P(*b)) == (plain == nojax.PartitionSpec(*b)), (a, b)
            assert (P(*a) != P(*b)) == (plain != nojax.PartitionSpec(*b)), (a, b)
        assert hash(plain) == hash(nojax.PartitionSpec(*a))
    module = nojax.AbsentModule("jax.sharding")
    assert module.PartitionSpec is nojax.PartitionSpec and nojax.AbsentModule("jax").P is nojax.PartitionSpec
    assert nojax.AbsentModule("jax").sharding.PartitionSpec is nojax.PartitionSpec


def _fsdp(mesh_shape, **functions):
    arrays = judges.draw_fsdp_problem(np.random.default_rng(3))
    return arrays, probes.run_fsdp(_ctx(**functions), list(mesh_shape), *arrays)


@pytest.mark.parametrize("mesh_shape", [(2, 4), (8, 1), (1, 8)])
def test_the_reference_fsdp_passes_every_judge(mesh_shape):
    arrays, result = _fsdp(mesh_shape)
    judges.judge_fsdp_numerics(result, arrays, mesh_shape, "here")
    judges.judge_fsdp_bytes(result, arrays, mesh_shape, "here")
    judges.judge_fsdp_gathers(result, mesh_shape, "here")
    judges.judge_fsdp_output(result, mesh_shape, "here")
    assert result["argument_bytes"] == 4 * sum(a.size for a in arrays) // mesh_shape[0]


def test_fsdp_judges_catch_the_usual_mistakes():
    mesh_shape = (2, 4)
    arrays, result = _fsdp(mesh_shape, fsdp_mlp=lambda mesh, x, w1, w2: jax.nn.relu(x @ w1) @ w2)
    judges.judge_fsdp_numerics(result, arrays, mesh_shape, "here")
    with pytest.raises(CheckFailed, match="with_sharding_constraint"):  # never gathered: no constraint
        judges.judge_fsdp_gathers(result, mesh_shape, "here")

    def by_hand(mesh, x, w1, w2):  # the same all-gathers, written in a shard_map: not the constraint asked for
        def body(xb, w1b, w2b):
            whole = [jax.lax.all_gather(w, "data", axis=0, tiled=True) for w in (w1b, w2b)]
            return jax.nn.relu(xb @ whole[0]) @ whole[1]

        rows = P("data", None)
        return jax.shard_map(body, mesh=mesh, in_specs=(rows, rows, rows), out_specs=rows)(x, w1, w2)

    arrays, result = _fsdp(mesh_shape, fsdp_mlp=by_hand)
    judges.judge_fsdp_numerics(result, arrays, mesh_shape, "here")
    assert "all-gather" in judges.collective_counts(result["hlo"]) and result["constrained"] == []
    with pytest.raises(CheckFailed, match="does not gather w1 and w2 with with_sharding_constraint"):
        judges.judge_fsdp_gathers(result, mesh_shape, "here")

    def megatron_again(mesh, x, w1, w2):  # constrained, but to Megatron's layout: other collectives
        w1 = jax.lax.with_sharding_constraint(w1, NamedSharding(mesh, P(None, "model")))
        w2 = jax.lax.with_sharding_constraint(w2, NamedSharding(mesh, P("model", None)))
        return jax.nn.relu(x @ w1) @ w2

    arrays, result = _fsdp(mesh_shape, fsdp_mlp=megatron_again)
    assert result["constrained"] == ["w1", "w2"]
    with pytest.raises(CheckFailed, match="holds"):
        judges.judge_fsdp_gathers(result, mesh_shape, "here")
    arrays, result = _fsdp(mesh_shape, fsdp_specs=lambda: {"x": P(), "w1": P("model", None), "w2": P("data", None)})
    with pytest.raises(CheckFailed) as err:
        judges.judge_fsdp_bytes(result, arrays, mesh_shape, "here")
    assert "x has no split" in err.value.diagnosis and "w1 has rows split over 'model'" in err.value.diagnosis
    with pytest.raises(CheckFailed, match="no split"):
        judges.judge_fsdp_output(result, mesh_shape, "here")
    arrays, result = _fsdp(mesh_shape, fsdp_specs=lambda: (P(), P(), P()))
    with pytest.raises(CheckFailed, match="should return a dict"):
        judges.judge_fsdp_numerics(result, arrays, mesh_shape, "here")

    def megatron_gather(mesh, x, w1, w2):
        w1 = jax.lax.with_sharding_constraint(w1, NamedSharding(mesh, P(None, "model")))
        w2 = jax.lax.with_sharding_constraint(w2, NamedSharding(mesh, P("model", None)))
        return jax.nn.relu(x @ w1) @ w2

    _, result = _fsdp(mesh_shape, fsdp_mlp=megatron_gather)
    with pytest.raises(CheckFailed, match="all-reduce"):
        judges.judge_fsdp_gathers(result, mesh_shape, "here")


def test_compare_spec_measures_the_reference():
    from grader.exercises.ex17_collectives.compare import SPEC

    for measurement in SPEC.measurements:
        facts = fingerprint.measure(_ctx(), measurement.payload())
        assert "errors" not in facts, facts.get("errors")
        assert {op: n for op, n in facts["collectives"].items() if n} == {"all-gather": 2}
        assert [lay["shard_shape"] for lay in facts["layouts"]] == [[8, 8], [4, 32], [16, 8]]

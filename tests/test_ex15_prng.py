"""Exercise 15's trusted side and probes, against the live JAX: the facts the statement quotes,
the truth the clean worker computes, the key-reuse probe, and verdicts that catch the mistakes
the fixtures make (run here in-process, on the learner's functions as plain Python)."""

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grader.exercises.ex15_prng import judges, probes
from grader.feedback import CheckFailed

KEY = {"data": np.uint32([0, 42]), "kind": "typed"}


def _ctx(**functions):
    return types.SimpleNamespace(function=lambda name: functions[name])


def good_init(key, sizes):
    keys = jax.random.split(key, len(sizes) - 1)
    return [{"w": jax.random.normal(k, (m, n)) / jnp.sqrt(m), "b": jnp.zeros((n,), jnp.float32)}
            for k, m, n in zip(keys, sizes[:-1], sizes[1:])]


def same_key_init(key, sizes):
    return [{"w": jax.random.normal(key, (m, n)) / jnp.sqrt(m), "b": jnp.zeros((n,), jnp.float32)}
            for m, n in zip(sizes[:-1], sizes[1:])]


def test_the_statements_facts_hold_on_this_jax():
    k, legacy = jax.random.key(42), jax.random.PRNGKey(42)
    assert np.array_equal(jax.random.key_data(k), legacy) and np.array_equal(legacy, [0, 42])
    np.testing.assert_allclose(jax.random.normal(k, (3,)), [-0.0283, 0.4671, 0.2957], atol=1e-4)
    assert np.array_equal(jax.random.normal(k, (3,)), jax.random.normal(legacy, (3,)))
    assert np.array_equal(jax.random.normal(k, (4,))[:2], jax.random.normal(k, (2,)))
    assert np.array_equal(jax.random.normal(k, (3, 4)).ravel()[:6], jax.random.normal(k, (2, 3)).ravel())
    w, x = jax.random.normal(jax.random.PRNGKey(0), (128, 64)), jax.random.normal(jax.random.PRNGKey(0), (32, 128))
    assert np.array_equal(np.ravel(w)[:4096], np.ravel(x))  # the course text's W and x
    split = jax.random.key_data(jax.random.split(k, 5))
    assert all(np.array_equal(split[i], jax.random.key_data(jax.random.fold_in(k, i))) for i in range(5))
    assert np.array_equal(jax.random.bernoulli(k, 0.3, (99,)), jax.random.uniform(k, (99,)) < 0.3)
    assert float(jax.random.bernoulli(jax.random.key(0), 0.75, (8, 16)).mean()) == pytest.approx(0.7265625)


def test_key_reuse_probe_is_jaxs_checker():
    sizes = [4, 8, 4]
    assert probes.key_reuse(_ctx(init_mlp=good_init), "init_mlp", KEY, sizes) == {}
    assert "reuse" in probes.key_reuse(_ctx(init_mlp=same_key_init), "init_mlp", KEY, sizes)

    def numpy_init(key, sizes):
        return [np.asarray(key)]

    assert "other" in probes.key_reuse(_ctx(init_mlp=numpy_init), "init_mlp", KEY, sizes)
    with pytest.raises(NotImplementedError):
        probes.key_reuse(_ctx(init_mlp=lambda k, s: (_ for _ in ()).throw(NotImplementedError())), "init_mlp",
                         KEY, sizes)


@pytest.mark.parametrize("seed", range(3))
def test_init_judges_pass_the_reference_and_catch_reuse_and_scale(seed):
    rng = np.random.default_rng(seed)
    sizes = judges.draw_sizes(rng)
    keys, labels = judges.init_calls(rng)
    assert "fan_in_differs" in judges.size_labels(sizes)
    got = probes.init_values(_ctx(init_mlp=good_init), keys, sizes)
    layers = judges.judge_init_values(got, keys, labels, sizes)[0]
    root = probes.truth_normal(None, keys[0], max(m * n for m, n in zip(sizes[:-1], sizes[1:])))
    judges.judge_init_independent(layers, root, {})
    same = judges.judge_init_values(probes.init_values(_ctx(init_mlp=same_key_init), keys, sizes), keys, labels,
                                    sizes)[0]
    with pytest.raises(CheckFailed) as err:
        judges.judge_init_independent(same, root, {})
    assert "same key" in err.value.diagnosis or "key init_mlp was given" in err.value.diagnosis

    def fan_out(key, sizes):
        return [{**layer, "w": layer["w"] * jnp.sqrt(m / n)} for layer, m, n in
                zip(good_init(key, sizes), sizes[:-1], sizes[1:])]

    with pytest.raises(CheckFailed) as err:
        judges.judge_init_values(probes.init_values(_ctx(init_mlp=fan_out), keys, sizes), keys, labels, sizes)
    assert "fan-out" in err.value.diagnosis


def test_dropout_truth_and_the_judges_diagnoses():
    cases, labels = judges.draw_dropout_cases(np.random.default_rng(1))
    want = probes.truth_dropout(None, cases)

    def dropout(key, x, rate, training, keep_prob=None, scale=True):
        if not training:
            return x
        keep = jax.random.bernoulli(key, 1.0 - rate if keep_prob is None else keep_prob(rate), x.shape)
        return jnp.where(keep, x / (1.0 - rate) if scale else x, 0.0)

    judges.judge_dropout(probes.dropout_values(_ctx(dropout=dropout), cases), want, cases, labels)
    flipped = probes.dropout_values(_ctx(dropout=lambda k, x, r, t: dropout(k, x, r, t, keep_prob=lambda r: r)), cases)
    with pytest.raises(CheckFailed) as err:
        judges.judge_dropout(flipped, want, cases, labels)
    assert "keeps with probability rate" in err.value.diagnosis
    unscaled = probes.dropout_values(_ctx(dropout=lambda k, x, r, t: dropout(k, x, r, t, scale=False)), cases)
    with pytest.raises(CheckFailed) as err:
        judges.judge_dropout(unscaled, want, cases, labels)
    assert "not scaled" in err.value.diagnosis


def _epoch(key, params, batches, rate, lr, *, step_keys="split", returned="carry"):
    hidden = params[0]["w"].shape[1]
    masks, given = [], key
    for i, (x, y) in enumerate(batches):
        if step_keys == "split":
            key, step_key = jax.random.split(key)
        else:  # the same step key every step
            step_key = jax.random.fold_in(given, 7)
        keep = jax.random.bernoulli(step_key, 1.0 - rate, (x.shape[0], hidden))
        params = probes._sgd_step(params, x, y, keep, rate, lr)
        masks.append(keep)
    return params, {"carry": key, "input": given, "step": step_key}[returned], masks


def _judged(fn, case):
    got = probes.epoch_values(_ctx(train_epoch=fn), case["key"], *judges.epoch_args(case))
    masks = judges.epoch_masks(judges.first_epoch(got, case["key"]["kind"]), case)
    keys = {"input": case["key"]}
    if got["first"]["key"].get("kind") in ("typed", "legacy"):
        keys["returned"] = got["first"]["key"]
    want = probes.truth_epoch(None, *judges.epoch_args(case)[:2], masks, *judges.epoch_args(case)[2:], keys)
    judges.judge_epoch_values(got, want, case)
    return got, masks, want["drawn"]


@jax.numpy_rank_promotion("allow")  # the stub's given MLP adds a bias row to a batch, as the learner's does
def test_epoch_judges_follow_the_key():
    case = judges.draw_epoch(np.random.default_rng(3), "typed")
    reuse = probes.key_reuse(_ctx(train_epoch=_epoch), "train_epoch", case["key"], *judges.epoch_args(case), True)
    assert reuse == {}
    got, masks, drawn = _judged(_epoch, case)
    judges.judge_fresh_steps(masks, drawn["input"], {})
    judges.judge_returned_key(got, masks, drawn["returned"], case, reuse)
    legacy = {**case, "key": judges.legacy_twin(case["key"])}
    judges.judge_epoch_kinds(got, _judged(_epoch, legacy)[0])

    same = lambda *a: _epoch(*a, step_keys="same")  # noqa: E731
    got, masks, drawn = _judged(same, case)
    with pytest.raises(CheckFailed) as err:
        judges.judge_fresh_steps(masks, drawn["input"], {})
    assert "same dropout mask" in err.value.diagnosis
    for returned, match in (("input", "returned the key it was given"), ("step", "a step already used")):
        fn = lambda *a, r=returned: _epoch(*a, returned=r)  # noqa: E731
        got, masks, drawn = _judged(fn, case)
        with pytest.raises(CheckFailed) as err:
            judges.judge_returned_key(got, masks, drawn.get("returned"), case, {})
        assert match in err.value.diagnosis


def test_noise_judges_and_structure():
    cases, labels = judges.draw_noise_cases(np.random.default_rng(2))
    want = probes.truth_noise(None, cases)

    def vmapped(key, xs):
        return jax.vmap(lambda k, x: x + jax.random.normal(k, x.shape))(jax.random.split(key, xs.shape[0]), xs)

    def loop(key, xs):
        return jnp.stack([x + jax.random.normal(k, x.shape) for k, x in zip(jax.random.split(key, xs.shape[0]), xs)])

    judges.judge_noise(probes.noise_values(_ctx(per_example_noise=vmapped), cases), want, cases, labels)
    judges.judge_noise(probes.noise_values(_ctx(per_example_noise=loop), cases), want, cases, labels)
    zeros = probes.truth_noise(None, judges.noise_structure_cases(KEY, [2, 9], 3))
    judges.judge_noise_structure(probes.noise_structure(_ctx(per_example_noise=vmapped), KEY, [2, 9], 3), zeros)
    with pytest.raises(CheckFailed, match="the jaxpr grows with the batch"):
        judges.judge_noise_structure(probes.noise_structure(_ctx(per_example_noise=loop), KEY, [2, 9], 3), zeros)

    def two_faced(key, xs):  # red team 2, attack 12: a vmap for tracers, a Python loop for concrete arrays
        if isinstance(xs, jax.core.Tracer):
            return jax.vmap(lambda x: x + jax.random.normal(key, x.shape))(xs)  # one key for every example
        return loop(key, xs)

    with pytest.raises(CheckFailed, match="the program the grader traced"):
        judges.judge_noise_structure(probes.noise_structure(_ctx(per_example_noise=two_faced), KEY, [2, 9], 3), zeros)
    closed = lambda key, xs: jax.vmap(lambda x: x + jax.random.normal(key, x.shape))(xs)  # noqa: E731
    with pytest.raises(CheckFailed) as err:
        judges.judge_noise(probes.noise_values(_ctx(per_example_noise=closed), cases), want, cases, labels,
                           explain=lambda i: probes.truth_noise(None, cases[i:i + 1], True)[0])
    assert "every example got the same noise" in err.value.diagnosis
    one = lambda key, xs: xs + jax.random.normal(key, xs.shape)  # noqa: E731
    with pytest.raises(CheckFailed) as err:
        judges.judge_noise(probes.noise_values(_ctx(per_example_noise=one), cases), want, cases, labels,
                           explain=lambda i: probes.truth_noise(None, cases[i:i + 1], True)[0])
    assert "one draw for the whole batch" in err.value.diagnosis

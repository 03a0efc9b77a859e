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
    root = probes.truth_bits(None, keys[0], max(m * n for m, n in zip(sizes[:-1], sizes[1:])))
    judges.judge_init_independent(layers, root, {}, probes.init_draws(_ctx(init_mlp=good_init), keys[0], sizes))
    same = judges.judge_init_values(probes.init_values(_ctx(init_mlp=same_key_init), keys, sizes), keys, labels,
                                    sizes)[0]
    with pytest.raises(CheckFailed) as err:
        judges.judge_init_independent(same, root, {}, probes.init_draws(_ctx(init_mlp=same_key_init), keys[0], sizes))
    assert "same key" in err.value.diagnosis or "key init_mlp was given" in err.value.diagnosis

    def sliced(key, sizes):  # every layer out of one long draw: values and keys look right
        shapes = list(zip(sizes[:-1], sizes[1:]))
        stream, start, out = jax.random.normal(jax.random.split(key)[1], (sum(m * n for m, n in shapes),)), 0, []
        for m, n in shapes:
            out.append({"w": stream[start:start + m * n].reshape(m, n) / jnp.sqrt(m), "b": jnp.zeros(n)})
            start += m * n
        return out

    one_draw = judges.judge_init_values(probes.init_values(_ctx(init_mlp=sliced), keys, sizes), keys, labels,
                                        sizes)[0]
    draws = probes.init_draws(_ctx(init_mlp=sliced), keys[0], sizes)
    assert draws["draws"] == [[sum(m * n for m, n in zip(sizes[:-1], sizes[1:])), 1]]
    with pytest.raises(CheckFailed) as err:
        judges.judge_init_independent(one_draw, root, {}, draws)
    assert "one draw per layer" in err.value.message
    with pytest.raises(CheckFailed) as err:  # the draws of another program than the one that gave the layers
        judges.judge_init_independent(layers, root, {}, {**probes.init_draws(_ctx(init_mlp=good_init), keys[0], sizes),
                                                         "outputs": probes.init_values(_ctx(init_mlp=sliced), keys[:1],
                                                                                       sizes)[0]["out"]})
    assert "traced" in err.value.message

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
    return got, masks, want["bits"]


@jax.numpy_rank_promotion("allow")  # the stub's given MLP adds a bias row to a batch, as the learner's does
def test_epoch_judges_follow_the_key():
    case = judges.draw_epoch(np.random.default_rng(3), "typed")
    reuse = probes.key_reuse(_ctx(train_epoch=_epoch), "train_epoch", case["key"], *judges.epoch_args(case), True)
    assert reuse == {}
    got, masks, bits = _judged(_epoch, case)
    judges.judge_fresh_steps(masks, bits["input"], {})
    draws = probes.epoch_draws(_ctx(train_epoch=_epoch), case["key"], *judges.epoch_args(case))
    assert draws["draws"] == [[int(masks[0].size), len(masks)]]
    judges.judge_epoch_draws(masks, draws, case)
    judges.judge_returned_key(got, masks, bits["returned"], case, reuse)

    def longer(key, params, batches, rate, lr):  # each mask from the later half of a draw twice its size
        masks = []
        for x, y in batches:
            key, step_key = jax.random.split(key)
            n = x.shape[0] * params[0]["w"].shape[1]
            keep = (jax.random.uniform(step_key, (2 * n,))[n:] < 1.0 - rate).reshape(x.shape[0], -1)
            params = probes._sgd_step(params, x, y, keep, rate, lr)
            masks.append(keep)
        return params, key, masks

    _, cut, _ = _judged(longer, case)
    with pytest.raises(CheckFailed) as err:
        judges.judge_epoch_draws(cut, probes.epoch_draws(_ctx(train_epoch=longer), case["key"],
                                                         *judges.epoch_args(case)), case)
    assert "one draw per step" in err.value.message
    with pytest.raises(CheckFailed) as err:  # another program's draws than the one that gave the masks
        judges.judge_epoch_draws(cut, draws, case)
    assert "traced" in err.value.message
    legacy = {**case, "key": judges.legacy_twin(case["key"])}
    judges.judge_epoch_kinds(got, _judged(_epoch, legacy)[0])

    same = lambda *a: _epoch(*a, step_keys="same")  # noqa: E731
    got, masks, bits = _judged(same, case)
    with pytest.raises(CheckFailed) as err:
        judges.judge_fresh_steps(masks, bits["input"], {})
    assert "same dropout mask" in err.value.diagnosis
    for returned, match in (("input", "returned the key it was given"), ("step", "a step already used")):
        fn = lambda *a, r=returned: _epoch(*a, returned=r)  # noqa: E731
        got, masks, bits = _judged(fn, case)
        with pytest.raises(CheckFailed) as err:
            judges.judge_returned_key(got, masks, bits.get("returned"), case, {})
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


def _copy(key):
    """A fresh key object with the same data: JAX's key-reuse checker does not follow it."""
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        return jax.random.wrap_key_data(jax.random.key_data(key))
    return jnp.array(key)


def test_draws_are_monotone_in_the_keys_bits_on_this_jax():
    """What the judges' ranks rest on: a draw of shape (a, b) lays out the bits of (a * b,) in
    row-major order, a shorter draw is a prefix, and uniform, normal, truncated_normal and
    bernoulli are monotone in the bits, exactly, in float32."""
    k = jax.random.key(3)
    bits = np.asarray(jax.random.bits(k, (200_000,), jnp.uint32))
    assert np.array_equal(np.asarray(jax.random.bits(k, (300, 40), jnp.uint32)).ravel(), bits[:12_000])
    assert np.array_equal(np.asarray(jax.random.bits(jax.random.key_data(k), (99,), jnp.uint32)), bits[:99])
    for draw in (jax.random.uniform(k, (200_000,)), jax.random.normal(k, (200_000,)) / 7.0,
                 jax.random.truncated_normal(k, -2.0, 2.0, (200_000,))):
        ordered = np.asarray(draw)[np.lexsort((np.asarray(draw), bits))]
        assert np.all(np.diff(ordered) >= 0)
    assert judges.monotone_chance(bits, -np.asarray(jax.random.normal(k, (50, 60)))) < 1e-100
    assert judges.monotone_chance(bits, np.asarray(jax.random.bernoulli(k, 0.3, (2000,)))) < 1e-100
    assert judges.monotone_chance(bits, np.asarray(jax.random.normal(jax.random.key(4), (2000,)))) is None


def test_nested_chance_is_the_chance_of_independent_masks():
    rng = np.random.default_rng(0)
    u = rng.uniform(size=2048)
    assert judges.nested_chance(u < 0.875, u >= 0.125) < 1e-12  # disjoint dropped units
    assert judges.nested_chance(u < 0.25, u < 0.3) < 1e-90  # one inside the other
    assert judges.nested_chance(u < 0.5, rng.uniform(size=2048) < 0.5) is None
    a, b = np.zeros(8, bool), np.zeros(8, bool)
    a[:2], b[2:4] = True, True  # 2 of 8 and 2 of 8, disjoint: chance C(6, 2) / C(8, 2) = 15 / 28, and more
    assert judges.nested_chance(a, b) >= 15 / 28
    assert judges.nested_chance(np.ones(8, bool), b) is None  # an all-kept mask says nothing


@pytest.mark.parametrize("seed", range(3))
def test_init_judge_follows_draws_from_a_copy_of_the_key(seed):
    """red team 32: layer 0 negated (or uniform, transposed) from a copy of `key` itself, or two
    layers one key's draw and its negation: equal to no draw from key, monotone in its bits."""
    rng = np.random.default_rng(seed)
    sizes = judges.draw_sizes(rng)
    keys, _ = judges.init_calls(rng)
    root = probes.truth_bits(None, keys[0], max(m * n for m, n in zip(sizes[:-1], sizes[1:])))

    def negated(key, sizes):
        return [{**layer, "w": -jax.random.normal(_copy(key), layer["w"].shape) / jnp.sqrt(layer["w"].shape[0])}
                if i == 0 else layer for i, layer in enumerate(good_init(key, sizes))]

    def uniform_t(key, sizes):
        m, n = sizes[0], sizes[1]
        w = (jax.random.uniform(_copy(key), (n, m)).T - 0.5) * jnp.sqrt(12.0) / jnp.sqrt(m)
        return [{**layer, "w": w} if i == 0 else layer for i, layer in enumerate(good_init(key, sizes))]

    def mirrored(key, sizes):
        layers = good_init(key, sizes)
        k = jax.random.split(key, len(sizes) - 1)[0]
        return [layers[0], {**layers[1], "w": -jax.random.normal(k, layers[1]["w"].shape) * 3.0}] + layers[2:]

    for fn, match in ((negated, "`key` itself"), (uniform_t, "`key` itself"), (mirrored, "the same key")):
        layers = probes.init_values(_ctx(init_mlp=fn), keys[:1], sizes)[0]["out"]
        with pytest.raises(CheckFailed, match=match):
            judges.judge_init_independent(layers, root, {}, probes.init_draws(_ctx(init_mlp=fn), keys[0], sizes))


@jax.numpy_rank_promotion("allow")
def test_epoch_judges_follow_thresholds_of_one_key():
    """red team 32: odd steps keep where uniform(copy of the previous step key) >= rate, and an
    epoch that returns a copy of its last step key with masks drawn as uniform >= rate."""
    def complement(key, params, batches, rate, lr):
        hidden, masks, step_key = params[0]["w"].shape[1], [], None
        for t, (x, y) in enumerate(batches):
            if t % 2 == 0:
                key, step_key = jax.random.split(key)
                keep = jax.random.bernoulli(step_key, 1.0 - rate, (x.shape[0], hidden))
            else:
                keep = jax.random.uniform(_copy(step_key), (x.shape[0], hidden)) >= rate
            params = probes._sgd_step(params, x, y, keep, rate, lr)
            masks.append(keep)
        return params, key, masks

    def returns_copy(key, params, batches, rate, lr):
        hidden, masks = params[0]["w"].shape[1], []
        for x, y in batches:
            key, step_key = jax.random.split(key)
            keep = jax.random.uniform(step_key, (x.shape[0], hidden)) >= rate
            params = probes._sgd_step(params, x, y, keep, rate, lr)
            masks.append(keep)
        return params, _copy(step_key), masks

    for seed in range(3):
        case = judges.draw_epoch(np.random.default_rng(seed), "typed")
        got, masks, bits = _judged(complement, case)
        with pytest.raises(CheckFailed, match="drew their masks from the same key"):
            judges.judge_fresh_steps(masks, bits["input"], {})
        got, masks, bits = _judged(returns_copy, case)
        judges.judge_fresh_steps(masks, bits["input"], {})
        with pytest.raises(CheckFailed) as err:
            judges.judge_returned_key(got, masks, bits["returned"], case, {})
        assert "a step already used" in err.value.diagnosis


def test_noise_structure_refuses_jax_loops_and_callbacks():
    """red team 32: lax.map over the examples is a scan whose jaxpr does not grow with B."""
    zeros = probes.truth_noise(None, judges.noise_structure_cases(KEY, [2, 9], 3))

    def mapped(key, xs):
        keys = jax.random.split(key, xs.shape[0])
        return jax.lax.map(lambda kx: kx[1] + jax.random.normal(kx[0], kx[1].shape), (keys, xs))

    def fori(key, xs):
        keys = jax.random.split(key, xs.shape[0])
        return jax.lax.fori_loop(0, xs.shape[0], lambda i, acc: acc.at[i].set(
            xs[i] + jax.random.normal(keys[i], xs.shape[1:])), xs)

    def callback(key, xs):
        noise = jax.vmap(lambda k, x: jax.random.normal(k, x.shape))(jax.random.split(key, xs.shape[0]), xs)
        return jax.pure_callback(lambda a, b: np.asarray(a) + np.asarray(b), jax.ShapeDtypeStruct(xs.shape, xs.dtype),
                                 xs, noise)

    for fn, match in ((mapped, "JAX loop"), (fori, "JAX loop"), (callback, "host")):
        with pytest.raises(CheckFailed, match=match):
            judges.judge_noise_structure(probes.noise_structure(_ctx(per_example_noise=fn), KEY, [2, 9], 3), zeros)

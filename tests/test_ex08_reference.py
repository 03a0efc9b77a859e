"""Exercise 8's trusted-side references (grader/exercises/ex08_equinox/judges.py) against the live
JAX, optax and Equinox: the float64 forward pass, loss, backprop gradient and Adam steps
must agree with what an Equinox MLP trained by optax.adam really does, and the step
comparison must reject steps that are not Adam's."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from grader.exercises.ex08_equinox import judges as ref


def mlp(sizes, activation, seed):
    act = {"tanh": jnp.tanh, "relu": jax.nn.relu}[activation]
    keys = jax.random.split(jax.random.key(seed), len(sizes) - 1)
    layers = [eqx.nn.Linear(a, b, key=k) for a, b, k in zip(sizes[:-1], sizes[1:], keys)]

    def forward(layers, x):
        for layer in layers[:-1]:
            x = act(layer(x))
        return layers[-1](x)

    return layers, forward


def as_plain(layers):
    return [(np.asarray(layer.weight, np.float64), np.asarray(layer.bias, np.float64)) for layer in layers]


@pytest.mark.parametrize("activation", ref.ACTIVATIONS)
def test_forward_loss_and_grads_match_jax(activation):
    rng = np.random.default_rng(0)
    sizes = [4, 7, 5, 3]
    layers, forward = mlp(sizes, activation, 1)
    xs = rng.normal(size=(6, 4)).astype(np.float32)
    ys = rng.normal(size=(6, 3)).astype(np.float32)

    def loss(layers):
        return jnp.mean((jax.vmap(lambda x: forward(layers, x))(xs) - ys) ** 2)

    plain = as_plain(layers)
    np.testing.assert_allclose(ref.forward(plain, activation, xs), jax.vmap(lambda x: forward(layers, x))(xs),
                               rtol=1e-5, atol=1e-6)
    assert ref.loss(plain, activation, xs, ys) == pytest.approx(float(loss(layers)), rel=1e-5)
    grads = jax.grad(loss)(layers)
    for (gw, gb), layer in zip(ref.grads(plain, activation, xs, ys), grads):
        np.testing.assert_allclose(gw, layer.weight, rtol=1e-4, atol=1e-7)
        np.testing.assert_allclose(gb, layer.bias, rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize("activation", ref.ACTIVATIONS)
def test_two_optax_adam_steps_pass_and_sgd_fails(activation):
    rng = np.random.default_rng(1)
    sizes = [3, 6, 2]
    layers, forward = mlp(sizes, activation, 2)
    batches = [(rng.normal(size=(5, 3)).astype(np.float32), rng.normal(size=(5, 2)).astype(np.float32))
               for _ in range(2)]
    opt = optax.adam(ref.LEARNING_RATE)
    state = opt.init(layers)
    history = [as_plain(layers)]
    for xs, ys in batches:
        g = jax.grad(lambda ls: jnp.mean((jax.vmap(lambda x: forward(ls, x))(xs) - ys) ** 2))(layers)
        updates, state = opt.update(g, state, layers)
        layers = optax.apply_updates(layers, updates)
        history.append(as_plain(layers))
    w0, w1, w2 = history
    problem, states = ref.step_mismatch(w0, w1, ref.grads(w0, activation, *batches[0]), None)
    assert problem == ""
    problem, _ = ref.step_mismatch(w1, w2, ref.grads(w1, activation, *batches[1]), states)
    assert problem == ""
    # a second step taken as if it were the first (the optimizer state dropped) is caught
    problem, _ = ref.step_mismatch(w1, w2, ref.grads(w1, activation, *batches[1]), None)
    assert "Adam moves it by" in problem
    # so is plain SGD
    sgd = [(w - ref.LEARNING_RATE * gw, b - ref.LEARNING_RATE * gb)
           for (w, b), (gw, gb) in zip(w0, ref.grads(w0, activation, *batches[0]))]
    problem, _ = ref.step_mismatch(w0, sgd, ref.grads(w0, activation, *batches[0]), None)
    assert problem


def test_read_weights_rejects_transposed_and_wrong_dtype():
    good = [{"w": np.zeros((3, 2), np.float32), "b": np.zeros(3, np.float32)},
            {"w": np.zeros((1, 3), np.float32), "b": np.zeros(1, np.float32)}]
    assert len(ref.read_weights(good, [2, 3, 1])) == 2
    with pytest.raises(ref.CheckFailed):
        ref.read_weights([{"w": np.zeros((2, 3), np.float32), "b": np.zeros(3, np.float32)}, good[1]], [2, 3, 1])
    with pytest.raises(ref.CheckFailed):
        ref.read_weights([{"w": np.zeros((3, 2)), "b": np.zeros(3)}, good[1]], [2, 3, 1])
    with pytest.raises(ref.CheckFailed):
        ref.read_weights(good[:1], [2, 3, 1])


def test_dropout_masks_are_read_off_real_eqx_dropout_losses_and_noise_is_refused():
    """One hidden layer, one example: every training-mode loss of a real eqx.nn.Dropout is one
    mask's (units zeroed, the rest scaled by 1/(1-rate)), the share dropped is the rate; the
    same model with rate-sized Gaussian noise instead, or dropout at another rate, is refused."""
    sizes, rate = [4, 6, 2], 0.4
    layers, _ = mlp(sizes, "tanh", 3)
    x = np.random.default_rng(0).normal(size=4).astype(np.float32)
    y = np.random.default_rng(1).normal(size=2).astype(np.float32)

    def loss_with(kind, key, p=rate):
        h = jnp.tanh(layers[0](x))
        if kind == "dropout":
            h = eqx.nn.Dropout(p)(h, key=key)
        else:
            h = h * (1.0 + p * jax.random.normal(key, h.shape))
        return float(jnp.mean((layers[1](h) - y) ** 2))

    keys = [jax.random.key(k) for k in range(64)]
    plain = as_plain(layers)
    masks = ref.dropout_masks(plain, "tanh", rate, x, y, [loss_with("dropout", k) for k in keys])
    assert all(m is not None for m in masks)
    ref.judge_dropout_masks(masks, rate)
    noisy = ref.dropout_masks(plain, "tanh", rate, x, y, [loss_with("noise", k) for k in keys])
    with pytest.raises(ref.CheckFailed, match="not those of any dropout mask"):
        ref.judge_dropout_masks(noisy, rate)
    low = ref.dropout_masks(plain, "tanh", 0.8, x, y, [loss_with("dropout", k, p=0.8) for k in keys])
    with pytest.raises(ref.CheckFailed, match="dropped"):
        ref.judge_dropout_masks(low, 0.2)  # the right masks, at another rate than asked


@pytest.mark.parametrize("between", ["layers", "examples"])
def test_masks_of_two_keys_are_told_from_masks_of_one(between):
    """Two hidden layers of one width on one example, or one hidden layer on two copies of one
    example: real eqx.nn.Dropout losses with a key each pass ``judge_masks_differ``; the same
    key for both (every hidden layer's dropout, or every example's) is refused."""
    rate = 0.5
    sizes = [3, 4, 4, 2] if between == "layers" else [3, 5, 2]
    layers, _ = mlp(sizes, "tanh", 5)
    x = np.random.default_rng(2).normal(size=3).astype(np.float32)
    y = np.random.default_rng(3).normal(size=2).astype(np.float32)
    dropout = eqx.nn.Dropout(rate)

    def one(k1, k2):
        h = dropout(jnp.tanh(layers[0](x)), key=k1)
        if between == "layers":
            return float(jnp.mean((layers[2](dropout(jnp.tanh(layers[1](h)), key=k2)) - y) ** 2))
        h2 = dropout(jnp.tanh(layers[0](x)), key=k2)
        return (float(jnp.mean((layers[1](h) - y) ** 2)) + float(jnp.mean((layers[1](h2) - y) ** 2))) / 2

    keys = [jax.random.split(jax.random.key(k)) for k in range(32)]
    candidates = ref.pair_losses(as_plain(layers), "tanh", rate, x, y, between)
    own = ref.mask_pairs(candidates, [one(k[0], k[1]) for k in keys])
    assert all(p is not None for p in own)
    ref.judge_masks_differ(own, rate, sizes[1], between)
    shared = ref.mask_pairs(candidates, [one(k[0], k[0]) for k in keys])
    with pytest.raises(ref.CheckFailed, match="does not get a key of its own"):
        ref.judge_masks_differ(shared, rate, sizes[1], between)


def test_layers_built_from_one_key_are_found():
    """eqx.nn.Linear layers of different shapes built from one key start with the same random
    draws (JAX's bits follow the key and the flat index); split keys do not."""
    own, _ = mlp([3, 5, 5, 2], "tanh", 7)
    assert ref.shared_key_layers(as_plain(own)) == []
    key = jax.random.key(7)
    shared = [eqx.nn.Linear(a, b, key=key) for a, b in zip([3, 5, 5], [5, 5, 2])]
    assert ref.shared_key_layers(as_plain(shared)) == [(0, 1), (0, 2), (1, 2)]
    with pytest.raises(ref.CheckFailed, match="same key"):
        ref.judge_layer_keys(as_plain(shared), "a model")


def test_the_step_structure_is_read_from_the_program_the_calls_run():
    """``prepare_training`` traces train_step once under the grader's jit and returns that
    program's primitives and loss; ``judge_step_program`` asks that train_step be
    eqx.filter_jit's own (its calls trace the same body), that the traced loss be the first
    call's, then that the matmuls are there.  A Python function that hands tracers the
    filter_jit-ed step and runs something else on arrays (red team 2, attack 12) fails on the
    first; a class of one's own named like Equinox's wrapper is not Equinox's."""
    import types

    from grader.exercises.ex08_equinox import probes
    from grader.feedback import CheckFailed
    from grader.sandbox.guard import Roots

    optimizer = optax.adam(1e-2)

    class MLP(eqx.Module):
        layers: list

        def __call__(self, x):
            return self.layers[1](jnp.tanh(self.layers[0](x)))

    def make_model(sizes, activation, rate, seed):
        keys = jax.random.split(jax.random.key(seed), len(sizes) - 1)
        return MLP([eqx.nn.Linear(a, b, key=k) for a, b, k in zip(sizes[:-1], sizes[1:], keys)])

    @eqx.filter_jit
    def step(model, opt_state, xs, ys, key):
        loss, grads = eqx.filter_value_and_grad(lambda m: jnp.mean((jax.vmap(m)(xs) - ys) ** 2))(model)
        updates, opt_state = optimizer.update(grads, opt_state, eqx.filter(model, eqx.is_array))
        return eqx.apply_updates(model, updates), opt_state, loss

    def two_faced(model, opt_state, xs, ys, key):
        if isinstance(xs, jax.core.Tracer):
            return step(model, opt_state, xs, ys, key)
        return model, opt_state, jnp.float32(0.0)

    class _JitWrapper:  # a learner's class, named like Equinox's
        def __call__(self, *args):
            return two_faced(*args)

    rng = np.random.default_rng(0)
    batches = [{"xs": rng.normal(size=(5, 3)).astype(np.float32), "ys": rng.normal(size=(5, 2)).astype(np.float32)}]
    roots = Roots.of_this_python(sandbox="/nonexistent-sandbox", grader="/nonexistent-grader")
    for fn, fails in ((step, None), (two_faced, "not the function eqx.filter_jit returns"),
                      (_JitWrapper(), "not the function eqx.filter_jit returns")):
        functions = {"make_model": make_model, "train_step": fn,
                     "init_opt_state": lambda m: optimizer.init(eqx.filter(m, eqx.is_array))}
        ctx = types.SimpleNamespace(slots={}, roots=roots, function=functions.__getitem__)
        prepared = probes.prepare_training(ctx, "run", [3, 4, 2], "tanh", 0, batches, 0)
        first = float(prepared["outputs"]["loss"])
        if fails is None:
            ref.judge_step_program(prepared, first)
            with pytest.raises(CheckFailed) as err:  # calls whose first loss is not the traced program's
                ref.judge_step_program(prepared, first + 1.0)
            assert "traced" in err.value.diagnosis
        else:
            with pytest.raises(CheckFailed, match=fails):
                ref.judge_step_program(prepared, first)


def test_layers_built_from_one_key_are_seen_whatever_order_their_draws_are_put_in():
    import equinox as eqx

    from grader.exercises.ex08_equinox.judges import shared_key_layers

    def weights(keys, reorder):
        out = []
        for i, ((a, b), k) in enumerate(zip([(5, 7), (7, 6), (6, 3)], keys)):
            w = np.asarray(eqx.nn.Linear(a, b, key=k).weight)
            out.append((reorder(w) if i else w, None))
        return out

    one = [jax.random.PRNGKey(3)] * 3
    split = list(jax.random.split(jax.random.PRNGKey(3), 3))
    for reorder in (lambda w: w, lambda w: np.roll(w.ravel(), 5).reshape(w.shape), lambda w: w.T.copy(),
                    lambda w: w.ravel()[::-1].reshape(w.shape)):
        assert shared_key_layers(weights(one, reorder)), "one key, reordered draws"
        assert not shared_key_layers(weights(split, reorder)), "a key each"


@pytest.mark.parametrize("between", ["layers", "examples"])
def test_masks_made_from_one_another_repeat_in_pairs_and_independent_ones_do_not(between):
    from grader.feedback import CheckFailed

    width, rate, n = 5, 0.45, 32
    rng = np.random.default_rng(7)

    def index(mask):
        return int("".join(str(int(b)) for b in mask), 2)

    def ids(masks_a, masks_b):
        pairs = [(index(a), index(b)) for a, b in zip(masks_a, masks_b)]
        return [frozenset({tuple(sorted(p)) if between == "examples" else p}) for p in pairs]

    for _ in range(50):  # independent draws: never accused of dependence
        a, b = rng.random((n, width)) >= rate, rng.random((n, width)) >= rate
        ref.judge_masks_independent(ids(a, b), rate, width, between)
    a = rng.random((n, width)) >= rate
    with pytest.raises(CheckFailed, match="not drawn independently"):
        ref.judge_masks_independent(ids(a, np.roll(a, 1, axis=1)), rate, width, between)


def test_a_loss_that_several_pairs_of_masks_give_is_no_evidence_of_dependence():
    """Where the losses cannot tell pairs of masks apart (here: the first layer's unit 0 changes
    nothing), a loss names a set of pairs, which independent keys name more often than any one
    pair: the chance is counted over those sets (``match_chance``), not as if each loss named one
    pair (honest files with a split key, a chained split or fold_in were accused at some seeds).
    Masks made from one another still repeat far beyond it."""
    from grader.feedback import CheckFailed

    width, rate, n = 5, 0.45, 32
    rng = np.random.default_rng(11)
    size = 2 ** width
    base = rng.normal(size=(size, size))
    candidates = base[np.arange(size) | (1 << (width - 1))]  # mask i and i with unit 0 kept: one loss

    def draw(k):
        return (rng.random((k, width)) >= rate) @ (1 << np.arange(width - 1, -1, -1))

    for _ in range(50):  # independent draws: never accused
        losses = candidates[draw(n), draw(n)]
        ref.judge_masks_independent(ref.mask_pair_ids(candidates, losses, "layers"), rate, width, "layers", candidates)
    first = draw(n)
    rolled = ((first << 1) | (first >> (width - 1))) & (size - 1)  # the second layer's mask: the first, rotated
    with pytest.raises(CheckFailed, match="not drawn independently"):
        ref.judge_masks_independent(ref.mask_pair_ids(candidates, candidates[first, rolled], "layers"), rate, width,
                                    "layers", candidates)
    assert ref.match_chance(candidates, rate) > 1.5 * (((1 - rate) ** 2 + rate ** 2) ** width) ** 2


def test_one_mask_under_every_key_fails_however_likely_that_mask_is():
    """A fixed key gives one mask (or pair) under every key.  That fails whenever independent
    draws would agree so often less than once in a million times -- judged on every key, also
    where the pair is a likely ("heavy") one that the repeat count leaves out -- and never where
    one agreement is the likely outcome."""
    from grader.feedback import CheckFailed

    width, rate, n = 3, 0.3, 32
    size = 2 ** width
    candidates = np.random.default_rng(5).normal(size=(size, size))
    all_kept = size - 1  # both layers keep every unit: a pair with chance 0.7**6, above LIGHT
    assert ref.id_chance(((all_kept, all_kept),), ref._mask_chances(candidates, rate), "layers") > ref.LIGHT
    same = ref.mask_pair_ids(candidates, [candidates[all_kept, all_kept]] * n, "layers")
    with pytest.raises(CheckFailed, match="do not change with the key"):
        ref.judge_masks_independent(same, rate, width, "layers", candidates)
    with pytest.raises(CheckFailed, match="do not change with the key"):
        ref.judge_dropout_masks([{0: True, 1: True, 2: True}] * n, 0.2)  # 0.8**3 per key: 0.512**31 together
    ref.judge_masks_change_with_key([{0: True}] * 3, 0.9, "masks", "loss_fn's dropout", "")  # 0.81: likely

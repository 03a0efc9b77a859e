"""Hidden checks for exercise 8: architectures, data, seeds and dropout rates drawn at grading time.

Every model is built inside the sandbox by the learner's `make_model`; the probes in
`grader/exercises/ex08_equinox/probes.py` hand back plain data.  The references (forward pass, loss,
backprop gradient, Adam) are computed here in float64 NumPy from the weights the
learner's own `weights(model)` returned (`grader/exercises/ex08_equinox/judges.py`), so they hold
whatever the learner's initialisation drew.

Architectures: two per grading (one per activation, one and two hidden layers between
them, one hidden width from 3..8, 2..6 inputs, 2..3 outputs) and one batch size, drawn once with the
generator of `test_forward_matches_weights` (its COVERAGE entry replays that very draw)
and shared by every check: building a model of a new shape compiles JAX's random-number
helpers eagerly, layer by layer, which costs far more than the checks themselves.  Data,
seeds, keys and dropout rates are each check's own draw.  The compile check alone uses
batches of COMPILE_BATCH rows, so no other check can have compiled its program first.
"""

import numpy as np
import pytest

from grader.coverage import Coverage, check_rng, ensure
from grader.exercises.ex08_equinox import judges as ref
from grader.feedback import CheckFailed, expect_array
from grader.testing import budget, explain, probe_compiles, probe_pair

PROBE = "ex08_equinox:"
COMPILE_BATCH = 7  # batch rows of the compile check; every other check uses 3..6
ARCH_TEST = "test_forward_matches_weights"  # whose generator draws the shared architectures


def draw_data(rng, sizes, batch):
    return (rng.normal(size=(batch, sizes[0])).astype(np.float32),
            rng.normal(size=(batch, sizes[-1])).astype(np.float32))


def draw_architectures(rng):
    """[(activation, sizes)] -- one model per activation, one and two hidden layers between
    them (either way round), every hidden layer of one drawn width, so the two models share
    all but one layer shape -- and the batch size every check but the compile check uses."""
    # outputs at least 2 wide: at width 1 a loss summed over the outputs equals the mean
    d_in, width, d_out = int(rng.integers(2, 7)), int(rng.integers(3, 9)), int(rng.integers(2, 4))
    depths = [int(d) for d in rng.permutation([1, 2])]
    models = [(activation, [d_in] + [width] * depth + [d_out]) for activation, depth in zip(ref.ACTIVATIONS, depths)]
    return models, int(rng.integers(3, 7))


def model_labels(models):
    return ({a for a, _ in models} | {{1: "one_hidden", 2: "two_hidden"}[len(s) - 2] for _, s in models}
            | ({"outputs_2_or_more"} if all(s[-1] >= 2 for _, s in models) else set()))


COVERAGE = {
    "forward_matches_weights": Coverage(required={"tanh", "relu", "one_hidden", "two_hidden", "outputs_2_or_more"},
                                        labels=lambda rng: model_labels(draw_architectures(rng)[0]),
                                        test=ARCH_TEST),
}
REQUIRED = COVERAGE["forward_matches_weights"].required


@pytest.fixture(scope="module")
def archs(seed):
    models, batch = draw_architectures(check_rng(seed, ARCH_TEST))
    ensure("forward_matches_weights", REQUIRED, model_labels(models))
    return models, batch


def two_hidden(models):
    return next(sizes for _, sizes in models if len(sizes) == 4)


# --- Part A ------------------------------------------------------------------------------
def test_forward_matches_weights(submission, archs, rng):
    models, batch = archs
    for activation, sizes in models:
        seed = int(rng.integers(2**31 - 1))
        xs, _ = draw_data(rng, sizes, batch)
        out = submission.probe(PROBE + "forward", sizes, activation, seed, xs, int(rng.integers(2**31 - 1)))
        layers = ref.read_weights(out["weights"], sizes)
        got = expect_array(out["outputs"], shape=(xs.shape[0], sizes[-1]), dtype="float32",
                           what="predict(model, xs, key)")
        want = ref.forward(layers, activation, xs)
        if not np.allclose(got, want, rtol=1e-4, atol=1e-5):
            raise CheckFailed(
                f"predict does not compute the MLP from the model's own weights ({activation})",
                measured=f"largest difference {float(np.max(np.abs(got - want))):.3g}; sizes {sizes}",
                expected="act(W h + b) in every hidden layer, W h + b in the last",
                hint="the last layer takes no activation; eqx.nn.Linear computes weight @ x + bias",
                diagnosis=f"with the {activation} activation, predict's outputs differ from the MLP that the "
                          f"weights your `weights(model)` returned define",
                advice="hidden layers compute act(layer(h)), the last layer is linear (no activation); "
                       "`weights` must return each eqx.nn.Linear's own weight [out, in] and bias")
        if any(float(np.std(w)) == 0.0 for w, _ in layers):
            raise CheckFailed("a layer's weights are all equal: they were not drawn from the key",
                              measured=f"sizes {sizes}", expected="eqx.nn.Linear's random initialisation",
                              diagnosis="a layer's weight matrix holds one value repeated: it was not drawn "
                                        "from the model's key",
                              advice="build each layer with eqx.nn.Linear(in, out, key=k), one split key each")
        ref.judge_layer_keys(layers, f"make_model({sizes}, {activation!r}, ...)")
    activation, sizes = models[0]  # the same model shape and batch again: nothing new to compile
    xs, _ = draw_data(rng, sizes, batch)
    seeds = [int(s) for s in rng.choice(2**31 - 1, size=2, replace=False)]
    drawn = [ref.read_weights(submission.probe(PROBE + "forward", sizes, activation, s, xs, 0)["weights"], sizes)
             for s in seeds]
    if all(np.array_equal(a[0], b[0]) for a, b in zip(*drawn)):
        raise CheckFailed("two seeds gave the same weights", measured="identical weights for two seeds",
                          expected="different draws", hint="use the key the constructor receives",
                          diagnosis="make_model with two different seeds built identical weights: the key is "
                                    "not used", advice="split the `key` argument, one key per eqx.nn.Linear")


def test_activation_is_static(submission, archs, rng):
    sizes = archs[0][int(rng.integers(2))][1]
    rate = float(rng.uniform(0.1, 0.6))
    view = submission.probe(PROBE + "pytree_view", sizes, int(rng.integers(2**31 - 1)), rate)
    for activation in ref.ACTIVATIONS:
        leaves = view[activation]["leaves"]
        others = sorted({leaf["kind"] for leaf in leaves} - {"array", "float", "bool"})
        if others:
            raise CheckFailed(
                f"the model has leaves that are neither arrays nor Dropout's settings: {others}",
                measured="leaf types: " + ", ".join(leaf["kind"] for leaf in leaves),
                expected="arrays, plus eqx.nn.Dropout's own float p and bool inference",
                diagnosis="the model's pytree has a leaf that is neither an array nor one of eqx.nn.Dropout's "
                          "own settings (its float p and bool inference): configuration stored as a leaf",
                advice="declare configuration such as the activation as `eqx.field(static=True)`: it then "
                       "belongs to the treedef and is never a leaf")
        layers = ref.read_weights(view[activation]["weights"], sizes)
        arrays = sorted(tuple(leaf["shape"]) for leaf in leaves if leaf["kind"] == "array")
        expected = sorted(a.shape for layer in layers for a in layer)
        if arrays != expected:
            raise CheckFailed("the model's arrays are not exactly its weights and biases",
                              measured=str(arrays), expected=str(expected),
                              diagnosis="the arrays in the model's pytree are not exactly the weights and biases "
                                        "of its layers",
                              advice="keep the eqx.nn.Linear layers and the Dropout layer as the only fields "
                                     "besides static configuration")
    ref.judge_static_activation(view)
    if view["tanh"]["treedef"] == view["relu"]["treedef"]:
        raise CheckFailed("the activation is not part of the treedef", measured=view["tanh"]["treedef"],
                          expected="different treedefs for 'tanh' and 'relu'",
                          diagnosis="models built with two different activations have the same treedef: the "
                                    "activation is not a static field of the model",
                          advice="declare `activation: str = eqx.field(static=True)` and set it in __init__")


# --- Part B ------------------------------------------------------------------------------
def run_training(submission, rng, activation, sizes, steps, batch):
    batches = [dict(zip(("xs", "ys"), draw_data(rng, sizes, batch))) for _ in range(steps)]
    out = submission.probe(PROBE + "train_run", sizes, activation, int(rng.integers(2**31 - 1)), batches,
                           int(rng.integers(2**30)))
    return batches, out


def test_adam_steps_match(submission, archs, rng):
    models, batch = archs  # both activations, one and two hidden layers (see COVERAGE)
    ensure("adam_steps_match", REQUIRED, model_labels(models))
    for activation, sizes in models:
        batches, out = run_training(submission, rng, activation, sizes, 2, batch)
        w0 = ref.read_weights(out["initial"], sizes)
        w1 = ref.read_weights(out["after"][0], sizes, what="weights of the model train_step returned")
        w2 = ref.read_weights(out["after"][1], sizes, what="weights of the model train_step returned")
        xs, ys = batches[0]["xs"], batches[0]["ys"]
        loss = ref.as_float(out["losses"][0], "the loss train_step returned")
        want = ref.loss(w0, activation, xs, ys)
        if not np.isclose(loss, want, rtol=1e-4, atol=1e-6):
            raise CheckFailed(
                "the loss train_step returned is not the mean squared error before the step",
                measured=f"{loss:.6g}", expected=f"{want:.6g} ({activation}, sizes {sizes})",
                diagnosis="the loss train_step returned is not the mean of the squared errors (over every element "
                          "of the batch) of the model before the update; these steps use a model made with "
                          "dropout_rate 0, where no unit may be dropped (a Dropout built with 1 - rate drops them all)",
                advice="loss = jnp.mean((predictions - ys) ** 2), and return the loss that "
                       "eqx.filter_value_and_grad gives")
        problem, states = ref.step_mismatch(w0, w1, ref.grads(w0, activation, xs, ys), None)
        which = "first"
        if not problem:
            which = "second"
            problem, _ = ref.step_mismatch(w1, w2, ref.grads(w1, activation, batches[1]["xs"], batches[1]["ys"]),
                                           states)
        if problem:
            raise CheckFailed(
                f"the {which} train_step is not an Adam step on the mean squared error ({activation})",
                measured=problem, expected="m, v updated as optax.adam does; new = old - lr * m_hat / "
                                           "(sqrt(v_hat) + eps)",
                diagnosis=f"the {which} of two train_steps moved the weights differently from optax.adam "
                          f"(learning rate 1e-2) on the mean squared error",
                advice="updates, opt_state = OPTIMIZER.update(grads, opt_state, eqx.filter(model, eqx.is_array)); "
                       "model = eqx.apply_updates(model, updates); keep the optimizer state from step to step")


def test_grads_mirror_the_model(submission, archs, rng):
    models, batch = archs
    activation, sizes = models[int(rng.integers(2))]
    xs, ys = draw_data(rng, sizes, batch)
    view = submission.probe(PROBE + "grads_view", sizes, activation, int(rng.integers(2**31 - 1)), xs, ys)
    ref.judge_grads(view, sizes, activation, xs, ys)


def measured_training(submission, reference, rng, activation, sizes, steps, batch):
    """``steps`` train_steps of a fresh model, measured alone (``ex08_equinox:train_steps``),
    the model built by a request of its own; the reference solution runs the same two."""
    batches = [dict(zip(("xs", "ys"), draw_data(rng, sizes, batch))) for _ in range(steps)]
    prepared = probe_pair(submission, reference, PROBE + "prepare_training", "run", sizes, activation,
                          int(rng.integers(2**31 - 1)), batches, int(rng.integers(2**30)))
    out, compiles = probe_compiles(submission, reference, PROBE + "train_steps", "run")
    # one compile of a step whose work is elsewhere is not one; the structure is read from one trace
    # under the grader's jit, whose loss must be the measured calls' first
    ref.judge_step_program(prepared, (out.get("losses") or [None])[0])
    return compiles


def compile_failure(count, expected, what, compiles, diagnosis, advice):
    against = " (what the reference solution makes for the same steps)" if compiles.reference is not None else ""
    raise CheckFailed(f"{what}: {count} compilation(s), expected {expected}{against}", measured=explain(compiles),
                      expected=f"{expected} compilation(s)", diagnosis=diagnosis, advice=advice)


def test_compiles_once_per_architecture(submission, reference, archs, rng):
    """The compile counts need the learner's own calls of its own filter_jit-ed train_step (our
    jit would count our compile); the structure is read from one ``traced_run`` of train_step,
    tied to those calls by ``judge_step_program`` (train_step eqx.filter_jit's own, the traced
    loss the first call's)."""
    sizes = archs[0][int(rng.integers(2))][1]
    first, other = [str(a) for a in rng.permutation(ref.ACTIVATIONS)]
    runs = [(first, 5, (1, 1)), (first, 3, (0, 0)), (other, 2, (1, 1))]
    counts = []
    for activation, steps, (low, high) in runs:
        compiles = measured_training(submission, reference, rng, activation, sizes, steps, COMPILE_BATCH)
        low, high = budget(compiles, low, high)  # the reference's own count, which must be the expected one
        counts.append((compiles.counted, compiles, low, high))
    (n1, c1, _, h1), (n2, c2, _, h2), (n3, c3, l3, h3) = counts
    if n1 == 0:
        compile_failure(n1, 1, "5 train_steps", c1,
                        "5 train_steps compiled nothing: is train_step compiled with eqx.filter_jit?",
                        "decorate train_step with @eqx.filter_jit, at module level")
    if n1 > h1:
        compile_failure(n1, h1, "5 train_steps of one model", c1,
                        f"5 train_steps of one model compiled {n1} times: something changes from step to step "
                        f"that filter_jit treats as static, or a jitted function is made anew on each call",
                        "run 5 steps with JAX_LOG_COMPILES=1 and JAX_EXPLAIN_CACHE_MISSES=1; keep everything but "
                        "arrays the same from step to step, and build the jitted function once")
    if n2 > h2:
        compile_failure(n2, h2, "a fresh model of the same architecture", c2,
                        f"a new model with the same shapes and activation compiled {n2} more time(s): two such "
                        f"models do not look the same to filter_jit (static values are compared with ==)",
                        "keep in static fields only values that compare equal between two such models, e.g. "
                        "the activation's name; a lambda or object made per model never equals the last one")
    if not l3 <= n3 <= h3:
        compile_failure(n3, h3, "a model with the other activation", c3,
                        f"switching the activation compiled {n3} time(s) instead of exactly once",
                        "the activation belongs in a static field that the forward pass reads: one new program "
                        "per activation")


# --- Part C ------------------------------------------------------------------------------
DROPOUT_KEYS = 64  # training-mode losses read per grading, one mask each


@pytest.fixture(scope="module")
def dropout_run(submission, archs, seed):
    """The two-hidden-layer architecture with tanh (no unit is exactly 0, so every dropped unit
    changes the output) under three keys: at least 18 units, each kept or dropped with
    probability >= 0.3, so three keys draw identical masks with probability below 1e-7."""
    rng = check_rng(seed, "dropout_run")
    models, batch = archs
    activation, sizes = "tanh", two_hidden(models)
    rate = float(rng.uniform(0.3, 0.6))
    xs, ys = draw_data(rng, sizes, batch)
    keys = [int(k) for k in rng.choice(2**31 - 1, size=3, replace=False)]
    out = submission.probe(PROBE + "dropout_view", sizes, activation, rate, int(rng.integers(2**31 - 1)), xs, ys,
                           keys)
    return activation, sizes, xs, ys, out


def test_inference_mode_deterministic(dropout_run):
    activation, sizes, xs, _, out = dropout_run
    layers = ref.read_weights(out["weights"], sizes)
    first, *others = (expect_array(p, shape=(xs.shape[0], sizes[-1]), dtype="float32", what="predict(model, xs, key)")
                      for p in out["predictions"])
    if not all(np.array_equal(first, other) for other in others):
        spread = max(float(np.max(np.abs(first - other))) for other in others)
        raise CheckFailed("predict depends on the key: dropout is on in inference mode",
                          measured=f"largest difference between keys {spread:.3g}",
                          expected="identical outputs",
                          diagnosis="predict gave different outputs for different keys on a model with dropout: "
                                    "dropout is still active in inference mode",
                          advice="switch the model to inference mode first: model = eqx.nn.inference_mode(model)")
    want = ref.forward(layers, activation, xs)
    if not np.allclose(first, want, rtol=1e-4, atol=1e-5):
        raise CheckFailed("predict with dropout is not the plain MLP",
                          measured=f"largest difference {float(np.max(np.abs(first - want))):.3g}",
                          expected="the MLP with every Dropout passing its input through",
                          diagnosis="on a model with dropout, predict is deterministic but differs from the MLP "
                                    "without dropout: inference mode must leave activations untouched",
                          advice="eqx.nn.Dropout scales the kept units during training, so in inference mode it "
                                 "is the identity; use eqx.nn.inference_mode rather than your own scaling")


def test_training_mode_drops(submission, archs, rng):
    """Dropout itself, read off the losses: a model with one hidden layer (tanh: no unit is
    exactly 0 by itself), one example, DROPOUT_KEYS keys.  Each training-mode loss is that
    of one mask (units zeroed, the rest scaled by 1 / (1 - rate)), found by trying every
    mask; the share dropped must be the rate."""
    models, _ = archs
    sizes = next(s for _, s in models if len(s) == 3)
    # away from 0.5: a rate used as the KEEP probability drops 1 - rate, at least 0.4 off
    rate = float(rng.uniform(0.15, 0.3))
    x = rng.normal(size=(1, sizes[0])).astype(np.float32)
    y = rng.normal(size=(1, sizes[-1])).astype(np.float32)
    keys = [int(k) for k in rng.choice(2**31 - 1, size=DROPOUT_KEYS, replace=False)]
    seed = int(rng.integers(2**31 - 1))
    out = submission.probe(PROBE + "dropout_losses", sizes, "tanh", rate, seed, x, y, keys)
    layers = ref.read_weights(out["weights"], sizes)
    losses = [ref.as_float(v, "loss_fn(model, xs, ys, key)") for v in out["losses"]]
    ref.judge_dropout_masks(ref.dropout_masks(layers, "tanh", rate, x[0], y[0], losses), rate)
    # ... and the step trains in training mode: the loss it returns (the loss before its
    # update) under each key is that of a dropout mask too
    out = submission.probe(PROBE + "step_losses", sizes, "tanh", rate, seed, x, y, keys[:STEP_KEYS])
    losses = [ref.as_float(v, "the loss train_step returned") for v in out["losses"]]
    ref.judge_dropout_masks(ref.dropout_masks(layers, "tanh", rate, x[0], y[0], losses), rate, source="train_step")


STEP_KEYS = 32  # train_step calls read per grading (one compile, then one call per key)
PAIR_KEYS = 96  # losses read per grading for each pair of masks (two layers, two examples)


def judge_dropout_keys(submission, sizes, rate, seed, x, y, keys, between):
    """Training-mode losses of ``sizes`` (two hidden layers of one width, for "layers"; one
    hidden layer on two copies of ``x``, for "examples") under ``keys``: each is that of a
    pair of dropout masks, and the two masks are the same only as often as chance says."""
    out = submission.probe(PROBE + "dropout_losses", sizes, "tanh", rate, seed, x, y, keys)
    layers = ref.read_weights(out["weights"], sizes)
    losses = [ref.as_float(v, "loss_fn(model, xs, ys, key)") for v in out["losses"]]
    candidates = ref.pair_losses(layers, "tanh", rate, x[0], y[0], between)
    ref.judge_masks_differ(ref.mask_pairs(candidates, losses), rate, sizes[1], between)
    ref.judge_masks_independent(ref.mask_pair_ids(candidates, losses, between), rate, sizes[1], between, candidates)


def test_dropout_keys_independent(submission, archs, rng):
    """Each hidden layer's dropout and each example's draws a mask of its own: a two-hidden-
    layer model on one example, and a one-hidden-layer model on a batch of two copies of one
    example, each under PAIR_KEYS keys (tanh: no unit is exactly 0 by itself)."""
    models, _ = archs
    rate = float(rng.uniform(0.3, 0.6))
    for between in ("layers", "examples"):
        sizes = next(s for _, s in models if len(s) == (4 if between == "layers" else 3))
        x = rng.normal(size=(1, sizes[0])).astype(np.float32)
        y = rng.normal(size=(1, sizes[-1])).astype(np.float32)
        if between == "examples":
            x, y = np.repeat(x, 2, axis=0), np.repeat(y, 2, axis=0)
        keys = [int(k) for k in rng.choice(2**31 - 1, size=PAIR_KEYS, replace=False)]
        judge_dropout_keys(submission, sizes, rate, int(rng.integers(2**31 - 1)), x, y, keys, between)

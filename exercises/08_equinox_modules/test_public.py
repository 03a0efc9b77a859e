"""Public checks for exercise 8 (run by `grade exercise 8`; they carry no points).

Every model is built by your `make_model` inside the sandbox; what comes back is plain
data: your `weights(model)`, outputs, losses, and descriptions of pytrees.  The
references are computed here, in float64 NumPy, from the weights your model returned.
The hidden checks test the same properties on other architectures, data and seeds.
"""

import numpy as np

from grader.exercises.ex08_equinox import judges as ref
from grader.feedback import CheckFailed, expect_array, expect_close
from grader.testing import expect_compiles, probe_compiles, probe_pair

PROBE = "ex08_equinox:"
SIZES = [3, 5, 2]  # one architecture for every public check: building a new shape costs compiles
SHAPES = [(5, 3), (5,), (2, 5), (2,)]


def batch(seed, b, d_in, d_out):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(b, d_in)).astype(np.float32), rng.normal(size=(b, d_out)).astype(np.float32)


def test_forward_small(submission):
    xs, _ = batch(0, 4, 3, 2)
    out = submission.probe(PROBE + "forward", SIZES, "tanh", 0, xs, 1)
    layers = ref.read_weights(out["weights"], SIZES)
    got = expect_array(out["outputs"], shape=(4, 2), dtype="float32", what="predict(model, xs, key)")
    expect_close(got, ref.forward(layers, "tanh", xs).astype(np.float32), rtol=1e-4, atol=1e-5, reveal=True,
                 what="predict(make_model([3, 5, 2], 'tanh', 0.0, 0), xs, key)",
                 hint="hidden layers: h = act(layer(h)) with eqx.nn.Linear (weight @ x + bias); the last layer "
                      "has no activation; vmap the one-example model over the batch")
    ref.judge_layer_keys(layers, "make_model([3, 5, 2], 'tanh', 0.0, 0)")


def test_static_field_small(submission):
    view = submission.probe(PROBE + "pytree_view", SIZES, 0, 0.5)
    for activation in ("tanh", "relu"):
        leaves = view[activation]["leaves"]
        others = sorted({leaf["kind"] for leaf in leaves} - {"array", "float", "bool"})
        if others:
            raise CheckFailed(
                f"make_model([3, 5, 2], {activation!r}, 0.5, 0) has leaves that are neither arrays nor Dropout's "
                f"settings", measured="leaf types: " + ", ".join(leaf["kind"] for leaf in leaves),
                expected="arrays (weights and biases), plus eqx.nn.Dropout's own float `p` and bool `inference`",
                hint="declare `activation: str = eqx.field(static=True)`: a static field is part of the treedef, "
                     "not a leaf")
        arrays = [tuple(leaf["shape"]) for leaf in leaves if leaf["kind"] == "array"]
        if sorted(arrays) != sorted(SHAPES):
            raise CheckFailed("the model's arrays are not exactly its weights and biases", measured=str(arrays),
                              expected=f"{SHAPES} in some order",
                              hint="keep only the eqx.nn.Linear layers and the Dropout layer as fields")
    ref.judge_static_activation(view)
    if view["tanh"]["treedef"] == view["relu"]["treedef"]:
        raise CheckFailed("the models built with 'tanh' and with 'relu' have the same treedef",
                          measured=view["tanh"]["treedef"], expected="treedefs that differ in the activation",
                          hint="store the activation's name in a static field")


def test_grads_small(submission):
    """compute_grads on the [3, 5, 2] tanh model: the model's structure, and the gradient."""
    xs, ys = batch(5, 4, 3, 2)
    view = submission.probe(PROBE + "grads_view", SIZES, "tanh", 0, xs, ys)
    ref.judge_grads(view, SIZES, "tanh", xs, ys)


def measured_steps(submission, reference, activation, seed, batches, key_seed):
    """train_step alone over ``batches`` from a fresh model built by a request of its own."""
    prepared = probe_pair(submission, reference, PROBE + "prepare_training", "run", SIZES, activation, seed, batches,
                          key_seed)
    out, compiles = probe_compiles(submission, reference, PROBE + "train_steps", "run")
    ref.judge_step_program(prepared, (out.get("losses") or [None])[0])  # the step's work is in the program that compiles
    return compiles


def test_compiles_small(submission, reference):
    batches = [dict(zip(("xs", "ys"), batch(10 + t, 4, 3, 2))) for t in range(3)]
    expect_compiles(measured_steps(submission, reference, "tanh", 0, batches, 0), at_least=1, at_most=1,
                    what="3 train_steps with one architecture",
                    hint="decorate train_step with @eqx.filter_jit (once, at module level)")
    expect_compiles(measured_steps(submission, reference, "tanh", 1, batches[:2], 5), at_least=0, at_most=0,
                    what="train_steps of a fresh model with the same shapes and activation",
                    hint="filter_jit compares static fields with ==: keep the activation's name there, not a "
                         "function made per model")
    expect_compiles(measured_steps(submission, reference, "relu", 1, batches[:1], 5), at_least=1, at_most=1,
                    what="a train_step on the same shapes with another activation",
                    hint="the activation must be static: a new activation is a new program, compiled once")


def test_adam_step_small(submission):
    xs, ys = batch(1, 4, 3, 2)
    xs2, ys2 = batch(2, 4, 3, 2)
    out = submission.probe(PROBE + "train_run", SIZES, "relu", 3, [{"xs": xs, "ys": ys}, {"xs": xs2, "ys": ys2}], 0)
    before = ref.read_weights(out["initial"], SIZES)
    after = ref.read_weights(out["after"][0], SIZES, what="weights of the model train_step returned")
    loss = ref.as_float(out["losses"][0], "the loss train_step returned")
    want = ref.loss(before, "relu", xs, ys)
    if not np.isclose(loss, want, rtol=1e-4, atol=1e-6):
        raise CheckFailed("the loss train_step returned is not the mean squared error of the model before the step",
                          measured=f"{loss:.6g}", expected=f"{want:.6g}",
                          hint="loss = jnp.mean((predictions - ys) ** 2), every element of the batch counted once")
    problem, states = ref.step_mismatch(before, after, ref.grads(before, "relu", xs, ys), None)
    if problem:
        raise CheckFailed("the first train_step is not one Adam step (lr 1e-2) on the mean squared error",
                          measured=problem, expected="new = old - lr * m_hat / (sqrt(v_hat) + eps), per entry",
                          hint="updates, opt_state = OPTIMIZER.update(grads, opt_state, eqx.filter(model, "
                               "eqx.is_array)); model = eqx.apply_updates(model, updates) -- the minus sign is "
                               "already in the updates")
    # a second step, from the state the first returned: Adam's moments and step count carry over
    later = ref.read_weights(out["after"][1], SIZES, what="weights of the model the second train_step returned")
    problem, _ = ref.step_mismatch(after, later, ref.grads(after, "relu", xs2, ys2), states)
    if problem:
        raise CheckFailed("the second train_step is not Adam's second step (lr 1e-2) on the mean squared error",
                          measured=problem, expected="m and v carried over from the first step, bias correction at "
                                                     "step 2",
                          hint="return the new optimizer state that OPTIMIZER.update gives, and pass it to the "
                               "next call")


def test_inference_small(submission):
    xs, ys = batch(2, 4, 3, 2)
    out = submission.probe(PROBE + "dropout_view", SIZES, "tanh", 0.5, 0, xs, ys, [1, 2])
    layers = ref.read_weights(out["weights"], SIZES)
    first, second = (expect_array(p, shape=(4, 2), dtype="float32", what="predict(model, xs, key)")
                     for p in out["predictions"])
    if not np.array_equal(first, second):
        raise CheckFailed("predict gave different outputs for two keys: dropout is still on",
                          measured=f"largest difference {float(np.max(np.abs(first - second))):.3g}",
                          expected="identical outputs", hint="model = eqx.nn.inference_mode(model) before calling it")
    expect_close(first, ref.forward(layers, "tanh", xs).astype(np.float32), rtol=1e-4, atol=1e-5, reveal=True,
                 what="predict with dropout_rate 0.5",
                 hint="in inference mode Dropout passes its input through unchanged (no scaling)")


def test_dropout_small(submission):
    """Training mode, read off the losses: one hidden layer and one example, so each loss is
    the loss of one mask of kept hidden units (scaled by 1 / (1 - 0.25)); at a rate of 0.25, a rate used as the
    keep probability shows."""
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(1, 3)).astype(np.float32), rng.normal(size=(1, 2)).astype(np.float32)
    out = submission.probe(PROBE + "dropout_losses", SIZES, "tanh", 0.25, 0, x, y, list(range(100, 164)))
    layers = ref.read_weights(out["weights"], SIZES)
    losses = [ref.as_float(v, "loss_fn(model, xs, ys, key)") for v in out["losses"]]
    ref.judge_dropout_masks(ref.dropout_masks(layers, "tanh", 0.25, x[0], y[0], losses), 0.25)
    # train_step trains with dropout on: the loss it returns under each key is a mask's loss too
    out = submission.probe(PROBE + "step_losses", SIZES, "tanh", 0.25, 0, x, y, list(range(200, 232)))
    losses = [ref.as_float(v, "the loss train_step returned") for v in out["losses"]]
    ref.judge_dropout_masks(ref.dropout_masks(layers, "tanh", 0.25, x[0], y[0], losses), 0.25, source="train_step")


def test_dropout_keys_small(submission):
    """Each hidden layer's dropout, and each example's, gets a key of its own: on a
    [3, 5, 5, 2] model and one example, the two layers' masks; on the [3, 5, 2] model and two
    copies of one example, the two examples' masks -- each the same one, and each pair of
    masks again, only as often as chance says, over 32 keys."""
    rng = np.random.default_rng(4)
    x, y = rng.normal(size=(1, 3)).astype(np.float32), rng.normal(size=(1, 2)).astype(np.float32)
    for sizes, between, copies in (([3, 5, 5, 2], "layers", 1), (SIZES, "examples", 2)):
        xs, ys = np.repeat(x, copies, axis=0), np.repeat(y, copies, axis=0)
        out = submission.probe(PROBE + "dropout_losses", sizes, "tanh", 0.5, 0, xs, ys, list(range(300, 332)))
        layers = ref.read_weights(out["weights"], sizes)
        losses = [ref.as_float(v, "loss_fn(model, xs, ys, key)") for v in out["losses"]]
        candidates = ref.pair_losses(layers, "tanh", 0.5, x[0], y[0], between)
        ref.judge_masks_differ(ref.mask_pairs(candidates, losses), 0.5, sizes[1], between)
        ref.judge_masks_independent(ref.mask_pair_ids(candidates, losses, between), 0.5, sizes[1], between, candidates)

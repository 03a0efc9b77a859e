"""Hidden checks for exercise 7: models, data, Adam moments and hyperparameters drawn at grading time.

Truth is measured live: the grader's own optax chain runs in the clean worker
(``ex07_training:reference_*``), and the compiled program a report must describe is read by
the probe off the learner's own ``train_step.lower(...).compile()`` in the same process.
The loss and metric references are float64 NumPy (``grader.exercises.ex07_training.reference``).

Compiles are few: the step, the donation and the first report share one model shape (the
step check's, drawn first from its generator), the training run and the second report
another, so train_step compiles twice in all -- and the training run's shape is used by no
check before it, so its compile count starts from an empty cache.
"""

import numpy as np
import pytest

from grader.exercises.ex07_training.judges import (
    judge_compiles,
    judge_step_program,
    judge_donation,
    judge_per_example,
    judge_report,
    judge_step,
    judge_training,
    judge_metric_work,
    judge_update,
    metric_batches,
    training_run,
)
from grader.exercises.ex07_training.reference import (
    CLIP_NORM,
    HYPER,
    draw_blobs,
    draw_params,
    draw_sizes,
    draw_step_case,
    draw_update_cases,
    loss,
    same_shapes,
    tree_close,
)
from grader.coverage import Coverage, check_rng, ensure
from grader.feedback import CheckFailed, describe

STEP_BATCH, RUN_BATCH = 24, 40
RUN_STEPS, RUN_FACTOR = 20, 0.5


def step_labels(case):
    labels = {"moments_drawn"} if case["adam"]["count"] > 0 else set()
    if case["grad_norm"] >= 2 * CLIP_NORM:
        labels.add("clip_active")
    return labels


def init_sizes(rng):
    """A two-layer model: one key per layer, and a reused key, show in either layer; each layer's
    fan-in differs from its fan-out, so a scale taken from the wrong one shows too."""
    first = int(rng.integers(2, 9))
    hidden = int(rng.choice([h for h in range(4, 13) if h != first]))
    last = int(rng.choice([o for o in range(2, 6) if o != hidden]))
    return [first, hidden, last]


def init_labels(sizes):
    return {"fan_in_differs_from_fan_out"} if all(a != b for a, b in zip(sizes, sizes[1:])) else set()


COVERAGE = {
    "init_params_follows_recipe": Coverage(
        required={"fan_in_differs_from_fan_out"}, labels=lambda rng: init_labels(init_sizes(rng)),
        test="test_init_params_follows_recipe"),
    "optimizer_matches_optax": Coverage(
        required={"clip_active", "clip_inactive"},
        labels=lambda rng: [c["regime"] for c in draw_update_cases(rng)],
        test="test_optimizer_matches_optax"),
    "step_matches_optax": Coverage(
        required={"clip_active", "moments_drawn"},
        labels=lambda rng: step_labels(draw_step_case(rng, STEP_BATCH)),
        test="test_step_matches_optax"),
}


# --- part A: the model ---------------------------------------------------------------------------

def test_init_params_follows_recipe(submission, truth, rng):
    sizes = init_sizes(rng)
    ensure("init_params_follows_recipe", COVERAGE["init_params_follows_recipe"].required, init_labels(sizes))
    seed = int(rng.integers(0, 2**31 - 1))
    got = submission.probe("ex07_training:init_params_of", seed, sizes)
    want = truth.probe("ex07_training:reference_init", seed, sizes)
    ok, detail = tree_close(got, want, rtol=1e-6, atol=1e-7)
    if not ok:
        shapes_ok = same_shapes(got, want)
        advice = ("split the key once into one key per layer (jax.random.split(key, len(sizes) - 1)), draw "
                  "layer i's weights with keys[i] as a float32 normal of shape (sizes[i], sizes[i+1]) times "
                  "sqrt(2 / sizes[i]), and make every bias zeros")
        raise CheckFailed(
            "init_params does not follow the statement's recipe",
            measured=detail, expected="the recipe's arrays, exactly (rtol 1e-6)",
            hint=advice,
            diagnosis=("the parameters have the right structure and shapes but not the recipe's values"
                       if shapes_ok else "the parameters do not have the structure or shapes the statement gives"),
            advice=advice)


def test_loss_matches_reference(submission, rng):
    for batch in (1, int(rng.integers(5, 21))):
        sizes = draw_sizes(rng)
        params = draw_params(rng, sizes)
        x, y = draw_blobs(rng, batch, sizes[0], sizes[-1], spread=1.0)
        got = submission.probe("ex07_training:jitted_call", "loss_fn", [params, x, y])
        if isinstance(got, np.ndarray) and got.shape == () or type(got) is float:
            got = float(got)
        want = loss(params, x, y)
        if type(got) is not float or not np.isclose(got, want, rtol=1e-5, atol=1e-6):
            raise CheckFailed(
                "loss_fn differs from the mean softmax cross-entropy",
                measured=f"loss_fn returned {describe(got) if type(got) is not float else got}",
                expected=f"{want:.6g}", hint="mean over the batch of -log_softmax(forward(params, x))[y]",
                diagnosis=("loss_fn does not return a scalar" if type(got) is not float else
                           "loss_fn's value is not the batch mean of each example's cross-entropy"),
                advice="return jnp.mean(-log_softmax(logits)[label]) over the batch (optax."
                       "softmax_cross_entropy_with_integer_labels(logits, y).mean() does it), a 0-d array")


# --- part B: the optimizer ---------------------------------------------------------------------------

def test_optimizer_matches_optax(submission, truth, rng):
    cases = draw_update_cases(rng)
    ensure("optimizer_matches_optax", COVERAGE["optimizer_matches_optax"].required, [c["regime"] for c in cases])
    for case in cases:
        args = (case["hyper"], case["params"], case["grads"], case["adam"])
        got = submission.probe("ex07_training:optimizer_update", *args)
        want = truth.probe("ex07_training:reference_update", *args)
        judge_update(got, want, case["regime"])


# --- part C: the step: equal to optax, learning, compiled once, donating ---------------------------------

def test_step_matches_optax(submission, truth, rng):
    case = draw_step_case(rng, STEP_BATCH)
    ensure("step_matches_optax", COVERAGE["step_matches_optax"].required, step_labels(case))
    args = (case["params"], case["adam"], case["x"], case["y"])
    got = submission.probe("ex07_training:step_once", HYPER, *args)
    want = truth.probe("ex07_training:reference_step", HYPER, *args)
    judge_step(got, want, hidden=True)


_RUNS: dict = {}


def run_shape(seed):
    """(layer sizes, batch) of the training run: a batch size no other check uses."""
    rng = np.random.default_rng([int(seed), 7])
    return draw_sizes(rng), RUN_BATCH + int(rng.integers(0, 9)), rng


def shared_training_run(submission, reference, seed):
    """One training run on separable data, shared by the two checks that judge it."""
    key = (id(submission), seed)
    if key not in _RUNS:
        sizes, batch, rng = run_shape(seed)
        x, y = draw_blobs(rng, batch, sizes[0], sizes[-1])
        _RUNS[key] = training_run(submission, reference, HYPER, draw_params(rng, sizes, bias_scale=0.0), x, y,
                                  RUN_STEPS)
    return _RUNS[key]


def test_training_reduces_loss(submission, reference, seed):
    out, _ = shared_training_run(submission, reference, seed)
    judge_training(out["losses"], RUN_STEPS, RUN_FACTOR)


def test_one_compile_per_training_run(submission, reference, seed):
    """The compile count needs the learner's own calls of its own jitted train_step (our jit
    would count our compile), so it cannot come from the grader's trace; the structure is read
    from one ``traced_run`` of train_step, tied to those calls by ``judge_step_program``
    (train_step jax.jit's own, the traced loss the run's first)."""
    out, compiles = shared_training_run(submission, reference, seed)
    judge_compiles(compiles, RUN_STEPS)
    judge_step_program(out)  # one compile of a step whose work is elsewhere is not one


def step_sizes(seed):
    """The layer sizes of the step check (the first draw of its generator)."""
    return draw_sizes(check_rng(seed, "test_step_matches_optax"))


def test_donation_aliases_buffers(submission, rng, seed):
    sizes = step_sizes(seed)
    x, y = draw_blobs(rng, STEP_BATCH, sizes[0], sizes[-1])
    judge_donation(submission.probe("ex07_training:donation", HYPER, draw_params(rng, sizes), x, y))


# --- part D: the per-example metric ---------------------------------------------------------------------

@pytest.mark.parametrize("batch", [1, 32])
def test_per_example_matches_reference(submission, rng, batch):
    sizes = draw_sizes(rng)
    params = draw_params(rng, sizes)
    x, y = draw_blobs(rng, batch, sizes[0], sizes[-1], spread=1.0)
    judge_per_example(submission.probe("ex07_training:jitted_call", "per_example", [params, x, y]), params, x, y)


def test_metric_does_not_grow_with_batch(submission, truth, rng):
    sizes = draw_sizes(rng)
    params = draw_params(rng, sizes)
    got, want = {}, {}
    for batch in metric_batches(rng):
        x, y = draw_blobs(rng, batch, sizes[0], sizes[-1])
        got[batch] = submission.probe("ex07_training:metric_cost", params, x, y)
        want[batch] = truth.probe("ex07_training:reference_metric_cost", params, x, y)
    judge_metric_work(got, want, hidden=True)


# --- part E: the report --------------------------------------------------------------------------------

def test_report_matches_compiled_step(submission, rng, seed):
    # The step check's shape and the training run's: compiled already, so reading them is cheap;
    # two shapes, so a report kept from an earlier call is caught.
    for sizes, batch in ((step_sizes(seed), STEP_BATCH), run_shape(seed)[:2]):
        x, y = draw_blobs(rng, batch, sizes[0], sizes[-1])
        judge_report(submission.probe("ex07_training:report_and_truth", HYPER, draw_params(rng, sizes), x, y),
                     reveal=False)

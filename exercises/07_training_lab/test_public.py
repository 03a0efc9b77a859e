"""Public checks for exercise 7 (run by `grade exercise 7`; they carry no points).

Each uses fixed, small inputs (a NumPy generator with a fixed seed) and shows what it
measured.  `make_optimizer` is checked through `step_small` (the step uses it, with the
gradient's norm above CLIP_NORM).  The hidden checks test the same properties on models, data, optimizer states
and hyperparameters drawn at grading time.  The reference optimizer is optax itself,
run by the grader in a separate, clean JAX process (`truth`).
"""

import numpy as np

from grader.exercises.ex07_training.judges import (
    judge_compiles,
    judge_step_program,
    judge_donation,
    judge_metric_work,
    judge_per_example,
    judge_report,
    judge_step,
    judge_training,
    training_run,
)
from grader.exercises.ex07_training.reference import HYPER, draw_blobs, draw_params, draw_step_case, loss, tree_close
from grader.feedback import CheckFailed

SIZES = [4, 8, 3]  # 4 features, one hidden layer of 8, 3 classes
BATCH = 6


def fixed(seed):
    return np.random.default_rng(seed)


def test_init_and_loss_small(submission, truth):
    got = submission.probe("ex07_training:init_params_of", 0, SIZES)
    want = truth.probe("ex07_training:reference_init", 0, SIZES)
    ok, detail = tree_close(got, want, rtol=1e-6, atol=1e-7)
    if not ok:
        raise CheckFailed(
            "init_params(jax.random.key(0), [4, 8, 3]) does not follow the recipe", measured=detail,
            expected="[{'w': f32[4,8], 'b': f32[8]}, {'w': f32[8,3], 'b': f32[3]}] with the recipe's values",
            hint="keys = jax.random.split(key, len(sizes) - 1); layer i: w = jax.random.normal(keys[i], (n_in, n_out)) "
                 "* sqrt(2 / n_in), b = zeros(n_out)")
    params = draw_params(fixed(1), SIZES)
    x, y = draw_blobs(fixed(2), 5, 4, 3, spread=1.0)
    value = submission.probe("ex07_training:jitted_call", "loss_fn", [params, x, y])
    want_loss = loss(params, x, y)
    if not (isinstance(value, np.ndarray) and value.shape == ()) or not np.isclose(value, want_loss, rtol=1e-5):
        raise CheckFailed("loss_fn on a batch of 5 differs from the mean cross-entropy",
                          measured=f"{value!r}", expected=f"{want_loss:.6g} (a 0-d array)",
                          hint="mean over the batch of -log_softmax(forward(params, x))[y]")


def test_training_run_small(submission, reference):
    rng = fixed(5)
    x, y = draw_blobs(rng, BATCH, 4, 3)
    out, compiles = training_run(submission, reference, HYPER, draw_params(rng, SIZES, bias_scale=0.0), x, y, 20)
    judge_training(out["losses"], 20, 0.5)
    judge_compiles(compiles, 20)
    judge_step_program(out)


# The next checks use the training run's shapes: train_step is compiled once for all of them.

def test_step_small(submission, truth):
    case = draw_step_case(fixed(4), BATCH, sizes=SIZES)
    args = (case["params"], case["adam"], case["x"], case["y"])
    judge_step(submission.probe("ex07_training:step_once", HYPER, *args),
               truth.probe("ex07_training:reference_step", HYPER, *args), hidden=False)


def test_donation_small(submission):
    rng = fixed(6)
    x, y = draw_blobs(rng, BATCH, 4, 3)
    judge_donation(submission.probe("ex07_training:donation", HYPER, draw_params(rng, SIZES), x, y))


def test_per_example_small(submission):
    rng = fixed(7)
    params = draw_params(rng, SIZES)
    x, y = draw_blobs(rng, 6, 4, 3, spread=1.0)
    judge_per_example(submission.probe("ex07_training:jitted_call", "per_example", [params, x, y]), params, x, y, reveal=True)


def test_metric_work_small(submission, truth):
    rng = fixed(9)
    params = draw_params(rng, SIZES)
    got, want = {}, {}
    for batch in (2, 10, 30):
        x, y = draw_blobs(rng, batch, 4, 3)
        got[batch] = submission.probe("ex07_training:metric_cost", params, x, y)
        want[batch] = truth.probe("ex07_training:reference_metric_cost", params, x, y)
    judge_metric_work(got, want, hidden=False)


def test_report_small(submission):
    """report on the public checks' shape (train_step is compiled for it already), then on a
    batch of another size: a report kept from an earlier call differs there."""
    rng = fixed(8)
    for batch in (BATCH, BATCH // 2):
        x, y = draw_blobs(rng, batch, 4, 3)
        judge_report(submission.probe("ex07_training:report_and_truth", HYPER, draw_params(rng, SIZES), x, y),
                     reveal=True)

"""Hidden checks for exercise 12: depths, widths, batches, segment sizes, budgets and step
hyperparameters drawn at grading time.

Truth is measured live.  Residual bytes are what ``jax.vjp`` keeps on the installed JAX: the
grader's own segment checkpointing (``ex12_remat:reference_bytes``) and the plain loss's
gradient run in the clean worker; the learner's residual bytes are measured by the probe in
the learner's process.  The budget is drawn between two measured levels, so exactly one
segment size is the smallest that fits; the SGD-with-momentum reference is NumPy on the
clean worker's gradient.

The momentum step compiles twice: its value check and donation check share one shape
(the donation check's lower/compile hits the cache), and the compile-count check uses a
batch size no other check uses.
"""

import numpy as np

from grader.exercises.ex12_remat.judges import (
    answer_candidates,
    budget_for,
    draw_budget_target,
    draw_model,
    draw_segments,
    judge_choice,
    judge_donation,
    judge_gradients,
    judge_momentum_step,
    judge_remat_bytes,
    judge_residual_bytes,
    segment_labels,
)
from grader.coverage import Coverage, check_rng, ensure
from grader.testing import count_compiles, expect_compiles


def remat_case(rng):
    params, x, y = draw_model(rng)
    return params, x, y, draw_segments(rng, len(params))


def choice_case(rng):
    params, x, y = draw_model(rng)
    return params, x, y, draw_budget_target(rng, len(params))


def choice_labels(rng):
    params, _, _, (target, _) = choice_case(rng)
    return {"answer_between_1_and_depth"} if 1 < target < len(params) else set()


COVERAGE = {
    "remat_gradients_match": Coverage(
        required={"segment_1", "segment_whole", "segment_not_dividing"},
        labels=lambda rng: (lambda c: segment_labels(len(c[0]), c[3]))(remat_case(rng)),
        test="test_remat_gradients_match"),
    "remat_saves_like_segments": Coverage(
        required={"segment_1", "segment_whole", "segment_not_dividing"},
        labels=lambda rng: (lambda c: segment_labels(len(c[0]), c[3]))(remat_case(rng)),
        test="test_remat_saves_like_segments"),
    "choose_segment_meets_budget": Coverage(
        required={"answer_between_1_and_depth"},
        labels=choice_labels,
        test="test_choose_segment_meets_budget"),
}


# --- part A: measuring residuals ---------------------------------------------------------------------

def test_residual_bytes_matches_vjp(submission, rng):
    params, x, y = draw_model(rng)
    judge_residual_bytes(submission.probe("ex12_remat:residual_bytes_of", params, x, y))


# --- part B: segment checkpointing -----------------------------------------------------------------

def test_remat_gradients_match(submission, truth, rng):
    params, x, y, segments = remat_case(rng)
    ensure("remat_gradients_match", COVERAGE["remat_gradients_match"].required,
           segment_labels(len(params), segments))
    want = truth.probe("ex12_remat:reference_value_and_grad", params, x, y)
    for k in segments:
        got = submission.probe("ex12_remat:remat_value_and_grad", params, x, y, k)
        judge_gradients(got, want, k, len(params), hidden=True)


def test_remat_saves_like_segments(submission, truth, rng):
    params, x, y, segments = remat_case(rng)
    ensure("remat_saves_like_segments", COVERAGE["remat_saves_like_segments"].required,
           segment_labels(len(params), segments))
    want = truth.probe("ex12_remat:reference_bytes", params, x, y, segments)
    got = submission.probe("ex12_remat:remat_bytes", params, x, y, segments)
    judge_remat_bytes(got, want, segments, len(params), hidden=True)


# --- part C: the smallest segment that fits a budget ---------------------------------------------------

def test_choose_segment_meets_budget(submission, truth, rng):
    params, x, y, (target, where) = choice_case(rng)
    depth = len(params)
    ensure("choose_segment_meets_budget", COVERAGE["choose_segment_meets_budget"].required,
           {"answer_between_1_and_depth"} if 1 < target < depth else set())
    sizes = list(range(depth + 1))  # 0: no remat ("save everything"); depth: one segment ("save the least")
    measured = dict(zip(sizes, truth.probe("ex12_remat:reference_bytes", params, x, y, sizes)))
    # The live levels must have the shape the draw assumed: strictly fewer bytes at every candidate.
    levels_ok = all(measured[k] < measured[k - 1] for k in answer_candidates(depth)) and measured[depth] < measured[0]
    ensure("choose_segment_meets_budget", {"levels_strictly_decrease"}, {"levels_strictly_decrease"} if levels_ok else set())
    budget = budget_for(measured, target, where)
    got = submission.probe("ex12_remat:choice", params, x, y, budget)
    k = got["segment"]
    if type(k) is int and 1 <= k <= depth:
        # judged on what segment checkpointing at k really keeps (the grader's own levels), not on
        # the learner's remat_loss, which may checkpoint something else
        got = {**got, "bytes": measured[k], **({"bytes_before": measured[k - 1]} if k > 1 else {})}
    judge_choice(got, budget, depth, hidden=True)


# --- part D: SGD with momentum, donating --------------------------------------------------------------

def step_case(rng, batch=None):
    params, x, y = draw_model(rng, batch=batch)
    momentum = [{k: (v * rng.uniform(0.1, 1.0)).astype(np.float32) for k, v in layer.items()} for layer in params]
    return params, momentum, x, y, float(rng.uniform(0.01, 0.2)), float(rng.uniform(0.5, 0.95))


def test_momentum_step_matches(submission, truth, rng):
    params, momentum, x, y, lr, beta = step_case(rng)
    ref = truth.probe("ex12_remat:reference_value_and_grad", params, x, y)
    out = submission.call("train_step", params, momentum, x, y, lr, beta)
    judge_momentum_step(out, params, momentum, lr, beta, ref)


def test_momentum_step_donates(submission, rng, seed):
    # The value check's shapes (its generator's first draws), so the compile is shared.
    params, momentum, x, y, _, _ = step_case(check_rng(seed, "test_momentum_step_matches"))
    lr, beta = float(rng.uniform(0.01, 0.2)), float(rng.uniform(0.5, 0.95))
    judge_donation(submission.probe("ex12_remat:donation", params, momentum, x, y, lr, beta))


def test_momentum_step_compiles_once(submission, reference, rng):
    params, momentum, x, y, _, _ = step_case(rng, batch=int(rng.integers(26, 33)))  # a batch no other check uses
    calls = [{"args": [params, momentum, x, y, float(rng.uniform(0.01, 0.2)), float(rng.uniform(0.5, 0.95))]}
             for _ in range(4)]
    _, compiles = count_compiles(submission, reference, "train_step", calls)
    expect_compiles(compiles, at_least=1, at_most=1, what="train_step",
                    hint="keep lr and beta traced (not static): four steps with four learning rates should "
                         "compile once",
                    advice="keep lr and beta ordinary traced arguments (not in static_argnums/static_argnames): "
                           "a new learning rate must not compile a new program")

"""Hidden checks for exercise 12: depths, widths, batches, segment sizes, budgets and step
hyperparameters drawn at grading time.

Truth is measured live.  Residual bytes are what ``jax.vjp`` keeps on the installed JAX: the
grader's own segment checkpointing (``ex12_remat:reference_bytes``) and the plain loss's
gradient run in the clean worker; the learner's residual bytes are measured by the probe in
the learner's process.  The budget is drawn between two measured levels, so exactly one
segment size is the smallest that fits; the SGD-with-momentum reference is NumPy on the
clean worker's gradient.  Structure the numbers cannot show is read from jaxprs: the head
outside the checkpoints, and a step that differentiates ``remat_loss`` with JAX (no callback).

The momentum step compiles twice: its value check and donation check share one shape
(the donation check's lower/compile hits the cache), and the compile-count check uses a
batch size no other check uses.
"""

import numpy as np

from grader.exercises.ex12_remat.judges import (
    budget_for,
    budget_labels,
    draw_budgets,
    draw_model,
    draw_segments,
    judge_choices,
    judge_donation,
    judge_gradients,
    judge_head_outside,
    judge_momentum_step,
    judge_remat_bytes,
    judge_residual_bytes,
    judge_segments_kept,
    judge_step_structure,
    segment_labels,
)
from grader.coverage import Coverage, check_rng, ensure
from grader.testing import count_compiles, expect_compiles


def remat_case(rng):
    params, x, y = draw_model(rng)
    return params, x, y, draw_segments(rng, len(params))


def choice_case(rng):
    # depth 5 to 7: depth 4 has no gap one activation wide below the depth (4, 2, 2, 1 segments)
    params, x, y = draw_model(rng, depth=int(rng.integers(5, 8)))
    return params, x, y, draw_budgets(rng, len(params))


def choice_labels(rng):
    params, _, _, budgets = choice_case(rng)
    return budget_labels(len(params), budgets)


#: What choose_segment is judged on at every seed: the three kinds of answer, a budget exactly at
#: a level (at most, not less than), and a gap of one activation (an estimate off by one misses).
CHOICE_CATEGORIES = {"answer_1", "answer_between_1_and_depth", "answer_depth", "budget_at_a_level",
                     "gap_of_one_activation"}


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
        required=CHOICE_CATEGORIES,
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
    for k, got in zip(segments, submission.probe("ex12_remat:remat_traced", params, x, y, segments)):
        judge_gradients(got, want, k, len(params), hidden=True)


def test_remat_saves_like_segments(submission, truth, rng):
    params, x, y, segments = remat_case(rng)
    ensure("remat_saves_like_segments", COVERAGE["remat_saves_like_segments"].required,
           segment_labels(len(params), segments))
    want = truth.probe("ex12_remat:reference_bytes", params, x, y, segments)
    got = submission.probe("ex12_remat:remat_traced", params, x, y, segments)  # one program per size
    judge_remat_bytes([g["bytes"] for g in got], want, segments, len(params), hidden=True)
    # The head inside the last segment keeps y instead of h - y: the same bytes, so read the jaxpr
    # -- of the very program whose bytes were just judged.
    judge_head_outside([g["head_inside"] for g in got], segments, len(params))
    # Segments of [1, 1, 4] blocks keep as many bytes as [2, 2, 2]: which blocks' inputs the
    # residuals hold says where the segments begin.
    judge_segments_kept([g["residuals"] for g in got], params, x, segments, len(params))


# --- part C: the smallest segment that fits a budget ---------------------------------------------------

def test_choose_segment_meets_budget(submission, truth, rng):
    params, x, y, budgets = choice_case(rng)
    depth = len(params)
    ensure("choose_segment_meets_budget", CHOICE_CATEGORIES, budget_labels(depth, budgets))
    sizes = list(range(depth + 1))  # 0: no remat ("save everything"); depth: one segment ("save the least")
    measured = dict(zip(sizes, truth.probe("ex12_remat:reference_bytes", params, x, y, sizes)))
    # The live levels must have the shape the draw assumed: strictly fewer bytes at every answer.
    levels_ok = all(measured[k] < measured[k - 1] for k, _ in budgets)
    ensure("choose_segment_meets_budget", {"levels_strictly_decrease"}, {"levels_strictly_decrease"} if levels_ok else set())
    amounts = [budget_for(measured, target, where) for target, where in budgets]
    answers = submission.probe("ex12_remat:choices", params, x, y, amounts)
    # judged on what segment checkpointing at each answer really keeps (the grader's own levels),
    # not on the learner's remat_loss, which may checkpoint something else
    judge_choices(answers, amounts, measured, depth, hidden=True)


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


def test_momentum_step_traced(submission, truth, rng, seed):
    # The value check's inputs (its generator's first draws): the structure is read from one trace
    # under the grader's jit, whose own outputs must be the step the value check accepts.
    params, momentum, x, y, lr, beta = step_case(check_rng(seed, "test_momentum_step_matches"))
    ref = truth.probe("ex12_remat:reference_value_and_grad", params, x, y)
    judge_step_structure(submission.probe("ex12_remat:step_primitives", params, momentum, x, y, lr, beta),
                         params, momentum, lr, beta, ref)


def test_momentum_step_donates(submission, rng, seed):
    # The value check's shapes (its generator's first draws), so the compile is shared.
    params, momentum, x, y, _, _ = step_case(check_rng(seed, "test_momentum_step_matches"))
    lr, beta = float(rng.uniform(0.01, 0.2)), float(rng.uniform(0.5, 0.95))
    judge_donation(submission.probe("ex12_remat:donation", params, momentum, x, y, lr, beta))


def test_momentum_step_compiles_once(submission, reference, rng):
    """The compile count needs the learner's own calls of its own jitted train_step (our jit
    would count our compile); it scores only once ``momentum_step_traced`` passes, whose
    structure comes from one ``traced_run`` tied to these calls (train_step jax.jit's own)."""
    params, momentum, x, y, _, _ = step_case(rng, batch=int(rng.integers(26, 33)))  # a batch no other check uses
    calls = [{"args": [params, momentum, x, y, float(rng.uniform(0.01, 0.2)), float(rng.uniform(0.5, 0.95))]}
             for _ in range(4)]
    _, compiles = count_compiles(submission, reference, "train_step", calls)
    expect_compiles(compiles, at_least=1, at_most=1, what="train_step",
                    hint="keep lr and beta traced (not static): four steps with four learning rates should "
                         "compile once",
                    advice="keep lr and beta ordinary traced arguments (not in static_argnums/static_argnames): "
                           "a new learning rate must not compile a new program")

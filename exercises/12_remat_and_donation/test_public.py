"""Public checks for exercise 12 (run by `grade exercise 12`; they carry no points).

They use one fixed model: 5 blocks of width 8, a batch of 4 (a NumPy generator with a fixed
seed).  The hidden checks test the same properties on depths, widths, batches, segment
sizes, budgets and step hyperparameters drawn at grading time.  Residual bytes are measured
live, on the installed JAX: the grader's own segment checkpointing runs in a separate,
clean JAX process (`truth`).
"""

import numpy as np

from grader.exercises.ex12_remat.judges import (
    budget_for,
    draw_model,
    judge_choices,
    judge_donation,
    judge_gradients,
    judge_head_outside,
    judge_momentum_step,
    judge_remat_bytes,
    judge_residual_bytes,
    judge_segments_kept,
    judge_step_structure,
)
from grader.testing import count_compiles, expect_compiles

DEPTH, WIDTH, BATCH = 5, 8, 4


def model():
    return draw_model(np.random.default_rng(0), depth=DEPTH, width=WIDTH, batch=BATCH)


def test_residual_bytes_small(submission):
    judge_residual_bytes(submission.probe("ex12_remat:residual_bytes_of", *model()))


def test_remat_small(submission, truth):
    params, x, y = model()
    segments = [1, 2, 5]  # 2 leaves a last segment of one block
    want = truth.probe("ex12_remat:reference_value_and_grad", params, x, y)
    got = submission.probe("ex12_remat:remat_traced", params, x, y, segments)  # one program per size
    for k, g in zip(segments, got):
        judge_gradients(g, want, k, DEPTH, hidden=False)
    judge_remat_bytes([g["bytes"] for g in got], truth.probe("ex12_remat:reference_bytes", params, x, y, segments),
                      segments, DEPTH, hidden=False)
    judge_head_outside([g["head_inside"] for g in got], segments, DEPTH)
    judge_segments_kept([g["residuals"] for g in got], params, x, segments, DEPTH)  # where segments begin


def test_choose_segment_small(submission, truth):
    params, x, y = model()
    measured = dict(zip(range(DEPTH + 1), truth.probe("ex12_remat:reference_bytes", params, x, y,
                                                       list(range(DEPTH + 1)))))
    # Segment sizes 1..5 make 5, 3, 2, 2 and 1 segments.  Halfway between what sizes 2 and 1 keep: 2;
    # halfway between sizes 3 and 2, one activation apart (an estimate one activation off misses it): 3;
    # exactly what size 3 keeps ("at most", not "less than"): 3.
    budgets = [budget_for(measured, 2, 0.5), budget_for(measured, 3, 0.5), measured[3]]
    judge_choices(submission.probe("ex12_remat:choices", params, x, y, budgets), budgets, measured, DEPTH,
                  hidden=False)


def test_momentum_step_small(submission, reference, truth):
    params, x, y = model()
    momentum = [{k: (v * 0.5).astype(np.float32) for k, v in layer.items()} for layer in params]
    lr, beta = 0.1, 0.9
    ref = truth.probe("ex12_remat:reference_value_and_grad", params, x, y)
    judge_momentum_step(submission.call("train_step", params, momentum, x, y, lr, beta), params, momentum, lr, beta,
                        ref)
    judge_step_structure(submission.probe("ex12_remat:step_primitives", params, momentum, x, y, lr, beta),
                         params, momentum, lr, beta, ref)  # one trace: structure and values
    judge_donation(submission.probe("ex12_remat:donation", params, momentum, x, y, 0.05, 0.8))
    x3 = np.random.default_rng(1).normal(size=(3, WIDTH)).astype(np.float32)  # a new batch size: a fresh compile
    calls = [{"args": [params, momentum, x3, x3, lr_i, 0.9]} for lr_i in (0.1, 0.05, 0.02, 0.01)]
    _, compiles = count_compiles(submission, reference, "train_step", calls)
    expect_compiles(compiles, at_least=1, at_most=1, what="train_step (four steps, four learning rates)",
                    hint="keep lr and beta traced, not static")

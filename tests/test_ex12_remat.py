"""Exercise 12's budget draw, against the live JAX: the residual bytes of segment
checkpointing fall exactly where the draw assumes (one level per segment count), so a drawn
budget singles out one answer."""

import jax
import numpy as np

from grader.exercises.ex12_remat.judges import answer_candidates, budget_for, draw_model, segment_counts
from grader.exercises.ex12_remat import probes as probe
from grader.sandbox.context import to_jax


def _levels(depth, width=8, batch=4):
    params, x, y = to_jax(list(draw_model(np.random.default_rng(depth), depth=depth, width=width, batch=batch)))
    with jax.numpy_rank_promotion("allow"):
        return {k: probe.measure(lambda p, a, b: probe._segmented_loss(p, a, b, k), params, x, y)
                for k in range(depth + 1)}


def test_segment_levels_follow_the_segment_count():
    for depth in (4, 5, 7):
        levels = _levels(depth)
        counts = segment_counts(depth)
        assert levels[depth] < levels[1] < levels[0]  # whole < per block < no remat
        for k in range(2, depth + 1):
            if counts[k] == counts[k - 1]:
                assert levels[k] == levels[k - 1]
            else:
                assert levels[k] < levels[k - 1]
        for target in answer_candidates(depth):
            budget = budget_for(levels, target, 0.5)
            fits = [k for k in range(1, depth + 1) if levels[k] <= budget]
            assert fits[0] == target < depth

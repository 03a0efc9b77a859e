"""Exercise 19's judges: the batched kernel, host callbacks, and batches that hold the hard cases."""

import numpy as np
import pytest

from grader.exercises.ex19_pallas import judges
from grader.feedback import CheckFailed


def _batched(grid, blocks, host=None):
    return {"calls": [{"grid": grid, "blocks": blocks, "num_inputs": 2, "num_outputs": 1, "interpret": True}],
            "outside": {"jit": 1}, "host_callbacks": host or {}}


def test_the_batched_kernel_is_one_pallas_call_and_its_layout_is_judged_once():
    """Under jax.vmap the numbers must come from one pallas_call with no arithmetic outside it; the grid's
    order and the blocks are the layout check's alone (a layout mistake costs that check, not composes too)."""
    want = judges.expected_matmul_kernel((8, 12), (12, 6), (4, 3, 4))  # grid [2, 2, 3]
    judges.judge_batched_kernel(_batched([5, 2, 2, 3], [[None, 4, 4], [4, 3], [None, 4, 3]]), want, 5, "f",
                                judges.MATMUL_ASKED)
    judges.judge_batched_kernel(_batched([5, 3, 2, 2], [[None, 4, 4], [4, 3], [None, 4, 3]]), want, 5, "f",
                                judges.MATMUL_ASKED)  # the reduction axis first: the layout check's mistake
    judges.judge_batched_kernel(_batched([5, 1, 1, 1], [[None, 8, 12], [12, 6], [None, 8, 6]]), want, 5, "f",
                                judges.MATMUL_ASKED)  # one whole block: the layout check's mistake too
    with pytest.raises(CheckFailed):
        judges.judge_kernel(_batched([3, 2, 2], [[4, 4], [4, 3], [4, 3]]), want, "f", judges.MATMUL_ASKED)
    with pytest.raises(CheckFailed, match="0 Pallas kernels"):  # plain jnp under vmap
        judges.judge_batched_kernel({"calls": [], "outside": {"dot_general": 1}}, want, 5, "f", judges.MATMUL_ASKED)
    with pytest.raises(CheckFailed, match="computes outside its kernel"):  # the ReLU outside the kernel
        judges.judge_batched_kernel(dict(_batched([5, 2, 2, 3], [[None, 4, 4], [4, 3], [None, 4, 3]]),
                                         outside={"jit": 1, "max": 1}), want, 5, "f", judges.MATMUL_ASKED)


def test_numbers_and_kernels_from_a_host_callback_are_refused():
    x = np.ones((4, 3), np.float32)
    with pytest.raises(CheckFailed, match="host callback"):
        judges.judge_softmax({"value": np.full((4, 3), 1 / 3, np.float32), "host_callbacks": {"pure_callback": 1}},
                             x, 2)
    judges.judge_softmax({"value": np.full((4, 3), 1 / 3, np.float32), "host_callbacks": {}}, x, 2)
    want = judges.expected_softmax_kernel((4, 3), 2)
    facts = _batched([2], [[2, 3], [2, 3]], {"pure_callback": 1})
    facts["calls"][0]["num_inputs"] = 1
    with pytest.raises(CheckFailed, match="calls back to the host"):
        judges.judge_kernel(facts, want, "softmax_rows", judges.SOFTMAX_ASKED)


@pytest.mark.parametrize("seed", range(20))
def test_composition_batches_hold_the_hard_cases(seed):
    xs, block_rows = judges.draw_softmax_batch(np.random.default_rng(seed))
    for m in xs:  # every matrix of the batch, not only one
        assert {"overflow_row", "underflow_row", "row_below_its_block"} <= judges.softmax_labels(m, block_rows)
    xs, w, blocks = judges.draw_matmul_batch(np.random.default_rng(seed))
    assert {"several_k_steps", "partial_sums_cross_zero"} <= judges.matmul_batch_labels(xs, w, blocks)

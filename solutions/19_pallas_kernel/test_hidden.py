"""Hidden checks for exercise 19: shapes, block sizes and values drawn at grading time.

Every draw holds each case its check claims (``COVERAGE``; ``ensure`` checks it on every draw):
for the softmax, rows of large positive logits (exp overflows), of large negative ones (exp
underflows to 0), ordinary rows sharing a block with a row of far larger logits, and several
blocks; for the matmul, several k steps, a grid whose three axes have distinct sizes, three
distinct block sizes, outputs the ReLU clips, and a partial sum over k that changes sign.
The composition checks draw batches that hold the same hard cases (every kind of row in each
softmax matrix; several k steps and a partial sum that changes sign for the matmul), and ask that
the batched numbers come from one pallas_call with no arithmetic outside it; the grid's order and
the block shapes are judged once, by the layout checks.  References are NumPy, in float64.

Every number judged here is computed by the program whose jaxpr is judged: the probes trace the
learner's function once under our ``jax.jit`` and run that trace's compiled program
(``grader.probes.generic.traced_run``), so a function that answers concrete calls with NumPy
and shows tracers a kernel for show is judged on the kernel's numbers.

The kernel checks trace the learner's function on the inputs of the value checks beside them
(the same generator), so what they judge is the program whose numbers were right.
"""

from grader.coverage import Coverage, check_rng, ensure
from grader.exercises.ex19_pallas.judges import (
    MATMUL_ASKED,
    SOFTMAX_ASKED,
    draw_matmul_batch,
    draw_matmul_case,
    draw_softmax_batch,
    draw_softmax_case,
    expected_matmul_kernel,
    expected_softmax_kernel,
    judge_batched_kernel,
    judge_kernel,
    judge_matmul_relu,
    judge_softmax,
    matmul_batch_labels,
    matmul_labels,
    softmax_batch_labels,
    softmax_labels,
)

SOFTMAX_CASES = {"overflow_row", "underflow_row", "row_below_its_block", "several_blocks", "wide_row"}
MATMUL_CASES = {"several_k_steps", "grid_axes_distinct", "block_sizes_distinct", "relu_clips",
                "partial_sums_cross_zero"}
SOFTMAX_BATCH_CASES = SOFTMAX_CASES
MATMUL_BATCH_CASES = {"several_k_steps", "relu_clips", "partial_sums_cross_zero"}


def _softmax_labels(rng):
    return softmax_labels(*draw_softmax_case(rng))


def _matmul_labels(rng):
    return matmul_labels(*draw_matmul_case(rng))


def _softmax_batch_labels(rng):
    return softmax_batch_labels(*draw_softmax_batch(rng))


def _matmul_batch_labels(rng):
    return matmul_batch_labels(*draw_matmul_batch(rng))


COVERAGE = {
    "softmax_matches": Coverage(required=SOFTMAX_CASES, labels=_softmax_labels, test="test_softmax_matches"),
    "matmul_relu_matches": Coverage(required=MATMUL_CASES, labels=_matmul_labels, test="test_matmul_relu_matches"),
    "softmax_composes": Coverage(required=SOFTMAX_BATCH_CASES, labels=_softmax_batch_labels,
                                 test="test_softmax_composes"),
    "matmul_relu_composes": Coverage(required=MATMUL_BATCH_CASES, labels=_matmul_batch_labels,
                                     test="test_matmul_relu_composes"),
}


# --- part A: a row-wise softmax ---------------------------------------------------------------------

def test_softmax_matches(submission, rng):
    x, block_rows = draw_softmax_case(rng)
    ensure("softmax_matches", SOFTMAX_CASES, softmax_labels(x, block_rows))
    judge_softmax(submission.probe("ex19_pallas:values", "softmax_rows", [x], [block_rows]), x, block_rows)


def test_softmax_kernel_layout(submission, seed):
    x, block_rows = draw_softmax_case(check_rng(seed, "test_softmax_matches"))  # covered there
    ensure("softmax_kernel_layout", {"several_blocks"}, softmax_labels(x, block_rows))
    facts = submission.probe("ex19_pallas:structure", "softmax_rows", [x], [block_rows])
    judge_kernel(facts, expected_softmax_kernel(x.shape, block_rows), "softmax_rows", SOFTMAX_ASKED)


def test_softmax_composes(submission, rng):
    xs, block_rows = draw_softmax_batch(rng)
    ensure("softmax_composes", SOFTMAX_BATCH_CASES, softmax_batch_labels(xs, block_rows))
    got = submission.probe("ex19_pallas:composed", "softmax_rows", [xs], [block_rows])
    what = "jax.jit(jax.vmap(softmax_rows))"
    judge_softmax(got, xs, block_rows, what=what)
    judge_batched_kernel(got["kernel"], expected_softmax_kernel(xs.shape[1:], block_rows), len(xs), what,
                         SOFTMAX_ASKED)


# --- part B: a tiled matmul + ReLU ------------------------------------------------------------------

def test_matmul_relu_matches(submission, rng):
    x, w, blocks = draw_matmul_case(rng)
    ensure("matmul_relu_matches", MATMUL_CASES, matmul_labels(x, w, blocks))
    judge_matmul_relu(submission.probe("ex19_pallas:values", "matmul_relu", [x, w], list(blocks)), x, w, blocks)


def test_matmul_relu_kernel_layout(submission, seed):
    x, w, blocks = draw_matmul_case(check_rng(seed, "test_matmul_relu_matches"))  # covered there
    ensure("matmul_relu_kernel_layout", {"grid_axes_distinct", "block_sizes_distinct", "several_k_steps"},
           matmul_labels(x, w, blocks))
    facts = submission.probe("ex19_pallas:structure", "matmul_relu", [x, w], list(blocks))
    judge_kernel(facts, expected_matmul_kernel(x.shape, w.shape, blocks), "matmul_relu", MATMUL_ASKED)


def test_matmul_relu_composes(submission, rng):
    xs, w, blocks = draw_matmul_batch(rng)
    ensure("matmul_relu_composes", MATMUL_BATCH_CASES, matmul_batch_labels(xs, w, blocks))
    got = submission.probe("ex19_pallas:composed", "matmul_relu", [xs, w], list(blocks))
    what = "jax.jit(jax.vmap(matmul_relu))"  # over a batch of x, one w shared
    judge_matmul_relu(got, xs, w, blocks, what=what)
    judge_batched_kernel(got["kernel"], expected_matmul_kernel(xs.shape[1:], w.shape, blocks), len(xs), what,
                         MATMUL_ASKED)

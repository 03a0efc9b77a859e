"""Public checks for exercise 19 (run by `grade exercise 19`; they carry no points).

Fixed, readable inputs: for the softmax, eight rows of five logits in blocks of two rows (an
ordinary row beside a row of logits near +1000, a row near -1000, a row with one logit far above
the rest); for the matmul, x (16, 48)
and w (48, 48) made of sines, in blocks bm=8, bn=12, bk=16 (a grid of 2 x 4 x 3).  Each check
asks for the values, then the kernel's grid and blocks, then the function under jax.jit and
jax.vmap (the values again, from one pallas_call with no arithmetic outside it).  Values and kernel come from one trace of your function under
the grader's jax.jit: the numbers judged are those of the program whose grid and blocks are
judged.  The hidden checks test the same properties on shapes, block sizes and values drawn at
grading time.
"""

import numpy as np

from grader.exercises.ex19_pallas.judges import (
    MATMUL_ASKED,
    SOFTMAX_ASKED,
    expected_matmul_kernel,
    expected_softmax_kernel,
    judge_batched_kernel,
    judge_kernel,
    judge_matmul_relu,
    judge_softmax,
)

LOGITS = np.float32([
    [1.0, 2.0, 3.0, 4.0, 5.0],                  # ordinary, in the same block as ...
    [1000.0, 999.0, 998.0, 997.0, 1001.0],      # ... logits near +1000: exp overflows without the row's maximum
    [-1000.0, -1001.0, -999.0, -1002.0, -1000.0],  # near -1000: exp underflows to 0 without it
    [0.0, 200.0, 0.0, 0.0, 0.0],                # one logit far above the others: its mean subtracted still overflows
    [3.0, 3.0, 3.0, 3.0, 3.0],
    [-1.0, 0.0, 1.0, 0.0, -1.0],
    [10.0, 0.0, -10.0, 5.0, -5.0],
    [0.25, 0.5, 0.75, 1.0, 1.25],
])
BLOCK_ROWS = 2  # grid (4,), blocks (2, 5)

X = np.sin(np.arange(16 * 48, dtype=np.float64).reshape(16, 48) * 0.37).astype(np.float32)
W = np.cos(np.arange(48 * 48, dtype=np.float64).reshape(48, 48) * 0.11).astype(np.float32)
BLOCKS = (8, 12, 16)  # bm, bn, bk: grid (16 // 8, 48 // 12, 48 // 16) = (2, 4, 3)


def test_softmax_small(submission):
    judge_softmax(submission.probe("ex19_pallas:values", "softmax_rows", [LOGITS], [BLOCK_ROWS]), LOGITS, BLOCK_ROWS)
    facts = submission.probe("ex19_pallas:structure", "softmax_rows", [LOGITS], [BLOCK_ROWS])
    judge_kernel(facts, expected_softmax_kernel(LOGITS.shape, BLOCK_ROWS), "softmax_rows", SOFTMAX_ASKED)
    batch = np.stack([LOGITS[:4], LOGITS[4:]])  # two (4, 5) matrices; the first holds the +-1000 rows
    got = submission.probe("ex19_pallas:composed", "softmax_rows", [batch], [BLOCK_ROWS])
    what = "jax.jit(jax.vmap(softmax_rows))"
    judge_softmax(got, batch, BLOCK_ROWS, what=what)
    judge_batched_kernel(got["kernel"], expected_softmax_kernel(batch.shape[1:], BLOCK_ROWS), len(batch), what,
                         SOFTMAX_ASKED)


def test_matmul_relu_small(submission):
    judge_matmul_relu(submission.probe("ex19_pallas:values", "matmul_relu", [X, W], list(BLOCKS)), X, W, BLOCKS)
    facts = submission.probe("ex19_pallas:structure", "matmul_relu", [X, W], list(BLOCKS))
    judge_kernel(facts, expected_matmul_kernel(X.shape, W.shape, BLOCKS), "matmul_relu", MATMUL_ASKED)
    batch = np.stack([X[:8], -X[8:]])  # two (8, 48) matrices sharing W, 3 k steps
    got = submission.probe("ex19_pallas:composed", "matmul_relu", [batch, W], list(BLOCKS))
    what = "jax.jit(jax.vmap(matmul_relu))"  # over a batch of x, one w shared
    judge_matmul_relu(got, batch, W, BLOCKS, what=what)
    judge_batched_kernel(got["kernel"], expected_matmul_kernel(batch.shape[1:], W.shape, BLOCKS), len(batch), what,
                         MATMUL_ASKED)

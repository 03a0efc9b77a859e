"""Exercise 19: a Pallas kernel, in interpret mode.

Read README.md in this folder first.  Fill in every TODO; keep the names and signatures.
Check your work with:  grade exercise 19
"""

import functools  # noqa: F401

import jax
import jax.numpy as jnp  # noqa: F401
from jax.experimental import pallas as pl  # noqa: F401


# --- Part A -----------------------------------------------------------------------------------------

def softmax_kernel(x_ref, o_ref):
    """One block of whole rows: write each row's softmax into o_ref, the row's own maximum
    subtracted before exp.

    TODO
    """
    raise NotImplementedError("TODO: softmax_kernel")


def softmax_rows(x, block_rows):
    """The softmax of every row of a float32 (R, C) matrix x, R a multiple of block_rows: one
    pl.pallas_call(..., interpret=True) with grid (R // block_rows,) and BlockSpecs of shape
    (block_rows, C) for the input and the output.  block_rows is a Python int.

    TODO
    """
    raise NotImplementedError("TODO: softmax_rows")


# --- Part B -----------------------------------------------------------------------------------------

def matmul_relu_kernel(x_ref, w_ref, o_ref):
    """Grid step (i, j, k): zero the output block at the first k step, add x block (i, k) @ w block
    (k, j) to it at every step, apply the ReLU after the last.

    TODO
    """
    raise NotImplementedError("TODO: matmul_relu_kernel")


def matmul_relu(x, w, bm, bn, bk):
    """relu(x @ w) for float32 x (M, K) and w (K, N), each a multiple of its block: one
    pl.pallas_call(..., interpret=True) with grid (M // bm, N // bn, K // bk) and BlockSpecs of
    shape (bm, bk) for x, (bk, bn) for w and (bm, bn) for the output.  bm, bn and bk are Python
    ints.

    TODO
    """
    raise NotImplementedError("TODO: matmul_relu")


if __name__ == "__main__":
    # A small demo (not graded).
    import numpy as np

    x = np.random.default_rng(0).normal(size=(8, 6)).astype(np.float32)
    print("softmax_rows:", np.abs(np.asarray(softmax_rows(x, 4)) - np.asarray(jax.nn.softmax(x, axis=-1))).max())
    a = np.random.default_rng(1).normal(size=(8, 12)).astype(np.float32)
    b = np.random.default_rng(2).normal(size=(12, 6)).astype(np.float32)
    print("matmul_relu:", np.abs(np.asarray(matmul_relu(a, b, 4, 3, 4)) - np.maximum(a @ b, 0)).max())
    print(jax.make_jaxpr(lambda v: softmax_rows(v, 4))(x))

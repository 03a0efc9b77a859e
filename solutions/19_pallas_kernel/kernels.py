"""Exercise 19: a Pallas kernel in interpret mode (reference solution)."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


# --- Part A -----------------------------------------------------------------------------------------

def softmax_kernel(x_ref, o_ref):
    """One block of rows: each row's softmax, its own maximum subtracted first."""
    x = x_ref[...]
    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    o_ref[...] = e / jnp.sum(e, axis=-1, keepdims=True)


@functools.partial(jax.jit, static_argnums=1)
def softmax_rows(x, block_rows):
    rows, cols = x.shape
    block = pl.BlockSpec((block_rows, cols), lambda i: (i, 0))
    return pl.pallas_call(
        softmax_kernel,
        grid=(rows // block_rows,),
        in_specs=[block],
        out_specs=block,
        out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32),
        interpret=True,
    )(x)


# --- Part B -----------------------------------------------------------------------------------------

def matmul_relu_kernel(x_ref, w_ref, o_ref):
    """Grid step (i, j, k): add x block (i, k) @ w block (k, j) into output block (i, j)."""
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _zero():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)

    @pl.when(k == pl.num_programs(2) - 1)
    def _relu():
        o_ref[...] = jnp.maximum(o_ref[...], 0.0)


@functools.partial(jax.jit, static_argnums=(2, 3, 4))
def matmul_relu(x, w, bm, bn, bk):
    m, k = x.shape
    n = w.shape[1]
    return pl.pallas_call(
        matmul_relu_kernel,
        grid=(m // bm, n // bn, k // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
                  pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
        interpret=True,
    )(x, w)


if __name__ == "__main__":
    # A small demo (not graded).
    import numpy as np

    x = np.random.default_rng(0).normal(size=(8, 6)).astype(np.float32)
    print("softmax_rows:", np.abs(np.asarray(softmax_rows(x, 4)) - np.asarray(jax.nn.softmax(x, axis=-1))).max())
    a = np.random.default_rng(1).normal(size=(8, 12)).astype(np.float32)
    b = np.random.default_rng(2).normal(size=(12, 6)).astype(np.float32)
    print("matmul_relu:", np.abs(np.asarray(matmul_relu(a, b, 4, 3, 4)) - np.maximum(a @ b, 0)).max())
    print(jax.make_jaxpr(lambda v: softmax_rows(v, 4))(x))

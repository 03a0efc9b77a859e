"""Exercise 16: forward and reverse mode, custom derivatives.

Read README.md in this folder first.  Fill in every TODO; keep the names and signatures.
Check your work with:  grade exercise 16
"""

import jax
import jax.numpy as jnp  # noqa: F401


# --- Part A -----------------------------------------------------------------------------------------

def hvp(f, x, v):
    """H(x) @ v, the Hessian of the scalar function f at x times v, without ever forming H.

    TODO
    """
    raise NotImplementedError("TODO: hvp")


# --- Part B -----------------------------------------------------------------------------------------

def jacobian(f, x):
    """The m x n Jacobian of f: R^n -> R^m at x, by jax.jacfwd or jax.jacrev: whichever is
    cheaper for its shape.

    TODO
    """
    raise NotImplementedError("TODO: jacobian")


# --- Part C -----------------------------------------------------------------------------------------

def clip_gradient(lo, hi, x):
    """x on the way forward; on the way back, the incoming cotangent clipped to [lo, hi]
    elementwise.  A jax.custom_vjp function (lo and hi are Python floats).

    TODO: decorate it, and register its forward and backward rules with defvjp.
    """
    raise NotImplementedError("TODO: clip_gradient")


# --- Part D -----------------------------------------------------------------------------------------

def softmax(x):
    """Softmax over the last axis, stable for logits of +-1e4, with a jax.custom_vjp whose only
    residual is its output.

    TODO: decorate it, and register its forward and backward rules with defvjp.
    """
    raise NotImplementedError("TODO: softmax")


if __name__ == "__main__":
    # A small demo (not graded).
    x = jnp.array([0.5, -1.0, 2.0])
    print("hvp:", hvp(lambda v: jnp.sum(v ** 4) / 4, x, jnp.ones(3)))
    print("jacobian (tall):", jacobian(lambda v: jnp.concatenate([v, v ** 2]), x).shape)
    print("clip_gradient:", jax.grad(lambda v: jnp.sum(jnp.array([-3.0, 0.5, 4.0]) * clip_gradient(-1.0, 1.0, v)))(x))
    print("softmax:", softmax(jnp.array([1e4, -1e4, 0.0])),
          jax.grad(lambda v: softmax(v)[0])(jnp.array([1e4, -1e4, 0.0])))

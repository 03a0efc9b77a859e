"""Exercise 16 in another idiom: reverse over reverse, jacobian by element counts, nondiff_argnums bounds, jax.nn.softmax forward."""

from functools import partial

import jax
import jax.numpy as jnp


def hvp(f, x, v):
    # the gradient of <grad f(x), v>: reverse over reverse, still only vectors
    return jax.grad(lambda y: jnp.vdot(jax.grad(f)(y), v))(x)


def jacobian(f, x):
    outputs = jax.eval_shape(f, x).size
    if outputs < x.size:  # wide: fewer rows than columns, one backward pass per row
        return jax.jacrev(f)(x)
    return jax.jacfwd(f)(x)


@partial(jax.custom_vjp, nondiff_argnums=(0, 1))
def clip_gradient(lo, hi, x):
    return x


def _clip_fwd(lo, hi, x):
    return x, None


def _clip_bwd(lo, hi, _, g):
    return (jnp.minimum(jnp.maximum(g, lo), hi),)


clip_gradient.defvjp(_clip_fwd, _clip_bwd)


@jax.custom_vjp
def softmax(x):
    return jax.nn.softmax(x, axis=-1)


def _softmax_fwd(x):
    y = jax.nn.softmax(x, axis=-1)
    return y, y


def _softmax_bwd(y, g):
    return (y * g - y * jnp.sum(y * g, axis=-1, keepdims=True),)


softmax.defvjp(_softmax_fwd, _softmax_bwd)

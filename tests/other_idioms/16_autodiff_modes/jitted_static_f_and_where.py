"""Exercise 16 in another idiom: hvp and jacobian jitted with f static, the mode chosen from the shapes, clipping by where, a softmax through its log-normaliser."""

from functools import partial

import jax
import jax.numpy as jnp


@partial(jax.jit, static_argnums=0)
def hvp(f, x, v):
    return jax.jvp(lambda y: jax.grad(f)(y), [x], [v])[1]


@partial(jax.jit, static_argnums=0)
def jacobian(f, x):
    (m,) = jax.eval_shape(f, x).shape
    (n,) = x.shape
    mode = jax.jacrev if m < n else jax.jacfwd
    return mode(f)(x)


def _clip(g, lo, hi):
    g = jnp.where(g < lo, lo, g)
    return jnp.where(g > hi, hi, g)


@jax.custom_vjp
def clip_gradient(lo, hi, x):
    return x


clip_gradient.defvjp(lambda lo, hi, x: (x, (lo, hi)),
                     lambda res, g: (None, None, _clip(g, *res)))


@jax.custom_vjp
def softmax(x):
    z = x - x.max(axis=-1, keepdims=True)  # exact near the max; log_z = max + log(...) would round at 1e4
    return jnp.exp(z - jnp.log(jnp.sum(jnp.exp(z), axis=-1, keepdims=True)))


def _fwd(x):
    y = softmax(x)
    return y, y


def _bwd(y, g):
    return (y * (g - (g * y).sum(-1, keepdims=True)),)


softmax.defvjp(_fwd, _bwd)

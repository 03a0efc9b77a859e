"""Exercise 16: forward and reverse mode, custom derivatives -- reference solution."""

import jax
import jax.numpy as jnp


# --- Part A -----------------------------------------------------------------------------------------

def hvp(f, x, v):
    return jax.jvp(jax.grad(f), (x,), (v,))[1]


# --- Part B -----------------------------------------------------------------------------------------

def jacobian(f, x):
    m = jax.eval_shape(f, x).shape[0]
    n = x.shape[0]
    return jax.jacfwd(f)(x) if m >= n else jax.jacrev(f)(x)


# --- Part C -----------------------------------------------------------------------------------------

@jax.custom_vjp
def clip_gradient(lo, hi, x):
    return x


def _clip_fwd(lo, hi, x):
    return x, (lo, hi)


def _clip_bwd(res, g):
    lo, hi = res
    return None, None, jnp.clip(g, lo, hi)


clip_gradient.defvjp(_clip_fwd, _clip_bwd)


# --- Part D -----------------------------------------------------------------------------------------

@jax.custom_vjp
def softmax(x):
    z = x - jnp.max(x, axis=-1, keepdims=True)
    e = jnp.exp(z)
    return e / jnp.sum(e, axis=-1, keepdims=True)


def _softmax_fwd(x):
    y = softmax(x)
    return y, y


def _softmax_bwd(y, g):
    return (y * (g - jnp.sum(g * y, axis=-1, keepdims=True)),)


softmax.defvjp(_softmax_fwd, _softmax_bwd)


if __name__ == "__main__":
    # A small demo (not graded).
    x = jnp.array([0.5, -1.0, 2.0])
    print("hvp:", hvp(lambda v: jnp.sum(v ** 4) / 4, x, jnp.ones(3)))
    print("jacobian (tall):", jacobian(lambda v: jnp.concatenate([v, v ** 2]), x).shape)
    print("clip_gradient:", jax.grad(lambda v: jnp.sum(jnp.array([-3.0, 0.5, 4.0]) * clip_gradient(-1.0, 1.0, v)))(x))
    print("softmax:", softmax(jnp.array([1e4, -1e4, 0.0])),
          jax.grad(lambda v: softmax(v)[0])(jnp.array([1e4, -1e4, 0.0])))

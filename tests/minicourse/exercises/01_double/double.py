import jax


@jax.jit
def double(x):
    raise NotImplementedError("TODO")

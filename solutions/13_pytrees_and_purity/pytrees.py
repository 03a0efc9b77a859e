"""Exercise 13: pure functions and pytrees (reference solution)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np  # noqa: F401

ACTIVATIONS = {"tanh": jnp.tanh, "relu": jax.nn.relu, "sigmoid": jax.nn.sigmoid}
LEARNING_RATE = 0.1
steps_taken = 0


def loss(w, x, y):
    """Least squares (given; do not change): w f32[d], x f32[B, d], y f32[B] -> f32[]."""
    return 0.5 * jnp.mean((x @ w - y) ** 2)


@jax.jit
def impure_step(w, x, y):
    """One gradient step, impure on purpose (given; not graded): it bumps a global counter and
    reads a global learning rate.  Do not fix it here: write pure_step below."""
    global steps_taken
    steps_taken += 1
    return w - LEARNING_RATE * jax.grad(loss)(w, x, y)


# --- Part A ---------------------------------------------------------------------------------------

def tree_shapes(tree):
    return jax.tree.map(lambda leaf: leaf.shape, tree)


def global_norm(tree):
    return jnp.sqrt(sum(jnp.sum(leaf ** 2) for leaf in jax.tree.leaves(tree)))


def ravel(tree):
    leaves, treedef = jax.tree.flatten(tree)
    shapes = [leaf.shape for leaf in leaves]
    sizes = [leaf.size for leaf in leaves]
    vec = jnp.concatenate([jnp.ravel(leaf) for leaf in leaves])

    def unravel(v):
        pieces, start = [], 0
        for shape, size in zip(shapes, sizes):
            pieces.append(v[start:start + size].reshape(shape))
            start += size
        return jax.tree.unflatten(treedef, pieces)

    return vec, unravel


# --- Part B ---------------------------------------------------------------------------------------

@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Dense:
    w: jax.Array
    b: jax.Array
    activation: str = dataclasses.field(metadata=dict(static=True))


@jax.jit
def apply(layer, x):
    return ACTIVATIONS[layer.activation](x @ layer.w + layer.b)


# --- Part C ---------------------------------------------------------------------------------------

@jax.jit
def pure_step(w, count, x, y, lr):
    return w - lr * jax.grad(loss)(w, x, y), count + 1


if __name__ == "__main__":
    params = {"a": jnp.zeros((3,)), "b": [jnp.ones((2, 2)), jnp.ones((2,))]}
    print("tree_shapes:", tree_shapes(params))
    print("global_norm:", global_norm(params))
    vec, unravel = ravel(params)
    print("ravel:", vec.shape, "-> unravel(2 * vec):", unravel(2 * vec))
    layer = Dense(jnp.ones((3, 2)) * 0.1, jnp.zeros(2), "tanh")
    print("Dense leaves:", len(jax.tree.leaves(layer)), "grad type:",
          type(jax.grad(lambda lyr: jnp.sum(apply(lyr, jnp.ones((4, 3)))))(layer)).__name__)
    w, count = jnp.zeros(3), jnp.int32(0)
    x, y = jnp.ones((4, 3)), jnp.ones(4)
    for lr in (0.1, 0.05, 0.02):
        w, count = pure_step(w, count, x, y, lr)
    print("pure_step: count", int(count), "w", w)

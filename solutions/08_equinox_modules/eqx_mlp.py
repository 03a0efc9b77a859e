"""Reference solution for exercise 8 (Equinox: the model is a pytree)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

LEARNING_RATE = 1e-2
OPTIMIZER = optax.adam(LEARNING_RATE)
ACTIVATIONS = {"tanh": jnp.tanh, "relu": jax.nn.relu}


# --- Part A: the model ------------------------------------------------------------------
class MLP(eqx.Module):
    layers: list
    dropout: eqx.nn.Dropout
    # Static: part of the treedef (so filter_jit keys its cache on it), never a leaf.
    activation: str = eqx.field(static=True)

    def __init__(self, sizes, activation, dropout_rate, *, key):
        keys = jax.random.split(key, len(sizes) - 1)
        self.layers = [eqx.nn.Linear(a, b, key=k) for a, b, k in zip(sizes[:-1], sizes[1:], keys)]
        self.dropout = eqx.nn.Dropout(dropout_rate)
        self.activation = activation

    def __call__(self, x, *, key=None):
        act = ACTIVATIONS[self.activation]
        hidden = self.layers[:-1]
        keys = [None] * len(hidden) if key is None else list(jax.random.split(key, len(hidden)))
        for layer, k in zip(hidden, keys):
            x = self.dropout(act(layer(x)), key=k)
        return self.layers[-1](x)


def make_model(sizes, activation, dropout_rate, seed):
    return MLP([int(s) for s in sizes], str(activation), float(dropout_rate), key=jax.random.key(int(seed)))


def weights(model):
    return [{"w": layer.weight, "b": layer.bias} for layer in model.layers]


# --- Part B: training ---------------------------------------------------------------------
@eqx.filter_jit  # not required; it saves op-by-op dispatch when loss_fn is called on its own
def loss_fn(model, xs, ys, key=None):
    if key is None:
        preds = jax.vmap(model)(xs)
    else:
        preds = jax.vmap(lambda x, k: model(x, key=k))(xs, jax.random.split(key, xs.shape[0]))
    return jnp.mean((preds - ys) ** 2)


@eqx.filter_jit
def compute_grads(model, xs, ys):
    # Differentiates every floating-point array of the model; everything else is None.
    return eqx.filter_grad(loss_fn)(model, xs, ys)


def init_opt_state(model):
    return OPTIMIZER.init(eqx.filter(model, eqx.is_array))


@eqx.filter_jit
def train_step(model, opt_state, xs, ys, key):
    loss, grads = eqx.filter_value_and_grad(loss_fn)(model, xs, ys, key)
    updates, opt_state = OPTIMIZER.update(grads, opt_state, eqx.filter(model, eqx.is_array))
    return eqx.apply_updates(model, updates), opt_state, loss


# --- Part C: inference mode -----------------------------------------------------------------
@eqx.filter_jit
def predict(model, xs, key):
    model = eqx.nn.inference_mode(model)  # every Dropout now passes its input through
    return jax.vmap(model)(xs)

"""Exercise 8: Equinox -- the model is a pytree.

Read README.md in this folder first.  Fill in every TODO; keep the names and
signatures.  Check your work with:  grade exercise 8

The grader never sees your Module objects: it hands plain numbers and arrays to
`make_model` and to your functions, and reads plain data back through `weights`.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

LEARNING_RATE = 1e-2
# Do not change: the grader's trusted Adam step uses exactly these settings
# (optax.adam's defaults: b1=0.9, b2=0.999, eps=1e-8).
OPTIMIZER = optax.adam(LEARNING_RATE)
ACTIVATIONS = {"tanh": jnp.tanh, "relu": jax.nn.relu}


# --------------------------------------------------------------------------------------
# Part A: the model
# --------------------------------------------------------------------------------------
class MLP(eqx.Module):
    """A multi-layer perceptron for ONE example: f32[sizes[0]] -> f32[sizes[-1]].

    Hidden layer i computes  h = dropout(act(layer_i(h)))  where `act` is
    ACTIVATIONS[activation]; the last layer is linear (no activation, no dropout).
    """

    layers: list  # one eqx.nn.Linear per layer: sizes[0] -> sizes[1] -> ... -> sizes[-1]
    dropout: eqx.nn.Dropout  # one Dropout layer, reused after every hidden layer
    activation: str  # TODO: "tanh" or "relu" is configuration, not a parameter: make it a static field

    def __init__(self, sizes, activation, dropout_rate, *, key):
        """sizes: list of ints (at least 3 entries), activation: "tanh" or "relu",
        dropout_rate: float in [0, 1), key: a jax.random key.

        TODO: split `key`, one key per eqx.nn.Linear (use its default initialisation),
        and build the Dropout layer with `dropout_rate`.
        """
        raise NotImplementedError("TODO: MLP.__init__")

    def __call__(self, x, *, key=None):
        """x: f32[sizes[0]] -> f32[sizes[-1]].  `key` is None in inference mode; in
        training mode it drives the dropout (use a different key after each hidden layer).

        TODO: the forward pass described in the class docstring.
        """
        raise NotImplementedError("TODO: MLP.__call__")


def make_model(sizes, activation, dropout_rate, seed):
    """The grader's door: build an MLP from plain data (given; do not change)."""
    return MLP([int(s) for s in sizes], str(activation), float(dropout_rate), key=jax.random.key(int(seed)))


def weights(model):
    """The model's parameters as plain data, in layer order:
    [{"w": f32[out, in], "b": f32[out]}, ...]  (eqx.nn.Linear's own `weight` and `bias`).

    The grader computes its reference forward pass from these arrays, and it also calls
    `weights` on the gradient pytree of `compute_grads`.

    TODO
    """
    raise NotImplementedError("TODO: weights")


# --------------------------------------------------------------------------------------
# Part B: training
# --------------------------------------------------------------------------------------
def loss_fn(model, xs, ys, key=None):
    """Mean squared error over EVERY element:  mean((model(x_i) - y_i) ** 2).

    xs: f32[B, d_in], ys: f32[B, d_out].  key=None: call the model without a key (fine
    when dropout does nothing, e.g. dropout_rate 0).  With a key: training mode, where
    every example gets a key of its own (split it).

    TODO: vmap the model over the batch.
    """
    raise NotImplementedError("TODO: loss_fn")


def compute_grads(model, xs, ys):
    """The gradient of loss_fn(model, xs, ys) with respect to every array in the model,
    returned as a pytree with the model's own structure (an MLP whose weights and biases
    hold gradients).

    TODO: one call of an Equinox filtered transformation.
    """
    raise NotImplementedError("TODO: compute_grads")


def init_opt_state(model):
    """The optimizer state for `model`.

    TODO: OPTIMIZER.init on the model's arrays only (eqx.filter with eqx.is_array).
    """
    raise NotImplementedError("TODO: init_opt_state")


def train_step(model, opt_state, xs, ys, key):
    """One Adam step on loss_fn(model, xs, ys, key): returns (new_model, new_opt_state, loss).

    The grader calls it many times with the same shapes and the same activation: that
    must compile once; a model with another activation must compile exactly once more.

    TODO: compile it with Equinox's filtered jit, take the loss and the gradient in one
    pass, update with OPTIMIZER (give it the model's arrays as `params`), and apply the
    updates with eqx.apply_updates.
    """
    raise NotImplementedError("TODO: train_step")


# --------------------------------------------------------------------------------------
# Part C: inference mode
# --------------------------------------------------------------------------------------
def predict(model, xs, key):
    """The model on a batch in INFERENCE mode: xs f32[B, d_in] -> f32[B, d_out].

    Dropout must be off: the result may not depend on `key` (it is passed only because a
    training-mode call would need one).

    TODO: switch the model to inference mode, then vmap it over the batch.
    """
    raise NotImplementedError("TODO: predict")

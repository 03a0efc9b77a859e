"""Exercise 7: the training lab, read down to the HLO.

Read README.md in this folder first.  Fill in every TODO; keep the names, the signatures
and the three constants.  Check your work with:  grade exercise 7
Run the demo at the bottom with:  python training_lab.py
"""

import contextlib
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax  # noqa: F401 - the optimizer and the step use it

# The lab's hyperparameters: train_step uses make_optimizer(LEARNING_RATE, CLIP_NORM, WEIGHT_DECAY).
# The grader checks your step against optax with these values: do not change them.
LEARNING_RATE = 0.05
CLIP_NORM = 1.0
WEIGHT_DECAY = 0.01


def forward(params, x):
    """The model (do not change): relu hidden layers, then a linear layer giving the logits.

    params: [{"w": f32[n_in, n_out], "b": f32[n_out]}, ...], one dict per layer.
    x: f32[B, sizes[0]] (or f32[sizes[0]] for one example)  ->  logits f32[B, sizes[-1]].
    """
    h = x
    for layer in params[:-1]:
        h = jax.nn.relu(h @ layer["w"] + layer["b"])
    return h @ params[-1]["w"] + params[-1]["b"]


def init_params(key, sizes):
    """Parameters of an MLP with layer widths `sizes` (e.g. [4, 8, 3]: 4 inputs, 8 hidden, 3 classes).

    Returns a list with one dict {"w": f32[sizes[i], sizes[i+1]], "b": f32[sizes[i+1]]} per layer.
    The recipe (follow it exactly): split `key` once into len(sizes) - 1 keys with
    jax.random.split; layer i's w is jax.random.normal(keys[i], (sizes[i], sizes[i+1]), float32)
    times sqrt(2 / sizes[i]); every b is zeros.

    TODO
    """
    raise NotImplementedError("TODO: init_params")


def loss_fn(params, x, y):
    """Mean softmax cross-entropy of `forward(params, x)` against integer labels y (i32[B]) -> f32[].

    TODO
    """
    raise NotImplementedError("TODO: loss_fn")


def make_optimizer(lr, clip, weight_decay):
    """The optax optimizer: clip the gradient's global norm to `clip`, then AdamW with learning rate
    `lr` and decoupled weight decay `weight_decay`.

    TODO: return an optax.GradientTransformation (optax.chain of two transformations).
    """
    raise NotImplementedError("TODO: make_optimizer")


def train_step(params, opt_state, x, y):
    """One training step -> (new_params, new_opt_state, loss at the params passed in).

    opt_state is make_optimizer(LEARNING_RATE, CLIP_NORM, WEIGHT_DECAY).init(params).

    TODO: compute the loss and its gradient, update with the optimizer, apply the updates.
    Make train_step itself the function jax.jit returns, and donate params and opt_state
    (donate_argnums): after a call, the caller's old params and opt_state are deleted.
    """
    raise NotImplementedError("TODO: train_step")


def per_example(params, x, y):
    """Per-example metric -> (losses f32[B], correct bool[B]).

    losses[i] is the cross-entropy of example i alone; correct[i] is argmax(logits_i) == y[i].
    TODO: write it for ONE example and jax.vmap it over the batch (no Python loop over examples).
    """
    raise NotImplementedError("TODO: per_example")


def report(params, opt_state, x, y):
    """What XLA made of YOUR train_step for these arguments, without running it:

    {"flops": float, "bytes_accessed": float, "fusions": int}

    flops and bytes_accessed are cost_analysis()'s "flops" and "bytes accessed" of
    train_step.lower(params, opt_state, x, y).compile(); fusions is the number of
    instructions of the ENTRY computation of that compiled program's as_text() whose opcode
    is `fusion`.  TODO
    """
    raise NotImplementedError("TODO: report")


if __name__ == "__main__":
    # A small demo (not graded): train on separable blobs, then compare eager and jitted steps.
    rng = np.random.default_rng(0)
    sizes, batch = [8, 32, 32, 4], 256
    means = rng.normal(size=(sizes[-1], sizes[0])) * 3
    y = jnp.asarray(rng.integers(0, sizes[-1], size=batch).astype(np.int32))
    x = jnp.asarray((np.asarray(means)[np.asarray(y)] + rng.normal(size=(batch, sizes[0]))).astype(np.float32))
    params = init_params(jax.random.key(0), sizes)
    opt_state = make_optimizer(LEARNING_RATE, CLIP_NORM, WEIGHT_DECAY).init(params)
    print("report:", report(params, opt_state, x, y))
    for step in range(50):
        params, opt_state, loss = train_step(params, opt_state, x, y)
        if step % 10 == 0:
            print(f"step {step:3d}  loss {float(loss):.4f}")
    losses, correct = per_example(params, x, y)
    print(f"accuracy {float(correct.mean()):.3f}  worst example loss {float(losses.max()):.4f}")

    # Not graded: the same step run op by op (jax.disable_jit) against the compiled one.
    # (Without jit there is no donation: the old arrays stay alive.)
    for name, mode in (("eager", jax.disable_jit), ("jit", contextlib.nullcontext)):
        with mode():
            params, opt_state, _ = train_step(params, opt_state, x, y)  # warm-up: compiles under jit
            jax.block_until_ready(params)
            t0 = time.perf_counter()
            for _ in range(20):
                params, opt_state, loss = train_step(params, opt_state, x, y)
            jax.block_until_ready(params)
        print(f"{name:5s} {(time.perf_counter() - t0) / 20 * 1e3:8.2f} ms/step")

"""Exercise 2: diagnosing retraces.

Read README.md in this folder first.  `slow_train_step` below works, but it compiles
again on almost every batch.  Find out why (run this file: `python retrace.py`), then
write `pad_to_bucket` and `train_step` so that a whole training run compiles at most
once per bucket length -- and still computes exactly the same loss and update as the
slow step does on the unpadded batch.

Keep every name and signature.  Check your work with:  grade exercise 2
"""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

# Sequence lengths a batch may be padded to.  No batch is longer than the last one.
BUCKETS = (8, 16, 32, 64)
# Token id and target value written into padded positions.
PAD_ID = 0
PAD_TARGET = 0.0


# ---------------------------------------------------------------------------------------
# The model (provided; do not change -- the grader's reference uses the same one).
#   params = {"embed": f32[V, D], "w": f32[D], "b": f32[]}
#   tokens: i32[B, L] (ids in [0, V))      targets: f32[B, L] (one number per token)
# ---------------------------------------------------------------------------------------
def predict(params, tokens):
    """One prediction per token: f32[B, L]."""
    hidden = jnp.tanh(params["embed"][tokens])  # [B, L, D]
    return hidden @ params["w"] + params["b"]


def mean_token_loss(params, tokens, targets):
    """Mean squared error over every token of an UNPADDED batch: f32[]."""
    return jnp.mean((predict(params, tokens) - targets) ** 2)


# ---------------------------------------------------------------------------------------
# The slow training step (provided; leave it as it is and write `train_step` instead).
# It is correct, but a training loop that calls it compiles again on almost every
# batch.  There is more than one reason.
# ---------------------------------------------------------------------------------------
@partial(jax.jit, static_argnames="lr")  # "lr is a hyper-parameter, not data"
def slow_train_step(params, tokens, targets, lr):
    """One SGD step on an unpadded batch: returns (new_params, loss before the update)."""
    loss, grads = jax.value_and_grad(mean_token_loss)(params, tokens, targets)
    new_params = jax.tree.map(lambda p, g: p - lr * g, params, grads)
    return new_params, loss


# ---------------------------------------------------------------------------------------
# Your part.
# ---------------------------------------------------------------------------------------
def pad_to_bucket(tokens, targets, buckets=BUCKETS):
    """Pad one batch along the sequence axis to a bucket length.

    tokens: i32[B, L] and targets: f32[B, L] (NumPy arrays, as a data loader gives them),
    buckets: increasing lengths, L <= buckets[-1].

    Returns (tokens_p, targets_p, mask), each of shape [B, Lb] where Lb is the SMALLEST
    bucket >= L:
      * tokens_p: int32, the original tokens in columns 0..L-1, PAD_ID after them;
      * targets_p: float32, the original targets in columns 0..L-1, PAD_TARGET after them;
      * mask: float32 (bool is accepted too), 1 where a real token is, 0 on padding.

    This runs on the host, before any jitted code; plain NumPy is the natural tool.
    TODO: implement it.
    """
    raise NotImplementedError("TODO: pad_to_bucket")


def train_step(params, tokens, targets, mask, lr):
    """One SGD step on a padded batch: returns (new_params, loss before the update).

    The grader calls it, batch after batch, exactly like this::

        tokens_p, targets_p, mask = pad_to_bucket(tokens, targets, BUCKETS)
        params, loss = train_step(params, tokens_p, targets_p, mask, lr=lr)

    where the learning rate `lr` (a Python float) decays a little at every step.

    Requirements:
      * `loss` equals mean_token_loss(params, tokens, targets) of the UNPADDED batch, and
        `new_params` equal slow_train_step's update on the unpadded batch: padded positions
        must change neither the loss nor the gradient;
      * over a whole run, functions defined in this file compile at most once per bucket
        length (jit this function; keep its name).

    TODO: jit it, use the mask in the loss (mind what you divide by), and remove the
    second cause of recompiles that JAX reports for `slow_train_step`.
    """
    raise NotImplementedError("TODO: train_step")


# ---------------------------------------------------------------------------------------
# A small experiment to run yourself (`python retrace.py`); the grader never calls this.
# ---------------------------------------------------------------------------------------
def init_params(rng, vocab=20, dim=8):
    return {
        "embed": rng.normal(size=(vocab, dim)).astype(np.float32),
        "w": (rng.normal(size=dim) / np.sqrt(dim)).astype(np.float32),
        "b": np.float32(rng.normal()),
    }


def make_batches(rng, n, batch_size=4, vocab=20, max_len=BUCKETS[-1]):
    """`n` batches whose sequence length changes from batch to batch."""
    batches = []
    for _ in range(n):
        length = int(rng.integers(1, max_len + 1))
        tokens = rng.integers(0, vocab, size=(batch_size, length)).astype(np.int32)
        targets = rng.normal(size=(batch_size, length)).astype(np.float32)
        batches.append((tokens, targets))
    return batches


def lr_schedule(step, base=0.1, decay=0.02):
    return base / (1.0 + decay * step)


def _run(step_fn, padded, n=8, seed=0):
    rng = np.random.default_rng(seed)
    params = init_params(rng)  # NumPy arrays are fine as jit arguments
    for t, (tokens, targets) in enumerate(make_batches(rng, n)):
        if padded:
            tokens, targets, mask = pad_to_bucket(tokens, targets, BUCKETS)
            params, loss = step_fn(params, tokens, targets, mask, lr=lr_schedule(t))
        else:
            params, loss = step_fn(params, tokens, targets, lr=lr_schedule(t))
        print(f"  step {t}: batch shape {tuple(tokens.shape)}, loss {float(loss):.4f}")


if __name__ == "__main__":
    # Every compilation is logged; every retrace comes with JAX's own reason.
    with jax.log_compiles(True), jax.explain_cache_misses(True):
        print("slow_train_step on unpadded batches:")
        _run(slow_train_step, padded=False)
        try:
            print("\nyour pad_to_bucket + train_step:")
            _run(train_step, padded=True)
        except NotImplementedError as exc:
            print(f"  not yet: {exc}")

"""Reference solution for exercise 2: diagnosing retraces.

Two causes made `slow_train_step` compile on almost every batch: the sequence length
(a new shape per batch) and `lr` declared static (a new cache key per learning rate).
`pad_to_bucket` bounds the shapes to len(BUCKETS); `train_step` traces `lr` and masks
the padding out of the loss, dividing by the number of real tokens.
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
    """Pad along the sequence axis to the smallest bucket >= L; mask marks real tokens."""
    tokens = np.asarray(tokens, dtype=np.int32)
    targets = np.asarray(targets, dtype=np.float32)
    batch, length = tokens.shape
    fitting = [b for b in sorted(buckets) if b >= length]
    if not fitting:
        raise ValueError(f"a batch of length {length} is longer than the largest bucket {max(buckets)}")
    width = fitting[0]
    extra = ((0, 0), (0, width - length))
    tokens_p = np.pad(tokens, extra, constant_values=PAD_ID)
    targets_p = np.pad(targets, extra, constant_values=PAD_TARGET)
    mask = np.zeros((batch, width), dtype=np.float32)
    mask[:, :length] = 1.0
    return tokens_p, targets_p, mask


@jax.jit  # lr is traced like any array: a new value reuses the compiled step
def train_step(params, tokens, targets, mask, lr):
    """One SGD step on a padded batch; loss and update equal those of the unpadded batch."""

    def masked_loss(p):
        squared = (predict(p, tokens) - targets) ** 2
        # Divide by the number of REAL tokens, not by the padded size B * Lb.
        return jnp.sum(squared * mask) / jnp.sum(mask)

    loss, grads = jax.value_and_grad(masked_loss)(params)
    new_params = jax.tree.map(lambda p, g: p - lr * g, params, grads)
    return new_params, loss


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

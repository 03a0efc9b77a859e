"""Probes for exercise 2 (diagnosing retraces): the learner's padded training loop.

A training loop written the way the exercise's README describes it, for batch ``t``
(``{"tokens": i32[B, L_t], "targets": f32[B, L_t]}``, NumPy arrays as a data loader hands
them over)::

    tokens_p, targets_p, mask = pad_to_bucket(tokens, targets, buckets)
    params, loss = train_step(params, tokens_p, targets_p, mask, lr=lrs[t])

runs as two requests:

``pad_batches(ctx, batches, buckets, slot=None)``
    Only the padding: ``pad_to_bucket`` per batch, outputs returned as they are (and kept
    in ``ctx.slots[slot]`` exactly as the learner's code made them, when a slot is named).

``train_steps(ctx, slot, params, lrs)``
    The measured half of the loop: ``train_step`` alone over the batches ``pad_batches``
    kept in ``slot``, threading the parameters.  What the padding compiled (``jnp.pad`` of
    each new length, say) is not in this request's count; ``train_step``'s compilations
    are, and the reference solution's own run of the same two requests says how many an
    honest step makes.

Both measure only: whether a shape, a loss or a compile count is right is decided by the
trusted tests.
"""

from __future__ import annotations

import jax
import numpy as np

from grader.compiles import CompileRecorder
from grader.sandbox.context import to_jax

_block = jax.block_until_ready
_asarray = np.asarray
_array = np.array
_tree_map = jax.tree.map


def _batch_arrays(batch: dict) -> tuple[np.ndarray, np.ndarray]:
    return _asarray(batch["tokens"], dtype=np.int32), _asarray(batch["targets"], dtype=np.float32)


def _three(out, where: str):
    if not isinstance(out, (tuple, list)) or len(out) != 3:
        kind = f"a {type(out).__name__}" + (f" of {len(out)}" if isinstance(out, (tuple, list)) else "")
        raise TypeError(f"{where} should return a tuple (tokens, targets, mask); it returned {kind}")
    return tuple(out)


def _two(out, where: str):
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        kind = f"a {type(out).__name__}" + (f" of {len(out)}" if isinstance(out, (tuple, list)) else "")
        raise TypeError(f"{where} should return a tuple (new_params, loss); it returned {kind}")
    return tuple(out)


def pad_batches(ctx, batches: list, buckets, slot: str | None = None) -> list:
    pad = ctx.function("pad_to_bucket")
    buckets = tuple(int(b) for b in buckets)
    out = []
    for batch in batches:
        tokens, targets = _batch_arrays(batch)
        out.append(_three(pad(tokens, targets, buckets), "pad_to_bucket"))
    _block(out)
    if slot is not None:
        ctx.slots[str(slot)] = out
    return out


def train_steps(ctx, slot: str, params, lrs: list) -> dict:
    step = ctx.function("train_step")
    padded = ctx.slots.pop(str(slot))
    params = _block(to_jax(params))
    losses, after = [], []
    with CompileRecorder(ctx.roots, explain_cache_misses=True) as rec:  # for feedback: the meter decides
        for (tok_p, tgt_p, mask), lr in zip(padded, lrs):
            params, loss = _two(step(params, tok_p, tgt_p, mask, lr=float(lr)), "train_step")
            params, loss = _block((params, loss))
            losses.append(loss)
            # A host copy: the step may donate params (the loop above is safe with donation), and
            # the next call would delete the buffers kept here.
            after.append(_tree_map(lambda a: _array(a, copy=True), params))
    return {"losses": losses, "params": after, "compiles": rec.to_plain()}

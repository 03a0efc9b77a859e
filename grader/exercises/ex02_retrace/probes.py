"""Probes for exercise 2 (diagnosing retraces): the learner's padded training loop.

``train_loop(ctx, params, batches, buckets, lrs)``
    A training loop written the way the exercise's README describes it.  For batch ``t``
    (``{"tokens": i32[B, L_t], "targets": f32[B, L_t]}``, NumPy arrays as a data loader
    hands them over)::

        tokens_p, targets_p, mask = pad_to_bucket(tokens, targets, buckets)
        params, loss = train_step(params, tokens_p, targets_p, mask, lr=lrs[t])

    The parameters are threaded from one step to the next.  Everything runs inside one
    ``CompileRecorder(explain_cache_misses=True)``.  Returns, per step, what the padding
    gave, the loss and the parameters after the step, plus the compile record.
    (``params`` become JAX arrays before recording starts; the batches stay NumPy.)

``pad_batches(ctx, batches, buckets)``
    Only the padding: ``pad_to_bucket`` per batch, outputs returned as they are.

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


def pad_batches(ctx, batches: list, buckets) -> list:
    pad = ctx.function("pad_to_bucket")
    buckets = tuple(int(b) for b in buckets)
    out = []
    for batch in batches:
        tokens, targets = _batch_arrays(batch)
        out.append(_three(pad(tokens, targets, buckets), "pad_to_bucket"))
    return out


def train_loop(ctx, params, batches: list, buckets, lrs: list) -> dict:
    pad = ctx.function("pad_to_bucket")
    step = ctx.function("train_step")
    buckets = tuple(int(b) for b in buckets)
    prepared = [_batch_arrays(b) for b in batches]
    params = _block(to_jax(params))
    padded, losses, after = [], [], []
    with CompileRecorder(ctx.roots, explain_cache_misses=True) as rec:
        for (tokens, targets), lr in zip(prepared, lrs):
            tok_p, tgt_p, mask = _three(pad(tokens, targets, buckets), "pad_to_bucket")
            params, loss = _two(step(params, tok_p, tgt_p, mask, lr=float(lr)), "train_step")
            params, loss = _block((params, loss))
            padded.append((tok_p, tgt_p, mask))
            losses.append(loss)
            after.append(params)
    return {"padded": padded, "losses": losses, "params": after, "compiles": rec.to_plain()}

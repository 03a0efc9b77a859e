"""Public checks for exercise 2 (run by `grade exercise 2`; they carry no points).

They use a small fixed model and fixed sequence lengths; the hidden checks test the same
properties on a model, batch size, lengths, learning rates and a second bucket list drawn
at grading time.
"""

import zlib

import numpy as np
import pytest

from grader.exercises.ex02_retrace.judges import DTYPE_HINT, bucket_of, dtype_problem, expect_bucketed_compiles, \
    expect_host_padding, expect_step_in_jax, reference_step, training_outcome, unwrap
from grader.feedback import CheckFailed, describe

BUCKETS = (8, 16, 32, 64)
SAMPLE_LENGTHS = (5, 7, 3, 8, 6, 2, 4, 1)  # all in bucket 8: one compile (they are cheap, not free)


def make_batch(rng, rows, length, vocab):
    return {"tokens": rng.integers(0, vocab, size=(rows, length)).astype(np.int32),
            "targets": rng.normal(size=(rows, length)).astype(np.float32)}


def check_padded(batch, got, buckets):
    tokens, targets = batch["tokens"], batch["targets"]
    rows, length = tokens.shape
    width = bucket_of(length, buckets)
    what = f"pad_to_bucket on a [{rows}, {length}] batch with buckets {buckets}"
    for name, arr in zip(("tokens_p", "targets_p", "mask"), got):
        if not isinstance(arr, np.ndarray) or arr.shape != (rows, width):
            raise CheckFailed(f"{what}: {name} has the wrong shape",
                              measured=describe(arr), expected=f"shape ({rows}, {width})",
                              hint=f"{width} is the smallest bucket >= {length}; pad only axis 1")
    tok_p, tgt_p, mask = got
    wrong = dtype_problem(tok_p, tgt_p, mask)
    if wrong:
        raise CheckFailed(f"{what}: {wrong}", measured=f"dtypes {tok_p.dtype}, {tgt_p.dtype}, {mask.dtype}",
                          expected="int32 tokens_p, float32 targets_p, a float32 (or bool) mask", hint=DTYPE_HINT)
    if not np.array_equal(tok_p[:, :length], tokens) or not np.array_equal(tgt_p[:, :length], targets):
        raise CheckFailed(f"{what}: the first {length} columns should be the input batch",
                          measured=f"tokens_p[0] = {tok_p[0].tolist()}", expected=f"starting with {tokens[0].tolist()}",
                          hint="pad on the right: np.pad(x, ((0, 0), (0, Lb - L)))")
    if np.any(tok_p[:, length:] != 0) or np.any(tgt_p[:, length:] != 0):
        raise CheckFailed(f"{what}: padding should be PAD_ID = 0 / PAD_TARGET = 0.0",
                          measured=f"tokens_p[0] = {tok_p[0].tolist()}", expected="zeros after the real tokens",
                          hint="np.pad(..., constant_values=PAD_ID)")
    expected_mask = np.zeros((rows, width))
    expected_mask[:, :length] = 1.0
    if mask.dtype.kind not in "biuf" or not np.array_equal(np.asarray(mask, np.float64), expected_mask):
        raise CheckFailed(f"{what}: the mask should be 1 on the {length} real columns and 0 after",
                          measured=f"mask[0] = {np.asarray(mask[0]).tolist()}",
                          expected=f"mask[0] = {expected_mask[0].tolist()}",
                          hint="mask = np.zeros((B, Lb), np.float32); mask[:, :L] = 1")


def draw_sample(seed):
    """The small fixed-size model and batches of the public training run."""
    rng = np.random.default_rng([seed, zlib.crc32(b"ex02-public-sample-run")])
    params = {"embed": rng.normal(size=(10, 4)).astype(np.float32),
              "w": (rng.normal(size=4) / 2).astype(np.float32),
              "b": np.asarray(rng.normal(), np.float32)}
    batches = [make_batch(rng, 3, n, 10) for n in SAMPLE_LENGTHS]
    lrs = [0.1 / (1.0 + 0.05 * t) for t in range(len(batches))]
    return {"params": params, "batches": batches, "lrs": lrs}


@pytest.fixture(scope="module")
def sample_run(submission, reference, seed):
    """One training run shared by this file's checks: (case, probe output, error)."""
    return training_outcome(submission, reference, seed, draw_sample, BUCKETS)


def test_pads_to_bucket(submission, rng):
    for buckets, lengths in ((BUCKETS, (3, 8, 9, 20, 64)), ((5, 10), (1, 5, 6))):
        batches = [make_batch(rng, 2, n, 10) for n in lengths]
        padded = submission.probe("ex02_retrace:pad_batches", batches, buckets)
        compiled = int(submission.last_meter.get("compiles", 0))
        for batch, got in zip(batches, padded):
            check_padded(batch, tuple(got), buckets)
        expect_host_padding(compiled, f"pad_to_bucket with buckets {buckets}")


def test_fewer_compiles_on_sample(sample_run, submission):
    case, out = unwrap(sample_run)
    n_buckets = len({bucket_of(n, BUCKETS) for n in SAMPLE_LENGTHS})
    expect_bucketed_compiles(out["compiles"], len(SAMPLE_LENGTHS), n_buckets,
                             what=f"{len(SAMPLE_LENGTHS)} steps with lengths {SAMPLE_LENGTHS} (all in bucket 8)",
                             hint_public="no compile at all: put @jax.jit on train_step. Too many: read JAX's "
                                         "reason above; a static `lr` compiles once per value, and padding to the "
                                         "batch's own length gives a new shape per batch")
    expect_step_in_jax(submission, out["compiles"])  # the compilations must be of JAX doing the work


def test_sample_loss_matches_unpadded(sample_run, submission, seed):
    case, out = unwrap(sample_run)
    for t, batch in enumerate(case["batches"]):
        before = case["params"] if t == 0 else out["params"][t - 1]
        ref_loss, ref_params = reference_step(before, batch["tokens"], batch["targets"], case["lrs"][t])
        got = np.asarray(out["losses"][t], np.float64).reshape(-1)
        if got.size != 1 or not np.isclose(got[0], ref_loss, rtol=1e-4, atol=1e-5):
            raise CheckFailed(
                f"step {t} (a [3, {SAMPLE_LENGTHS[t]}] batch padded to {bucket_of(SAMPLE_LENGTHS[t], BUCKETS)}): "
                "the loss differs from the loss of the unpadded batch",
                measured=f"loss {got.tolist()}", expected=f"{ref_loss:.6g}",
                hint="average the squared errors over the REAL tokens only: sum(mask * err) / sum(mask)",
            )
        after = out["params"][t]
        for k in ("embed", "w", "b"):
            got_p = np.asarray(after[k]) if isinstance(after, dict) and k in after else None
            if got_p is None or got_p.shape != np.shape(ref_params[k]) or \
                    not np.allclose(got_p, ref_params[k], rtol=1e-4, atol=1e-5):
                raise CheckFailed(
                    f"step {t}: new_params['{k}'] differs from one SGD step on the unpadded batch",
                    measured=describe(got_p) if got_p is None else
                    f"largest difference {float(np.max(np.abs(got_p - ref_params[k]))):.3g}"
                    if got_p.shape == np.shape(ref_params[k]) else f"shape {got_p.shape}",
                    expected=f"params - lr * grad (lr = {case['lrs'][t]:.4g}), rtol 1e-4",
                    hint="differentiate the masked loss and apply p - lr * g to every leaf",
                )

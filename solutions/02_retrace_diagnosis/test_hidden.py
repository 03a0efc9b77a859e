"""Hidden checks for exercise 2: a fresh training run drawn at grading time.

One run is shared by the four checks (compiles are the expensive part): a model of random
size, 14 batches of random batch size whose 14 distinct lengths touch every bucket of
BUCKETS = (8, 16, 32, 64), end strictly inside each bucket range at least once and equal a
bucket length other than the largest at least once, and a decaying learning rate.  The run
is drawn from `compiles_at_most_buckets`' generator and its COVERAGE entry says what it
holds at every seed; `padding_and_mask` also pads batches with a second bucket list drawn
from its own generator (its own COVERAGE entry).  A failed check tells the learner what is
true of the failure (``diagnosis``/``advice``), never a drawn length, shape or value.  The probes pad the batches (``ex02_retrace:pad_batches``), then
step through them (``ex02_retrace:train_steps``, measured: its compile count is judged
against the reference solution's run of the same two requests); the references
(``grader/exercises/ex02_retrace/judges.py``) are plain NumPy (float64, hand-written gradient) on
the UNPADDED batches.
"""

import numpy as np
import pytest

from grader.coverage import Coverage, check_rng, ensure
from grader.exercises.ex02_retrace.judges import DTYPE_HINT, bucket_of, dtype_problem, expect_bucketed_compiles, \
    expect_host_padding, expect_step_in_jax, reference_step, training_outcome, unwrap
from grader.feedback import CheckFailed, describe

BUCKETS = (8, 16, 32, 64)
N_STEPS = 14


RUN_TEST = "test_compiles_at_most_buckets"  # the training run is drawn from this test's generator


def draw_case(rng):
    batch, vocab, dim = int(rng.integers(3, 7)), int(rng.integers(12, 33)), int(rng.integers(3, 9))
    params = {
        "embed": rng.normal(size=(vocab, dim)).astype(np.float32),
        "w": (rng.normal(size=dim) / np.sqrt(dim)).astype(np.float32),
        "b": np.asarray(rng.normal(), np.float32),
    }
    # One length strictly inside every bucket range (so padding really happens there), one
    # equal to a bucket length other than the largest (no padding; the bucket is the length's own) ...
    lows = (0,) + BUCKETS[:-1]
    lengths = [int(rng.integers(lo + 1, hi)) for lo, hi in zip(lows, BUCKETS)]
    lengths.append(int(rng.choice(BUCKETS[:-1])))
    # ... and the rest distinct too, anywhere up to the largest bucket.
    pool = [n for n in range(1, BUCKETS[-1] + 1) if n not in lengths]
    lengths += [int(n) for n in rng.choice(pool, size=N_STEPS - len(lengths), replace=False)]
    rng.shuffle(lengths)
    batches = [{"tokens": rng.integers(0, vocab, size=(batch, n)).astype(np.int32),
                "targets": rng.normal(size=(batch, n)).astype(np.float32)} for n in lengths]
    base = float(rng.uniform(0.05, 0.3))
    lrs = [base / (1.0 + 0.05 * t) for t in range(N_STEPS)]
    return {"params": params, "batches": batches, "lengths": lengths, "lrs": lrs}


def draw_training_case(seed):
    return draw_case(check_rng(seed, RUN_TEST))


def length_labels(lengths, buckets):
    """Which kinds of sequence length a draw holds, for a bucket list."""
    out = set()
    lows = (0,) + tuple(buckets[:-1])
    for i, (lo, hi) in enumerate(zip(lows, buckets)):
        if any(lo < n < hi for n in lengths):
            out.add("inside the first range" if i == 0 else f"inside range {i + 1}")
    if any(n in buckets[:-1] for n in lengths):
        out.add("equal to a bucket other than the largest")
    return out


def run_labels(rng):
    case = draw_case(rng)
    out = length_labels(case["lengths"], BUCKETS)
    if len(set(case["lengths"])) == N_STEPS and len({round(lr, 12) for lr in case["lrs"]}) == N_STEPS:
        out.add("distinct lengths and learning rates")
    return out


def draw_other_buckets(rng):
    """A second bucket list (three lengths in 2..40, at least 2 apart) and five batches: one
    length inside the first range, one inside the second, one equal to a bucket other than the
    largest, two anywhere."""
    while True:
        buckets = tuple(int(b) for b in np.sort(rng.choice(np.arange(2, 41), size=3, replace=False)))
        if buckets[1] - buckets[0] >= 2 and buckets[2] - buckets[1] >= 2:
            break
    lengths = [int(rng.integers(1, buckets[0])), int(rng.integers(buckets[0] + 1, buckets[1])),
               int(rng.choice(buckets[:-1]))] + [int(n) for n in rng.integers(1, buckets[-1] + 1, size=2)]
    rng.shuffle(lengths)
    batches = [{"tokens": rng.integers(0, 9, size=(2, n)).astype(np.int32),
                "targets": rng.normal(size=(2, n)).astype(np.float32)} for n in lengths]
    return buckets, batches


def other_bucket_labels(rng):
    buckets, batches = draw_other_buckets(rng)
    return length_labels([b["tokens"].shape[1] for b in batches], buckets)


RUN_REQUIRED = {"inside the first range", "inside range 2", "inside range 3", "inside range 4",
                "equal to a bucket other than the largest", "distinct lengths and learning rates"}
OTHER_REQUIRED = {"inside the first range", "inside range 2", "equal to a bucket other than the largest"}
COVERAGE = {
    "compiles_at_most_buckets": Coverage(required=RUN_REQUIRED, labels=run_labels, test=RUN_TEST),
    "padding_and_mask": Coverage(required=OTHER_REQUIRED, labels=other_bucket_labels, test="test_padding_and_mask"),
}


@pytest.fixture(scope="module")
def training_run(submission, reference, seed):
    """One training run shared by this file's checks: (case, probe output, error)."""
    ensure("compiles_at_most_buckets", RUN_REQUIRED, run_labels(check_rng(seed, RUN_TEST)))
    return training_outcome(submission, reference, seed, draw_training_case, BUCKETS)


# --- shared judging helpers ----------------------------------------------------------------
def fail_padding(what, message, *, measured, expected, hint, diagnosis):
    raise CheckFailed(f"{what}: {message}", measured=measured, expected=expected, hint=hint,
                      diagnosis=f"{what}: {diagnosis}", advice=hint)


def check_padded(batch, got, buckets, what):
    """``got`` = (tokens_p, targets_p, mask) for ``batch``; raises CheckFailed whose diagnosis
    names no length, shape or value (``what`` names none either)."""
    tokens, targets = batch["tokens"], batch["targets"]
    rows, length = tokens.shape
    width = bucket_of(length, buckets)
    names = ("tokens_p", "targets_p", "mask")
    for name, arr in zip(names, got):
        if not isinstance(arr, np.ndarray) or arr.ndim != 2:
            fail_padding(what, f"{name} should be a 2-D array", measured=describe(arr),
                         expected="an array of shape [B, bucket length]",
                         hint="return NumPy (or JAX) arrays: (tokens_p, targets_p, mask)",
                         diagnosis=f"{name} is not a 2-D array")
        if arr.shape[0] != rows:
            fail_padding(what, f"{name} has a different batch size than the batch",
                         measured=f"{arr.shape[0]} rows", expected="as many rows as the input",
                         hint="pad only the sequence axis (axis 1), never the batch axis",
                         diagnosis=f"{name} does not have as many rows (sequences) as the input batch")
        if arr.shape[1] != width:
            kind = ("not_bucket" if arr.shape[1] not in buckets else "too_long" if arr.shape[1] > width else
                    "too_short")
            fail_padding(
                what, f"{name} was padded to the wrong length",
                measured={"not_bucket": "a width that is not one of the bucket lengths",
                          "too_long": f"padded width {arr.shape[1]}; a smaller bucket also fits the batch",
                          "too_short": f"padded width {arr.shape[1]}; that bucket is shorter than the batch"}[kind],
                expected="the SMALLEST bucket length >= the batch's sequence length",
                hint={"not_bucket": "pad to a bucket length: widths that are not bucket lengths give a new shape, "
                                    "and a new compile, per batch",
                      "too_long": "take the smallest bucket b with b >= L: a length equal to a bucket needs no "
                                  "padding, and padding short batches to a longer bucket wastes work",
                      "too_short": "the bucket must hold the whole sequence: the smallest b with b >= L"}[kind],
                diagnosis={"not_bucket": f"{name} has a sequence length that is not one of the bucket lengths",
                           "too_long": f"{name} was padded to a longer bucket than needed (a smaller bucket "
                                       f"holds the batch)",
                           "too_short": f"{name} was cut or padded to a bucket shorter than the batch"}[kind])
    tok_p, tgt_p, mask = got
    wrong = dtype_problem(tok_p, tgt_p, mask)
    if wrong:
        fail_padding(what, wrong, measured=f"dtypes {tok_p.dtype}, {tgt_p.dtype}, {mask.dtype}",
                     expected="int32 tokens_p, float32 targets_p, a float32 (or bool) mask",
                     hint=DTYPE_HINT, diagnosis=wrong)
    if not np.array_equal(tok_p[:, :length], tokens) or not np.array_equal(tgt_p[:, :length], targets):
        fail_padding(what, "the real tokens/targets are not where they were",
                     measured="the first L columns differ from the input batch",
                     expected="the input in columns 0..L-1, padding after it",
                     hint="pad on the right of the sequence axis: np.pad(x, ((0, 0), (0, Lb - L)))",
                     diagnosis="the real tokens or targets are not in the first positions of each row, unchanged")
    if np.any(tok_p[:, length:] != 0) or np.any(tgt_p[:, length:] != 0):
        fail_padding(what, "padded positions should hold PAD_ID = 0 and PAD_TARGET = 0.0",
                     measured="other values found after the real tokens", expected="zeros",
                     hint="np.pad(..., constant_values=PAD_ID) for the tokens, PAD_TARGET for the targets",
                     diagnosis="the padded positions do not hold PAD_ID = 0 / PAD_TARGET = 0.0")
    expected_mask = np.zeros((rows, width), np.float64)
    expected_mask[:, :length] = 1.0
    if mask.dtype.kind not in "biuf" or not np.array_equal(np.asarray(mask, np.float64), expected_mask):
        numeric = mask.dtype.kind in "biuf"
        fail_padding(what, "the mask does not mark exactly the real tokens",
                     measured=f"mask of dtype {mask.dtype} with "
                              f"{int(np.sum(np.asarray(mask, np.float64) != expected_mask))} wrong entries"
                     if numeric else f"mask of dtype {mask.dtype}",
                     expected="1 on the original L columns, 0 on the padding",
                     hint="mask = np.zeros((B, Lb), np.float32); mask[:, :L] = 1",
                     diagnosis="the mask is not exactly 1 at the real token positions and 0 at the padded positions"
                     if numeric else "the mask is not a numeric (float or bool) array")


def as_params(p, what):
    if not isinstance(p, dict) or sorted(p) != ["b", "embed", "w"]:
        raise CheckFailed(f"{what}: the new parameters should be a dict with keys 'embed', 'w', 'b'",
                          measured=describe(p), expected="dict with keys ['b', 'embed', 'w']",
                          hint="return jax.tree.map(lambda p, g: p - lr * g, params, grads) as new_params",
                          diagnosis="train_step's new parameters are not a dict with the keys 'embed', 'w' and 'b'",
                          advice="return jax.tree.map(lambda p, g: p - lr * g, params, grads) as new_params")
    return p


def as_loss(x, what):
    arr = np.asarray(x) if isinstance(x, (np.ndarray, float, int)) and not isinstance(x, bool) else None
    if arr is None or arr.size != 1:
        raise CheckFailed(f"{what}: the loss should be one number", measured=describe(x), expected="f32[]",
                          hint="return the scalar loss from jax.value_and_grad",
                          diagnosis="train_step's loss is not a single number",
                          advice="return the scalar loss that jax.value_and_grad gives, as (new_params, loss)")
    return float(arr.reshape(()))


def params_before(case, out, t):
    return case["params"] if t == 0 else out["params"][t - 1]


# --- the checks ----------------------------------------------------------------------------
def test_padding_and_mask(training_run, submission, seed, rng):
    case, out = unwrap(training_run)
    for t, (batch, got) in enumerate(zip(case["batches"], out["padded"])):
        check_padded(batch, tuple(got), BUCKETS, f"pad_to_bucket(tokens, targets, {BUCKETS})")
    # The bucket list is an argument: another one, drawn now.
    buckets, batches = draw_other_buckets(rng)
    ensure("padding_and_mask", OTHER_REQUIRED, length_labels([b["tokens"].shape[1] for b in batches], buckets))
    padded = submission.probe("ex02_retrace:pad_batches", batches, buckets)
    compiled = int(submission.last_meter.get("compiles", 0))
    for batch, got in zip(batches, padded):
        check_padded(batch, tuple(got), buckets, "pad_to_bucket with another bucket list")
    expect_host_padding(compiled, "pad_to_bucket with another bucket list")


def test_loss_matches_unpadded(training_run, submission, seed):
    case, out = unwrap(training_run)
    bad = []
    for t, batch in enumerate(case["batches"]):
        params = as_params(params_before(case, out, t), "train_step")
        ref, _ = reference_step(params, batch["tokens"], batch["targets"], case["lrs"][t])
        got = as_loss(out["losses"][t], "train_step")
        if not np.isfinite(got) or not np.isclose(got, ref, rtol=1e-4, atol=1e-5):
            bad.append((t, got, ref))
    if not bad:
        return
    t, got, ref = bad[0]
    finite = [abs(g - r) / max(abs(r), 1e-12) for _, g, r in bad if np.isfinite(g)]
    size = f"relative error up to {100 * max(finite):.3g}%" if finite else "not finite"
    if finite and len(finite) < len(bad):
        size += "; some losses are not finite"
    hint = "loss = sum(mask * (predict(params, tokens) - targets) ** 2) / sum(mask), before the update"
    steps = "every step" if len(bad) == len(case["batches"]) else "some steps"
    diagnosis = f"the loss differs from the mean squared error of the unpadded batch on {steps}"
    try:  # recognise the two classic mistakes from the learner's own padded batch
        tok_p, tgt_p, mask = (np.asarray(a) for a in out["padded"][t])
        params = params_before(case, out, t)
        embed, w, b = (np.asarray(params[k], np.float64) for k in ("embed", "w", "b"))
        padded_err = (np.tanh(embed[np.clip(tok_p.astype(np.int64), 0, embed.shape[0] - 1)]) @ w + b - tgt_p) ** 2
        real = float(np.sum(np.asarray(mask, np.float64)))
        if np.isclose(got, padded_err.mean(), rtol=1e-4, atol=1e-5):
            diagnosis += ": it equals the mean over every position of the padded batch, padding included"
            hint = ("multiply the squared errors by the mask before summing, so padded positions add nothing, and "
                    "divide by the number of real tokens")
        elif np.isclose(got, ref * real / mask.size, rtol=1e-4, atol=1e-5):
            diagnosis += (": the padded positions are masked out, but the sum is divided by the padded size "
                          "B * Lb instead of the number of real tokens")
            hint = "divide by the number of real tokens, mask.sum(), not by B * Lb"
    except Exception:  # noqa: BLE001 - a diagnosis only; the verdict stands without it
        pass
    if "it equals" not in diagnosis and "masked out" not in diagnosis and len(finite) < len(bad):
        diagnosis += ": some losses are NaN or infinite"
    raise CheckFailed(
        "the loss train_step returns is not the loss of the unpadded batch",
        measured=f"{len(bad)} of {len(case['batches'])} steps off; {size}",
        expected="mean squared error over the real tokens only (rtol 1e-4), as mean_token_loss gives it on the "
                 "unpadded batch",
        hint=hint, diagnosis=diagnosis, advice=hint,
    )


def test_update_matches_unpadded(training_run, submission, seed):
    case, out = unwrap(training_run)
    bad_steps, bad_leaves = 0, set()
    for t, batch in enumerate(case["batches"]):
        before = as_params(params_before(case, out, t), "train_step")
        _, ref = reference_step(before, batch["tokens"], batch["targets"], case["lrs"][t])
        after = as_params(out["params"][t], "train_step")
        off = []
        for k in ("embed", "w", "b"):
            got = np.asarray(after[k])
            if got.shape != np.shape(ref[k]) or not np.all(np.isfinite(got)) or \
                    not np.allclose(got, ref[k], rtol=1e-4, atol=1e-5):
                off.append(k)
        if off:
            bad_steps += 1
            bad_leaves.update(off)
    if bad_steps:
        advice = ("take jax.value_and_grad of the MASKED loss (padded positions must get zero gradient, and the "
                  "normaliser must be the number of real tokens), then p - lr * g for every leaf, with the lr of "
                  "that step")
        raise CheckFailed(
            "the parameters after train_step differ from one SGD step on the unpadded batch",
            measured=f"{bad_steps} of {len(case['batches'])} steps off; parameters that differ: "
                     f"{', '.join(sorted(bad_leaves))}",
            expected="new_params = params - lr * grad of the unpadded mean loss (rtol 1e-4), same shapes",
            hint=advice, advice=advice,
            diagnosis=f"the new parameters differ from one SGD step on the unpadded batch on "
                      f"{'every step' if bad_steps == len(case['batches']) else 'some steps'} (parameters that "
                      f"differ: {', '.join(sorted(bad_leaves))})",
        )


def test_compiles_at_most_buckets(training_run, submission):
    case, out = unwrap(training_run)
    n_buckets = len({bucket_of(n, BUCKETS) for n in case["lengths"]})
    expect_bucketed_compiles(out["compiles"], len(case["batches"]), n_buckets, what="the training run",
                             hint_public="")
    expect_step_in_jax(submission, out["compiles"])  # the count floor: the compilations are of JAX doing the work

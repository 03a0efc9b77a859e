"""Exercise 2 (diagnosing retraces): the float64 reference of one training step, the
shared training run and the compile report, shared by the public and the hidden checks.
NumPy only, no JAX."""

from __future__ import annotations

import numpy as np

from grader.feedback import CheckFailed
from grader.sandbox.client import SubmissionError
from grader.testing import Compiles, budget, cache_miss_reasons, changed_arguments, explain, learner_misses, \
    probe_compiles, probe_pair


# --- the model, written out here so the checks do not trust the learner's copy ----------
def reference_step(params, tokens, targets, lr):
    """Loss of an UNPADDED batch and the SGD update of the stub's model, in float64 with a
    hand-written gradient."""
    embed = np.asarray(params["embed"], np.float64)
    w = np.asarray(params["w"], np.float64)
    b = float(np.asarray(params["b"]))
    hidden = np.tanh(embed[tokens])                       # [B, L, D]
    err = hidden @ w + b - np.asarray(targets, np.float64)  # [B, L]
    loss = float(np.mean(err ** 2))
    d_pred = 2.0 * err / err.size
    g_w = np.einsum("bl,bld->d", d_pred, hidden)
    g_b = float(d_pred.sum())
    d_pre = d_pred[..., None] * w * (1.0 - hidden ** 2)
    g_embed = np.zeros_like(embed)
    np.add.at(g_embed, tokens, d_pre)
    return loss, {"embed": embed - lr * g_embed, "w": w - lr * g_w, "b": np.float64(b - lr * g_b)}


def bucket_of(length, buckets):
    """The smallest bucket length that holds ``length``."""
    return min(b for b in buckets if b >= length)


# --- what pad_to_bucket returns, and where it runs ---------------------------------------
DTYPE_HINT = ("build the padded arrays with explicit dtypes: np.zeros((B, Lb), np.int32) for the tokens, np.float32 "
              "for the targets and the mask (np.zeros(..., dtype=int) is int64)")


def dtype_problem(tokens_p, targets_p, mask) -> str:
    """What is wrong with the dtypes of ``pad_to_bucket``'s arrays ("" when nothing): the
    statement asks for int32 tokens, float32 targets and a float32 mask (bool accepted)."""
    wrong = []
    if tokens_p.dtype != np.int32:
        wrong.append(f"tokens_p is {tokens_p.dtype}, not int32")
    if targets_p.dtype != np.float32:
        wrong.append(f"targets_p is {targets_p.dtype}, not float32")
    if mask.dtype not in (np.float32, np.bool_):
        wrong.append(f"the mask is {mask.dtype}, not float32 (or bool)")
    return "; ".join(wrong)


def expect_host_padding(compiles: int, what: str) -> None:
    """``pad_to_bucket`` pads in plain NumPy on the host, as the statement asks: padding
    batches of lengths it has not seen compiles nothing (the reference solution compiles
    nothing there either), where a jitted or ``jnp`` pad compiles once per input length."""
    __tracebackhide__ = True
    if compiles:
        advice = ("pad with NumPy on the host (np.pad or np.zeros plus a slice assignment), not with a jitted "
                  "function or jnp operations: those compile once for every new input length")
        raise CheckFailed(
            f"{what}: padding compiled {compiles} XLA program(s)", measured=f"{compiles} compilation(s) while padding",
            expected="none: plain NumPy on the host", hint=advice, advice=advice,
            diagnosis=f"pad_to_bucket compiled {compiles} XLA program(s) while padding batches of new lengths: it "
                      f"pads with JAX (a jitted function or jnp operations), not with plain NumPy on the host")


# --- the training run a check file's checks share --------------------------------------
def training_outcome(submission, reference, seed, draw_case, buckets):
    """(case, run, error) of one training run: ``pad_to_bucket`` over every batch
    (unmeasured), ``train_step`` once on a [1, 1] batch (``warm_up_calls``, unmeasured), then
    ``train_step`` alone over the padded batches, measured, with the
    reference solution's run of the same two requests beside it (``reference`` may be None).

    Check files run it once in a module-scoped fixture (the compiles are the expensive
    part) and each check calls ``unwrap``, so a submission error fails every check that
    needs the run.  ``draw_case(seed)`` gives {'params', 'batches', 'lrs', ...}."""
    case = draw_case(seed)
    try:
        padded = probe_pair(submission, reference, "ex02_retrace:pad_batches", case["batches"], buckets, "run")
        probe_pair(submission, reference, "generic:warm_up", "train_step", warm_up_calls(case["params"]))
        out, compiles = probe_compiles(submission, reference, "ex02_retrace:train_steps", "run", case["params"],
                                       case["lrs"])
    except SubmissionError as exc:
        return case, None, exc
    return case, {**out, "padded": padded, "compiles": compiles}, None


def warm_up_calls(params) -> list:
    """One ``train_step`` call on a [1, 1] batch (the run's parameters, a fresh copy: the step
    may donate them), made before the measured run and not counted: a one-time conversion of
    the Python float ``lr`` (``jnp.float32(lr)`` compiles a ``convert_element_type`` once per
    process) is an honest step's cost, not a recompile.  No bucket length is 1, so the run's
    own signatures stay unwarmed."""
    one = np.ones((1, 1), np.float32)
    return [{"args": [params, np.zeros((1, 1), np.int32), one * 0.0, one], "kwargs": {"lr": 0.1}}]


def unwrap(outcome):
    """(case, probe output) of a ``training_outcome``, or its submission error raised again."""
    case, out, error = outcome
    if error is not None:
        raise error
    return case, out


def compile_report(compiles: Compiles, n_steps: int, n_buckets: int) -> str:
    """The compiles of a training run, with JAX's own reasons for the retraces
    (instructor-only for hidden checks: signatures name the drawn shapes)."""
    return (f"{n_steps} training steps whose batches fall into {n_buckets} bucket{'s' if n_buckets != 1 else ''}\n"
            + explain(compiles, limit=5))


def expect_bucketed_compiles(compiles: Compiles, n_steps: int, n_buckets: int, *, what: str, hint_public: str) -> None:
    """No more compilations than the reference solution's step makes over the same padded
    batches (one per bucket: ``budget``), and at least one, as the statement says: fewer than
    one per bucket (batches padded longer than their bucket) is the padding check's to judge;
    a failure names the cause JAX gave (a static argument changing, or shapes that are not a
    bucket's), never an input."""
    _, high = budget(compiles, 1, n_buckets)
    count = compiles.counted
    report = compile_report(compiles, n_steps, n_buckets)
    if count < 1:
        raise CheckFailed(
            f"no compilation of train_step was seen during {what}", measured=report,
            expected="between 1 and one compilation per bucket length",
            hint="decorate train_step with @jax.jit (keep its name) and do the whole step inside it",
            diagnosis="0 compilations during the training run: train_step is not jitted, or does its work outside "
                      "the jitted function",
            advice="decorate train_step with @jax.jit and do the whole step inside it")
    if count <= high:
        return
    kinds = " ".join(changed_arguments(learner_misses(compiles, compiles.names() or None)[1:]))
    names = compiles.names()
    if "train_step" not in names and len(names) > 1:
        shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
        cause = (f"no compiled program is train_step; the compilations are of {shown}: operations compiled one by "
                 f"one, as they are when they run eagerly (is train_step jitted, with the whole step inside it?)")
        advice = "decorate train_step with @jax.jit and do the whole step inside it"
    elif "static value" in kinds:
        cause = ("a static argument takes a new value on every step (with `lr` in static_argnames, each new "
                 "learning rate compiles again)")
        advice = "drop static_argnames: pass lr as an ordinary, traced argument"
    elif "shape or dtype" in kinds or "weak type" in kinds:
        cause = "train_step receives more distinct input shapes or types than there are buckets"
        advice = ("pad every batch to the smallest bucket that holds it, so that only bucket lengths reach "
                  "train_step, and keep every argument's dtype the same from step to step")
    else:
        cause = "train_step compiled more often than once per bucket"
        advice = "run the loop yourself with JAX_LOG_COMPILES=1 and JAX_EXPLAIN_CACHE_MISSES=1 and read the causes"
    against = "the reference solution's step makes" if compiles.reference is not None else "are allowed"
    raise CheckFailed(
        f"{count} compilations during {what}; {high} (one per bucket length) {against}",
        measured=report, expected=f"at most {high} compilations", hint=hint_public or advice,
        diagnosis=f"{count} compilations, more than one per bucket: {cause}", advice=advice)


STEP_NEEDS = {"the model's tanh": ("tanh",)}
STEP_IN_JAX_ADVICE = ("do the whole step -- the model, the masked loss, its gradient and the update -- with jax.numpy "
                      "inside your jitted train_step; NumPy on the parameters or the batch runs on the host, and a "
                      "jitted function that does none of the work only makes the compile count look right")


def expect_step_in_jax(submission, compiles: Compiles) -> None:
    """The count floor of the compile checks: ``train_step`` traces with the parameters and
    the padded batch as tracers (``traced:work``; ``lr`` stays a Python float) and holds the
    model's ``tanh``, with no host callback; and so do the programs compiled during the
    measured run (``compiles``: its bucket lengths are not the warm-up's [1, 1] batch;
    ``expect_compiled_work``).  A NumPy step beside a do-nothing jit compiles once per bucket
    too; its program shows that JAX does none of the work."""
    __tracebackhide__ = True
    from grader.traced_work import expect_work_in_jax

    rng = np.random.default_rng(0)
    params = {"embed": rng.normal(size=(6, 3)).astype(np.float32), "w": rng.normal(size=3).astype(np.float32),
              "b": np.asarray(0.1, np.float32)}
    tokens = rng.integers(0, 6, size=(2, 8)).astype(np.int32)
    targets = rng.normal(size=(2, 8)).astype(np.float32)
    mask = np.zeros((2, 8), np.float32)
    mask[:, :5] = 1.0
    found = submission.probe("traced:work", "train_step", [params, tokens, targets, mask], {"lr": 0.1}, [0, 1, 2, 3])
    expect_work_in_jax(found, compiles, what="train_step", needs=STEP_NEEDS, advice=STEP_IN_JAX_ADVICE)

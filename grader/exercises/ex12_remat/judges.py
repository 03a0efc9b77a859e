"""Exercise 12 (remat and donation): draws and verdicts shared by the public and the hidden
checks.  NumPy only; the residual bytes and gradients themselves are measured live by the
probes in ``grader.exercises.ex12_remat.probes``."""

from __future__ import annotations

import math

import numpy as np

from grader import donation
from grader.feedback import CheckFailed, describe


def f32(a):
    return np.asarray(a, np.float32)


def draw_model(rng, depth=None, width=None, batch=None):
    """A deep tanh MLP of square blocks, a batch and targets.  The batch is at most the width."""
    depth = int(rng.integers(4, 8)) if depth is None else depth
    width = int(rng.integers(8, 25)) if width is None else width
    batch = int(rng.integers(4, width + 1)) if batch is None else batch
    params = [{"w": f32(rng.normal(size=(width, width)) / np.sqrt(width)), "b": f32(rng.normal(size=width) * 0.1)}
              for _ in range(depth)]
    return params, f32(rng.normal(size=(batch, width))), f32(rng.normal(size=(batch, width)))


def segment_counts(depth: int) -> dict[int, int]:
    """How many segments each segment size gives: ceil(depth / k)."""
    return {k: math.ceil(depth / k) for k in range(1, depth + 1)}


def draw_segments(rng, depth: int) -> list[int]:
    """Segment sizes 1, depth, and one in between that does not divide depth (so the last
    segment is shorter than the others)."""
    odd = [k for k in range(2, depth) if depth % k]
    return [1, int(rng.choice(odd)), depth]


def segment_labels(depth: int, segments: list[int]) -> set[str]:
    labels = set()
    for k in segments:
        if k == 1:
            labels.add("segment_1")
        elif k == depth:
            labels.add("segment_whole")
        elif depth % k:
            labels.add("segment_not_dividing")
    return labels


def answer_candidates(depth: int) -> list[int]:
    """Segment sizes strictly between 1 and depth that hold fewer segments than the size below
    them: the sizes a budget can single out as the smallest that fits."""
    counts = segment_counts(depth)
    return [k for k in range(2, depth) if counts[k] < counts[k - 1]]


def draw_budget_target(rng, depth: int) -> tuple[int, float]:
    """The answer the budget will single out, and where in its gap the budget sits (0..1)."""
    return int(rng.choice(answer_candidates(depth))), float(rng.uniform(0.15, 0.85))


def budget_for(ref_bytes: dict[int, int], target: int, where: float) -> int:
    """A budget that the target segment size meets and the size below it does not."""
    low, high = ref_bytes[target], ref_bytes[target - 1]
    return int(low + where * (high - low))


# --- verdicts -------------------------------------------------------------------------------------------

def as_int(value, what: str) -> int:
    if type(value) is not int:
        raise CheckFailed(f"{what} should be a Python int", measured=describe(value) if not isinstance(value, dict)
                          else f"a {value.get('type')}", expected="an int",
                          hint="sum int(leaf.nbytes) over the leaves", diagnosis=f"{what} is not a Python int",
                          advice="return a Python int")
    return value


def judge_residual_bytes(rows: list) -> None:
    for row in rows:
        got = row["got"]
        if type(got) is not int or got != row["truth"]:
            ratio = (got / row["truth"]) if type(got) in (int, float) and row["truth"] else None
            if ratio is not None and abs(ratio - 0.25) < 1e-9:
                advice = "you counted elements, not bytes: use leaf.nbytes (a float32 element is 4 bytes)"
            elif type(got) is not int:
                advice = "return a Python int: the sum of int(leaf.nbytes) over the residual leaves"
            else:
                advice = ("residuals are the leaves of the function jax.vjp returns, jax.vjp(f, *args)[1] -- "
                          "not the primal output, not the arguments' bytes: sum nbytes over "
                          "jax.tree.leaves(jax.vjp(f, *args)[1])")
            raise CheckFailed(
                f"residual_bytes is wrong for the grader's function with {row['function']}",
                measured=f"residual_bytes returned {got!r}", expected=f"{row['truth']} bytes",
                hint=advice, diagnosis=f"residual_bytes is wrong for a function with {row['function']}",
                advice=advice)


def judge_gradients(got: dict, want: dict, segment: int, depth: int, *, hidden: bool) -> None:
    where = ("with one block per segment" if segment == 1 else "with the whole network in one segment"
             if segment == depth else "with a segment size that leaves a shorter last segment")
    loss = got["loss"]
    if not isinstance(loss, np.ndarray) or loss.shape != () or not np.isclose(loss, want["loss"], rtol=1e-5, atol=1e-6):
        raise CheckFailed(
            f"remat_loss(params, x, y, {segment}) differs from loss(params, x, y)",
            measured=f"{loss!r}", expected=f"{float(want['loss']):.6g}",
            hint="remat changes what is saved, never the value: every block must run once, in order, in float32",
            diagnosis=f"the value of remat_loss {where} differs from the plain loss",
            advice="checkpointing changes what is saved, never what is computed: run every block exactly once, in "
                   "order (the last segment may be shorter), in float32, then the same head")
    for i, (g, w) in enumerate(zip(got["grads"], want["grads"])):
        for k in ("w", "b"):
            a, b = g.get(k) if isinstance(g, dict) else None, w[k]
            if not isinstance(a, np.ndarray) or a.shape != b.shape or not np.allclose(a, b, rtol=1e-4, atol=1e-6):
                raise CheckFailed(
                    f"the gradient of remat_loss(..., {segment}) differs from the plain loss's "
                    f"(block {i}, {k})",
                    measured=describe(a) if not isinstance(a, np.ndarray) or a.shape != b.shape else
                    f"largest difference {float(np.max(np.abs(a - b))):.3g}",
                    expected="the gradient of loss(params, x, y) (rtol 1e-4)",
                    hint="checkpointing must not change gradients: no stop_gradient, no casts of saved values",
                    diagnosis=f"the gradient of remat_loss {where} differs from the plain loss's",
                    advice="jax.checkpoint never changes gradients by itself: look for a dropped block, a "
                           "stop_gradient or a cast to a smaller dtype at a segment boundary")


#: Below the grader's segment checkpointing, bytes a remat_loss may keep fewer of and still be
#: it: a scalar literal or two that a jitted version does not keep (README: 4 bytes).  One
#: segment fewer saves a whole activation (at least batch x width x 4 bytes, hundreds).
FEWER_BYTES_ALLOWED = 16


def judge_remat_bytes(got: list, want: list, segments: list, depth: int, *, hidden: bool) -> None:
    for k, g, w in zip(segments, got, want):
        where = ("with one block per segment" if k == 1 else "with the whole network in one segment"
                 if k == depth else "with a segment size that leaves a shorter last segment")
        if g > w:
            advice = ("put whole blocks (the matmul and the tanh) under jax.checkpoint, with its default policy "
                      "(nothing inside a segment is saved); a policy such as dots_saveable keeps every matmul's "
                      "output, and checkpointing only the tanh still saves the matmul")
            raise CheckFailed(
                f"remat_loss(..., {k}) saves more for the backward pass than segment checkpointing does",
                measured=f"{g} residual bytes", expected=f"at most {w} (the grader's segment checkpointing)",
                hint=advice, diagnosis=f"remat_loss {where} saves more residual bytes than checkpointing each "
                                       f"segment of whole blocks", advice=advice)
        if g < w - FEWER_BYTES_ALLOWED:
            advice = ("run each segment of `segment` whole blocks under its own jax.checkpoint, so the input of "
                      "every segment is saved; one checkpoint around the whole network saves less, but it is "
                      "not the segment size asked for")
            raise CheckFailed(
                f"remat_loss(..., {k}) saves less for the backward pass than checkpointing segments of {k} "
                f"block(s): it does not checkpoint the segments asked for",
                measured=f"{g} residual bytes", expected=f"{w} (the grader's segment checkpointing)",
                hint=advice, diagnosis=f"remat_loss {where} saves fewer residual bytes than checkpointing each "
                                       f"segment of {k} block(s) would: the segment size is not honoured",
                advice=advice)


def judge_choice(out: dict, budget: int, depth: int, *, hidden: bool) -> None:
    k = out["segment"]
    if type(k) is not int or not 1 <= k <= depth:
        raise CheckFailed(
            "choose_segment should return a segment size between 1 and the number of blocks",
            measured=f"it returned {k!r}", expected=f"an int in 1..{depth}",
            hint="try k = 1, 2, ... and return the first whose residual bytes fit the budget",
            diagnosis="choose_segment did not return an int between 1 and the number of blocks",
            advice="try segment sizes 1, 2, ... and return the first whose residual bytes fit the budget")
    if out["bytes"] > budget:
        raise CheckFailed(
            f"choose_segment's answer ({k}) does not fit the budget",
            measured=f"remat_loss(..., {k}) keeps {out['bytes']} residual bytes", expected=f"at most {budget}",
            hint="measure, do not estimate: the residuals hold the parameters and the input too",
            diagnosis="remat_loss at the chosen segment size keeps more residual bytes than the budget",
            advice="measure each candidate with residual_bytes (the residuals include the parameters and the "
                   "input, not only the saved activations) and return the first that fits")
    if k > 1 and out["bytes_before"] <= budget:
        raise CheckFailed(
            f"choose_segment's answer ({k}) fits, but so does the smaller segment size {k - 1}",
            measured=f"remat_loss(..., {k - 1}) keeps {out['bytes_before']} bytes, within the budget {budget}",
            expected="the smallest segment size that fits",
            hint="smaller segments save more boundaries but recompute less at a time: return the SMALLEST size "
                 "that fits, not the largest (remat everything always fits)",
            diagnosis="a smaller segment size also fits the budget: the answer is not the smallest that fits",
            advice="scan k = 1, 2, ... upwards and stop at the first size that fits; checkpointing everything in "
                   "one segment always fits, but it is not what the budget asks for")


def judge_momentum_step(out, params, momentum, lr, beta, ref: dict) -> None:
    if type(out) not in (tuple, list) or len(out) != 3:
        raise CheckFailed("train_step should return (new_params, new_momentum, loss)", measured=describe(out),
                          expected="a tuple of three", hint="return new_params, new_momentum, loss",
                          diagnosis="train_step does not return (new_params, new_momentum, loss)",
                          advice="return new_params, new_momentum, loss")
    new_p, new_m, loss = out
    if not isinstance(loss, np.ndarray) or loss.shape != () or not np.isclose(loss, ref["loss"], rtol=1e-5, atol=1e-6):
        raise CheckFailed("train_step's loss differs from the loss at the parameters passed in",
                          measured=f"{loss!r}", expected=f"{float(ref['loss']):.6g}",
                          hint="return the loss of the parameters you were given",
                          diagnosis="the returned loss is not the loss at the parameters passed in",
                          advice="return the value from jax.value_and_grad at the parameters you were given")
    for i, layer in enumerate(ref["grads"]):
        for k in ("w", "b"):
            g = np.asarray(layer[k], np.float64)
            m_want = beta * np.asarray(momentum[i][k], np.float64) + g
            p_want = np.asarray(params[i][k], np.float64) - lr * m_want
            for name, got, want, what in (("momentum", new_m, m_want, "new momentum"),
                                          ("params", new_p, p_want, "new parameters")):
                arr = got[i].get(k) if type(got) in (list, tuple) and i < len(got) and isinstance(got[i], dict) else None
                if not isinstance(arr, np.ndarray) or arr.shape != want.shape or \
                        not np.allclose(arr, want, rtol=2e-5, atol=1e-6):
                    advice = ("momentum first, then the parameters with the NEW momentum: m = beta * m + g; "
                              "p = p - lr * m")
                    raise CheckFailed(
                        f"train_step's {what} differ from SGD with momentum (block {i}, {k})",
                        measured=describe(arr) if not isinstance(arr, np.ndarray) or arr.shape != want.shape else
                        f"largest difference {float(np.max(np.abs(arr - want))):.3g}",
                        expected="m' = beta * m + grad; p' = p - lr * m' (rtol 2e-5)", hint=advice,
                        diagnosis=f"the {what} after one step differ from SGD with momentum", advice=advice)


def judge_donation(out: dict) -> None:
    donation.judge_donation(out, state="momentum", state_key="momentum_deleted")

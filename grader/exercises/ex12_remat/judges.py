"""Exercise 12 (remat and donation): draws and verdicts shared by the public and the hidden
checks.  NumPy only; the residual bytes and gradients themselves are measured live by the
probes in ``grader.exercises.ex12_remat.probes``."""

from __future__ import annotations

import math

import numpy as np

from grader import donation, jaxcompat
from grader.feedback import (CheckFailed, describe, expect_jit_own, expect_traced_program_computes,
                             expect_traced_program_runs, traced_error)


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


def budget_for(ref_bytes: dict[int, int], target: int, where: float) -> int:
    """A budget that the target segment size meets and the size below it does not
    (``ref_bytes[0]``: no remat at all, the level above segment size 1)."""
    low, high = ref_bytes[target], ref_bytes[target - 1]
    return int(low + where * (high - low))


def budget_targets(depth: int) -> list[int]:
    """Every answer a budget can single out: 1, each size that makes fewer segments than the
    size below it, and the depth (one segment).  The last gap, between depth - 1 and depth,
    is always one activation wide (two segments against one), so an estimate off by one
    activation misses it."""
    return [1] + answer_candidates(depth) + [depth]


def draw_budgets(rng, depth: int) -> list[tuple[int, float]]:
    """One budget per answer, each somewhere in its gap (0..1 from its level to the level
    above), and one more exactly at the level of an answer below the depth (``<=``, not
    ``<``: 0.0), in random order.  Not at the depth's level: a search that finds nothing
    and falls back on the depth would pass there by luck."""
    targets = budget_targets(depth)
    budgets = [(t, float(rng.uniform(0.15, 0.85))) for t in targets]
    budgets.append((int(rng.choice(targets[:-1])), 0.0))
    return [budgets[i] for i in rng.permutation(len(budgets))]


def segments_of(depth: int, k: int) -> int:
    return math.ceil(depth / k)


def budget_labels(depth: int, budgets: list[tuple[int, float]]) -> set[str]:
    """Coverage categories of a set of budgets: the answers 1, the depth and one between; a
    budget exactly at a level below the depth's; and a budget inside a gap one activation
    wide (one segment fewer) whose answer is not the depth (an estimate one activation off
    answers the next size down there, and no fallback hides it)."""
    labels = set()
    for target, where in budgets:
        labels.add("answer_1" if target == 1 else "answer_depth" if target == depth else "answer_between_1_and_depth")
        if where == 0.0 and target < depth:
            labels.add("budget_at_a_level")
        if where > 0.0 and 1 < target < depth and segments_of(depth, target - 1) - segments_of(depth, target) == 1:
            labels.add("gap_of_one_activation")
    return labels


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


def judge_choices(answers: list, budgets: list[int], levels: dict[int, int], depth: int, *, hidden: bool) -> None:
    """``choose_segment``'s answer for each budget, judged on the grader's own measured
    levels (``levels[k]``: what segment checkpointing at ``k`` keeps; every budget is at least
    ``levels[depth]``).  Every answer is judged before one diagnosis is chosen: a strict ``<``
    and an estimate one activation off both miss a budget exactly at a level, and only the
    estimate also misses budgets inside a gap."""
    for k in answers:
        if type(k) is not int or not 1 <= k <= depth:
            raise CheckFailed(
                "choose_segment should return a segment size between 1 and the number of blocks",
                measured=f"it returned {k!r}", expected=f"an int in 1..{depth}",
                hint="try k = 1, 2, ... and return the first whose residual bytes fit the budget",
                diagnosis="choose_segment did not return an int between 1 and the number of blocks",
                advice="try segment sizes 1, 2, ... and return the first whose residual bytes fit the budget")
    sizes = range(1, depth + 1)
    wrong = []  # (answer, budget, the smallest size that fits)
    for k, budget in zip(answers, budgets):
        smallest = min((j for j in sizes if levels[j] <= budget), default=depth)
        if k != smallest:
            wrong.append((k, budget, smallest))
    if not wrong:
        return
    lines = "\n".join(f"budget {budget}: your answer {k} (segment checkpointing at {k} keeps {levels[k]} bytes); "
                       f"the smallest that fits is {smallest} (keeps {levels[smallest]})" for k, budget, smallest in wrong)
    lines += ("\n(bytes measured on the grader's own segment checkpointing: a remat_loss that keeps other bytes "
              "fails remat_saves_like_segments too)")
    over = [w for w in wrong if levels[w[0]] > w[1]]
    if over:
        raise CheckFailed(
            f"choose_segment's answer ({over[0][0]}) does not fit the budget",
            measured=lines, expected="the smallest segment size whose residual bytes are at most the budget",
            hint="measure, do not estimate: the residuals hold the parameters and the input too",
            diagnosis="remat_loss at the chosen segment size keeps more residual bytes than the budget",
            advice="measure each candidate with residual_bytes (the residuals include the parameters and the "
                   "input, not only the saved activations) and return the first that fits")
    strict = all(levels[smallest] == budget and k == min((j for j in sizes if levels[j] < budget), default=depth)
                 for k, budget, smallest in wrong)
    if strict:
        raise CheckFailed(
            f"choose_segment refused segment size {wrong[0][2]}, which keeps exactly the budget",
            measured=lines, expected="'at most budget': a size that keeps exactly the budget fits",
            hint="compare with <= budget, not < budget",
            diagnosis="a segment size that keeps exactly the budget was refused: the comparison is strict",
            advice="a size fits when its residual bytes are at most the budget: compare with <=")
    k, budget, smallest = wrong[0]
    raise CheckFailed(
        f"choose_segment's answer ({k}) fits, but so does the smaller segment size {smallest}",
        measured=lines, expected="the smallest segment size that fits",
        hint="measure each size with residual_bytes, do not estimate (one activation off is one size too far), "
             "and return the SMALLEST size that fits, not the largest (remat everything always fits)",
        diagnosis="a smaller segment size also fits the budget: the answer is not the smallest that fits",
        advice="scan k = 1, 2, ... upwards, measure remat_loss's residual bytes at each with residual_bytes (an "
               "estimate can be off by an activation), and stop at the first size that fits; checkpointing "
               "everything in one segment always fits, but it is not what the budget asks for")


def judge_head_outside(flags: list, segments: list, depth: int) -> None:
    """``flags[i]``: whether ``remat_loss(..., segments[i])`` checkpoints ``y`` together with a
    block's parameters, in the program whose bytes were judged (probe ``remat_traced``)."""
    for k, inside in zip(segments, flags):
        if inside:
            advice = ("run the segments of blocks under jax.checkpoint, then compute 0.5 * mean(sum((h - y) ** 2)) "
                      "on their output, outside any checkpoint: y belongs to the head, not to a segment")
            raise CheckFailed(
                f"remat_loss(..., {k}) runs the head (the mean squared error) inside a checkpointed segment",
                measured="a jax.checkpoint in remat_loss's jaxpr takes y together with a block's parameters",
                expected="every checkpoint takes blocks' parameters and an activation; y is used outside them",
                hint=advice, diagnosis="the head (the mean squared error) is inside a checkpointed segment",
                advice=advice)


def block_inputs(params, x) -> list:
    """The input of every block of the model, and the last block's output: ``h_0 = x``,
    ``h_{j+1} = tanh(h_j @ w_j + b_j)`` (float64 on float32 parameters), ``depth + 1`` arrays."""
    h = [np.asarray(x, np.float64)]
    for p in params:
        h.append(np.tanh(h[-1] @ np.asarray(p["w"], np.float64) + np.asarray(p["b"], np.float64)))
    return h


#: How far a kept residual may be from a block's input and still be it: float32 arithmetic in
#: another order (XLA's) against float64 drifts by about 1e-6; two different blocks' inputs differ
#: by tenths.
SAME_ACTIVATION = 1e-3


def kept_block_inputs(residuals: list, inputs: list) -> list[int]:
    """Which blocks' inputs (indices into ``inputs`` but the last, the network's output, which the
    head may keep) are among ``residuals``: a residual leaf holds one when one of its consecutive
    pieces of that size equals it, as laid out or transposed (a ``scan`` over segments keeps its
    inputs stacked; the layout of what an honest program keeps is not the point)."""
    return [j for j, h in enumerate(inputs[:-1]) if any(_holds(np.asarray(r), h) for r in residuals)]


def _holds(residual, h) -> bool:
    if not residual.size or residual.size % h.size:
        return False
    pieces = residual.reshape(-1, h.size)
    return any(np.max(np.abs(pieces - want.reshape(-1)), axis=1).min() <= SAME_ACTIVATION for want in (h, h.T))


def judge_segments_kept(residuals: list, params, x, segments: list, depth: int) -> None:
    """``residuals[i]``: the values of the residuals ``remat_loss(..., segments[i])`` keeps under
    ``jax.vjp`` (probe ``remat_traced``).  Checkpointing consecutive segments of ``k`` blocks keeps
    exactly the inputs of blocks 0, k, 2k, ...: the bytes count those boundaries, this says where
    they are, so segments of other sizes ([1, 1, 4] for 6 blocks at k = 2: as many checkpoints, as
    many bytes) fail whatever their number."""
    inputs = block_inputs(params, x)
    for k, kept in zip(segments, residuals):
        got, want = kept_block_inputs(kept, inputs), list(range(0, depth, k))
        if got != want:
            sizes = [b - a for a, b in zip(want, want[1:] + [depth])]
            advice = (f"group the blocks in order into consecutive segments of `segment` blocks -- params[0:{k}], "
                      f"params[{k}:{2 * k}], ... (for {depth} blocks: {sizes}; only the last may be shorter) -- and "
                      f"run each under its own jax.checkpoint, so that the backward pass keeps each segment's input")
            raise CheckFailed(
                f"remat_loss(..., {k}) does not checkpoint consecutive segments of {k} block(s): the backward pass "
                f"keeps the inputs of other blocks",
                measured=f"among jax.vjp's residuals, the inputs of blocks {got} (block 0's input is x)",
                expected=f"the inputs of blocks {want}: where segments of {k} block(s) begin", hint=advice,
                diagnosis=f"remat_loss's segments are not consecutive runs of `segment` blocks (the last may be "
                          f"shorter): it keeps the inputs of blocks {got}, not {want}", advice=advice)


#: what the momentum update adds to remat_loss's gradient outside the checkpoints (leaf by leaf
#: ``beta * m + g`` and ``p - lr * m``, with the casts and calls around them); any other primitive
#: more often there than in remat_loss's gradient alone is work of another gradient
UPDATE_PRIMITIVES = frozenset({"mul", "add", "add_any", "sub", "neg", "convert_element_type", "broadcast_in_dim",
                               "copy", "copy_p", "pjit", "jit"})


def judge_step_structure(facts: dict, params, momentum, lr, beta, ref: dict) -> None:
    """``facts``: a ``step_primitives`` answer, ``train_step`` traced once under the grader's
    jit, its primitive counts and that very program's outputs.  The step must be JAX's work: a
    callback runs Python on the host (a NumPy step inside one compiles once, donates and gives
    the right numbers), and without a checkpoint equation it is not remat_loss's gradient.

    The counts are judged only once the traced program's own outputs are SGD with momentum on
    ``ref`` (the value check's), and only for a step that is exactly what ``jax.jit`` returns:
    the value and compile checks call the learner's own step (a compile count needs its own
    jit), and only jax.jit's own function is bound to trace its body, tracers and all, on every
    call -- a Python function in front of it can run another program on arrays."""
    __tracebackhide__ = True
    expect_jit_own(bool(facts.get("jitted")), "train_step", why="the program its calls run",
                   decorator="@partial(jax.jit, donate_argnums=(0, 1))")
    how = " (lr and beta traced)"
    expect_traced_program_runs(traced_error(facts), "train_step", how=how)
    try:
        judge_momentum_step(facts["outputs"], params, momentum, lr, beta, ref)
        wrong = None
    except CheckFailed as exc:
        wrong = exc
    expect_traced_program_computes(wrong is None, "train_step", "compute SGD with momentum on remat_loss's gradient",
                                   measured=str(wrong) if wrong is not None else "",
                                   expected="what the value check accepts", how=how)
    primitives = facts["primitives"]
    callbacks = sorted(p for p in primitives if p in jaxcompat.CALLBACK_PRIMITIVES)
    if callbacks:
        raise CheckFailed(
            "train_step computes its step in a host callback, outside what JAX traces and compiles",
            measured=f"train_step's jaxpr holds {', '.join(callbacks)}",
            expected="the step traced end to end: remat_loss's checkpointed blocks, its gradient and the update",
            hint="write the step with jax.value_and_grad and jax.tree.map, not NumPy in a callback",
            diagnosis=f"train_step hands its work to Python through {', '.join(callbacks)}",
            advice="compute the loss, gradient and update with JAX inside the jitted step: "
                   "jax.value_and_grad(remat_loss)(params, x, y, SEGMENT), then jax.tree.map")
    if not any(primitives.get(p, 0) for p in jaxcompat.REMAT_PRIMITIVES):
        raise CheckFailed(
            "train_step does not differentiate remat_loss: its jaxpr has no checkpointed segment",
            measured=f"no jax.checkpoint equation (primitive {jaxcompat.REMAT_PRIMITIVES[0]}) in train_step's "
                     f"jaxpr, nested jaxprs included",
            expected="the gradient of remat_loss(params, x, y, SEGMENT): jax.checkpoint equations in the step",
            hint="jax.value_and_grad(remat_loss)(params, x, y, SEGMENT), not the plain loss",
            diagnosis="train_step takes the gradient of the plain loss (or of something without remat), not of "
                      "remat_loss: the same numbers, but the step keeps every activation",
            advice="differentiate remat_loss(params, x, y, SEGMENT): the step is where remat saves memory")
    if facts.get("head_inside"):  # remat_traced reads it under jax.vjp; here as training runs it
        advice = ("run the segments of blocks under jax.checkpoint, then compute 0.5 * mean(sum((h - y) ** 2)) on "
                  "their output, outside any checkpoint, whatever transformation calls remat_loss")
        raise CheckFailed(
            "in train_step, remat_loss runs the head (the mean squared error) inside a checkpointed segment",
            measured="a jax.checkpoint in train_step's jaxpr takes y together with a block's parameters",
            expected="every checkpoint takes blocks' parameters and an activation; y is used outside them",
            hint=advice, diagnosis="the head is inside a checkpointed segment in the training step", advice=advice)
    seen = facts.get("checkpoints")
    if seen and seen["train_step"] != seen["remat_loss"]:  # the byte check measured remat_loss under jax.vjp
        other = sorted(set(seen["train_step"]) - set(seen["remat_loss"]))  # no counts: they follow the drawn depth
        advice = ("checkpoint each segment the same way whatever transformation calls remat_loss: the byte check "
                  "measures remat_loss under jax.vjp, and train_step's gradient must keep what it measured")
        raise CheckFailed(
            "in train_step, remat_loss checkpoints differently from how it does on its own",
            measured=("checkpoint policies only in train_step's jaxpr: " + ", ".join(other))[:400] if other else
            "the same policies, but another number of checkpointed segments in train_step's jaxpr",
            expected="exactly the checkpoints of remat_loss(params, x, y, SEGMENT) under jax.vjp",
            hint=advice, diagnosis="under the training step's gradient remat_loss saves differently from what the "
                                   "grader measured", advice=advice)
    shapes = facts.get("segments")
    if shapes and shapes["train_step"] != shapes["remat_loss"]:  # as many checkpoints, other blocks in them
        advice = ("checkpoint the same segments whatever transformation calls remat_loss: consecutive runs of "
                  "SEGMENT blocks (the last may be shorter), as the byte and segment checks measured under jax.vjp")
        raise CheckFailed(
            "in train_step, remat_loss's checkpoints hold other blocks than they do on its own",
            measured=("checkpoints by the blocks each recomputes (its tanh; + between the runs a names policy "
                      "saves apart), in train_step: "
                      f"{_tally_text(shapes['train_step'])}; under jax.vjp: {_tally_text(shapes['remat_loss'])}")[:600],
            expected="the same segments in both", hint=advice,
            diagnosis="under the training step's gradient remat_loss checkpoints segments of other sizes than "
                      "the grader measured", advice=advice)
    outside = facts.get("outside_checkpoints")
    extra = sorted(p for p, n in (outside or {}).get("train_step", {}).items()
                   if p not in UPDATE_PRIMITIVES and n > outside["remat_loss"].get(p, 0))
    if extra:
        advice = ("take the gradient of remat_loss(params, x, y, SEGMENT) and of nothing else: a second gradient (the "
                  "plain loss's, even times zero) keeps every activation again")
        raise CheckFailed(
            "train_step computes a gradient besides remat_loss's: the blocks' work outside every checkpoint",
            measured="outside every checkpoint, train_step's jaxpr has more " + ", ".join(
                f"{p} ({outside['train_step'][p]} vs {outside['remat_loss'].get(p, 0)})" for p in extra[:6])
            + " than remat_loss's gradient alone",
            expected="outside the checkpoints, remat_loss's gradient and the momentum update only",
            hint=advice, diagnosis="the step runs the blocks outside any checkpoint as well: some gradient it takes "
                                   "is not remat_loss's, and keeps every activation", advice=advice)


def _tally_text(tally: dict) -> str:
    return "; ".join(f"{n} of {key}" for key, n in sorted(tally.items()))


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

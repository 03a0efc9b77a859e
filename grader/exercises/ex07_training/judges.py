"""Exercise 7 (the training lab): verdicts shared by the public and the hidden checks.

Each ``judge_*`` takes what a probe measured (plain data) and the grader's reference, and
raises ``CheckFailed``.  ``hidden=True`` keeps drawn values and shapes out of ``diagnosis``
and ``advice`` (the only parts of a hidden check's failure a learner reads); ``measured``
and ``expected`` may name them (instructor-only for hidden checks, shown by public ones).
"""

from __future__ import annotations

import numpy as np

from grader import donation
from grader.compiles import OPAQUE_PRIMITIVES
from grader.exercises.ex07_training.reference import (
    changed_constants,
    entry_fusions,
    expect_one_adam_state,
    per_example,
    tree_close,
)
from grader.feedback import (CheckFailed, describe, expect_jit_own, expect_traced_program_computes,
                             expect_traced_program_runs, traced_error)
from grader.jaxcompat import SCAN_PRIMITIVE, WHILE_PRIMITIVE
from grader.testing import expect_compiles, probe_compiles, probe_pair

STATE_TOL = {"rtol": 2e-5, "atol": 1e-6}


def _changed_note(constants) -> str:
    changed = changed_constants(constants)
    return ("; your module changed " + ", ".join(changed)) if changed else ""


def judge_update(got: dict, ref: dict, regime: str) -> None:
    """make_optimizer's update (and its Adam moments) against optax's chain."""
    expect_one_adam_state(got, "make_optimizer(...).init(params)")
    where = "with the gradient's norm above the clip threshold" if regime == "clip_active" else \
        "with the gradient's norm below the clip threshold"
    for field, what in (("mu", "the first moment mu"), ("nu", "the second moment nu"), ("updates", "the updates")):
        ok, detail = tree_close(got[field], ref[field], **STATE_TOL)
        if not ok:
            if field == "mu" and regime == "clip_active":
                advice = ("the moments see the gradient after clipping: clip_by_global_norm comes FIRST in the "
                          "chain, then adamw")
            elif field == "updates":
                advice = ("the moments match but the updates do not: check that the weight decay is "
                          "adamw's own (optax.adamw(lr, weight_decay=weight_decay), decoupled from the moments, "
                          "not optax.adam, and not adamw's default decay) and that the learning rate is lr")
            else:
                advice = ("chain optax.clip_by_global_norm(clip) and then optax.adamw with learning rate lr and "
                          "weight_decay=weight_decay: the arguments you are given, no other transformation")
            raise CheckFailed(
                f"make_optimizer's update differs from optax's clip-then-AdamW chain {where}: {what}",
                measured=detail, expected="the same values as optax.chain(optax.clip_by_global_norm(clip), "
                                          "optax.adamw(lr, weight_decay=weight_decay)) (rtol 2e-5, atol 1e-6)",
                hint=advice, diagnosis=f"after one update, {what} of make_optimizer's state differ from optax's "
                                       f"chain {where}" + (": the moments match, so look at the weight decay "
                                                           "(adamw's default is not the one given) and the "
                                                           "learning rate" if field == "updates" else ""),
                advice=advice)
    if got["count"] != ref["count"]:
        raise CheckFailed("make_optimizer's update advanced the Adam step count wrongly",
                          measured=f"count {got['count']}", expected=f"count {ref['count']}",
                          hint="one update adds one to the count", diagnosis="the Adam step count is wrong after one update",
                          advice="let optax's adamw keep the count; do not build a new state inside update")


def _batch_multiple(loss, mean) -> int:
    """``k`` when ``loss`` is ``k`` (2 or more) times the mean loss -- a sum over a batch of
    ``k`` examples -- else 0."""
    if not isinstance(loss, np.ndarray) or loss.shape != () or not np.isfinite(loss) or float(mean) <= 0:
        return 0
    ratio = float(loss) / float(mean)
    return int(round(ratio)) if round(ratio) >= 2 and abs(ratio - round(ratio)) < 1e-4 * ratio else 0


def judge_step(got: dict, ref: dict, *, hidden: bool) -> None:
    """One train_step (params, moments, count, loss) against the grader's optax step."""
    note = _changed_note(got.get("constants"))
    expect_one_adam_state(got, "the optimizer state")
    if got.get("returned") != "tuple of 3":
        raise CheckFailed(
            "train_step should return (new_params, new_opt_state, loss)",
            measured=f"it returned a {got.get('returned')}", expected="a tuple of three values",
            hint="return optax.apply_updates(params, updates), new_opt_state, loss",
            diagnosis="train_step does not return a tuple of (new_params, new_opt_state, loss)",
            advice="return optax.apply_updates(params, updates), new_opt_state, loss")
    loss = got["loss"]
    if not isinstance(loss, np.ndarray) or loss.shape != () or not np.isclose(loss, ref["loss"], rtol=1e-5, atol=1e-6):
        advice = "return the value from jax.value_and_grad(loss_fn)(params, x, y), computed before the update"
        summed = _batch_multiple(loss, ref["loss"])
        if summed:  # the loss itself is wrong, not how the step returns it
            advice = (f"the loss is {summed} times the mean: loss_fn sums the cross-entropy over the batch; take "
                      f"the mean over the examples (.mean(), not .sum())")
        raise CheckFailed(
            "the loss train_step returns differs from the mean cross-entropy of the batch, before the update",
            measured=f"loss {describe(loss)} {loss if isinstance(loss, np.ndarray) and loss.size == 1 else ''}",
            expected=f"{float(ref['loss']):.6g} (the loss at the parameters passed in)",
            hint=(advice if summed else "return the loss that jax.value_and_grad(loss_fn) gives for the params you "
                                        "were passed") + note,
            diagnosis=("the returned loss is a sum over the batch, not the mean cross-entropy" if summed else
                       "the returned loss is not the mean cross-entropy of the batch at the parameters passed in")
                      + note,
            advice=advice)
    for field, what in (("mu", "the first moment mu"), ("nu", "the second moment nu"), ("params", "the new parameters")):
        ok, detail = tree_close(got[field], ref[field], **STATE_TOL)
        if not ok:
            if field == "params":
                advice = ("the moments are right but the new parameters are not: apply the updates with "
                          "optax.apply_updates(params, updates) (optax's updates already point downhill: add them), "
                          "and build the optimizer with make_optimizer(LEARNING_RATE, CLIP_NORM, WEIGHT_DECAY)")
            else:
                advice = ("the moments see the clipped gradient of your loss_fn: take jax.grad of loss_fn, and "
                          "update with make_optimizer(LEARNING_RATE, CLIP_NORM, WEIGHT_DECAY), whose chain clips "
                          "first, then runs adamw")
            raise CheckFailed(
                f"one train_step differs from the grader's optax step: {what}",
                measured=detail, expected="the values of optax.chain(clip_by_global_norm, adamw) applied to the "
                                          "gradient of the mean cross-entropy (rtol 2e-5, atol 1e-6)",
                hint=advice + note, diagnosis=f"{what} after one step: not what an optax clip-then-AdamW step gives{note}",
                advice=advice)
    if got["count"] != ref["count"]:
        raise CheckFailed("train_step did not advance the Adam step count by one",
                          measured=f"count {got['count']}", expected=f"count {ref['count']}",
                          hint="return the optimizer state that update gives back",
                          diagnosis="the Adam step count is wrong after one step",
                          advice="return the new optimizer state that optimizer.update returns")


def judge_training(losses: list, n_steps: int, factor: float) -> None:
    if len(losses) != n_steps or not all(np.isfinite(losses)):
        raise CheckFailed(
            "the training run produced non-finite losses",
            measured=f"losses {losses[:5]}...", expected="finite losses",
            hint="train_step must return the batch loss as a scalar",
            diagnosis="a loss during the training run was NaN or infinite",
            advice="check the signs of your update and the loss")
    if not losses[-1] <= factor * losses[0]:
        raise CheckFailed(
            f"the loss did not fall below {factor:g} times its first value over {n_steps} steps on separable data",
            measured=f"first loss {losses[0]:.4g}, last {losses[-1]:.4g}",
            expected=f"last loss at most {factor * losses[0]:.4g}",
            hint="apply the updates with optax.apply_updates(params, updates): optax's updates already include "
                 "the minus sign",
            diagnosis=f"over the training run the loss did not fall below {factor:g} times its first value",
            advice="apply the updates with optax.apply_updates (optax's updates already point downhill) and pass "
                   "train_step's outputs to the next call")


def training_run(submission, reference, hyper, params, x, y, n_steps: int):
    """(losses and record, Compiles) of ``n_steps`` train_steps from the learner's own
    initial state: the state is prepared by one request, the steps run alone in the next,
    measured against the reference solution's run of the same two requests."""
    prepared = probe_pair(submission, reference, "ex07_training:prepare_run", "run", hyper, params, x, y)
    out, compiles = probe_compiles(submission, reference, "ex07_training:train_run", "run", n_steps)
    return dict(out, step_primitives=prepared.get("step_primitives", {}), traced=prepared), compiles


def judge_step_program(run: dict) -> None:
    """The step's work is in the program the run compiled: its matmuls (forward and backward)
    and no host callback.  A step computed in NumPy behind one trivial jitted call compiles
    once too, so the compile count alone cannot see it.

    ``run``: a ``training_run`` answer.  The structure is read from ``train_step`` traced once
    under the grader's jit (``prepare_run``); the compile count needs the learner's own calls,
    so the two are tied: ``train_step`` must be exactly what ``jax.jit`` returns (every call
    then runs a trace of its body, which cannot tell the grader's trace from the run's by
    ``isinstance(x, jax.core.Tracer)``), and the traced program's loss must be the run's
    first loss."""
    __tracebackhide__ = True
    traced, primitives = run.get("traced", {}), run.get("step_primitives", {})
    expect_jit_own(bool(traced.get("jitted")), "train_step", why="the program the run compiled",
                   decorator="@partial(jax.jit, donate_argnums=(0, 1))")
    expect_traced_program_runs(traced_error(traced), "train_step", how=" (on the run's first inputs)")
    loss, first = traced["outputs"]["loss"], (run.get("losses") or [None])[0]
    ok = first is not None and isinstance(loss, np.ndarray) and loss.shape == () and \
        np.isclose(float(loss), first, rtol=1e-4, atol=1e-6)
    expect_traced_program_computes(
        ok, "train_step", "compute the loss the training run's first call returned",
        measured=f"traced program's loss {float(loss) if ok or (isinstance(loss, np.ndarray) and loss.shape == ()) else describe(loss)}"
                 f", the run's first loss {first}", expected="the same loss (rtol 1e-4)",
        how=" (on the run's first inputs)")
    opaque = sorted(set(primitives) & OPAQUE_PRIMITIVES)
    if opaque or not primitives.get("dot_general"):
        raise CheckFailed(
            "train_step's traced program does not hold the step's work",
            measured=(f"host callbacks in it: {', '.join(opaque)}" if opaque else
                      f"no dot_general among its {sum(primitives.values())} equations"),
            expected="the forward pass, its gradient and the optax update, all traced by jax.jit (dot_general "
                     "for every layer's matmul, and no callback)",
            hint="write the step in jax.numpy and let jax.value_and_grad and optax run inside the jitted function",
            diagnosis=("train_step hands its work to the host through a callback" if opaque else
                       "train_step's traced program holds no matrix multiply: the model's work is not in it"),
            advice="compute the loss and its gradient with jax.value_and_grad(loss_fn) inside the jitted "
                   "train_step, and the update with optax, so XLA compiles the whole step")


def judge_compiles(compiles, n_steps: int) -> None:
    expect_compiles(
        compiles, at_least=1, at_most=1, what="train_step",
        hint="jit train_step once, at module level, and pass each step's outputs to the next call",
        advice="decorate train_step itself with jax.jit once, at module level (not a new jax.jit inside a call), "
               "and keep every argument's shape and dtype the same from step to step")


def judge_donation(out: dict) -> None:
    donation.judge_donation(out, state="opt_state", state_key="state_deleted")


def judge_per_example(out, params, x, y, *, what="per_example(params, x, y)", reveal=False) -> None:
    ref_losses, ref_correct, margin = per_example(params, x, y)
    batch = len(y)
    if type(out) not in (tuple, list) or len(out) != 2:
        raise CheckFailed(f"{what} should return (losses, correct)", measured=describe(out),
                          expected="a tuple of two arrays", hint="return the two outputs of the vmapped function",
                          diagnosis="per_example does not return a pair (losses, correct)",
                          advice="return (losses, correct), each with one entry per example")
    losses, correct = out
    for name, arr in (("losses", losses), ("correct", correct)):
        if not isinstance(arr, np.ndarray) or arr.shape != (batch,):
            raise CheckFailed(f"{what}: {name} has the wrong shape or type", measured=describe(arr),
                              expected=f"an array of shape ({batch},)",
                              hint="one entry per example: vmap over the batch axis of x and y",
                              diagnosis=f"`{name}` does not hold one entry per example",
                              advice="vmap a one-example function over the batch axis of x and y (in_axes=(None, 0, 0))")
    if not np.allclose(losses, ref_losses, rtol=1e-4, atol=1e-5):
        i = int(np.argmax(np.abs(losses - ref_losses)))
        raise CheckFailed(
            f"{what}: the per-example losses differ from each example's cross-entropy",
            measured=f"largest difference {float(np.max(np.abs(losses - ref_losses))):.3g}"
                     + (f" at example {i}: got {losses[i]:.6g}" if reveal else ""),
            expected="-log_softmax(logits)[label] for each example" + (f"; there {ref_losses[i]:.6g}" if reveal else ""),
            hint="the loss of one example is -log_softmax(logits)[y], not averaged over the batch",
            diagnosis="the per-example losses are not each example's own cross-entropy",
            advice="for one example: -jax.nn.log_softmax(forward(params, x))[y]; vmap that, with no mean")
    if correct.dtype != np.bool_:
        raise CheckFailed(
            f"{what}: `correct` should be a bool array, not {correct.dtype}",
            measured=f"correct.dtype is {correct.dtype}", expected="bool[B] (the statement's `correct bool[B]`)",
            hint="jnp.argmax(logits) == y is already a bool: return it without .astype(...)",
            diagnosis=f"`correct` has dtype {correct.dtype}; the statement asks for bool[B]",
            advice="for one example return jnp.argmax(logits) == y (a bool), and vmap it")
    sure = margin > 1e-3
    if not np.array_equal(correct[sure], ref_correct[sure]):
        raise CheckFailed(
            f"{what}: `correct` differs from argmax(logits) == label",
            measured=f"{int(np.sum(correct[sure] != ref_correct[sure]))} example(s) disagree",
            expected="a bool array: whether the largest logit is the label's",
            hint="jnp.argmax(logits) == y for one example",
            diagnosis="`correct` is not argmax(logits) == label for every example",
            advice="for one example return jnp.argmax(logits) == y (a bool), and vmap it")


#: How far per_example may stray from the statement's vmapped metric, at every batch size:
#: its jaxpr's equations (one copy of the one-example computation: honest ways of writing it
#: -- log_softmax, optax's cross-entropy, a one-hot sum -- differ by tens of percent, while a
#: Python loop over a batch padded to a fixed size holds one copy per padded example, 32 or
#: more since batches of 32 must be right), and XLA's flops of the compiled program (which
#: follow the batch for every vectorised metric; XLA removes a padded loop's unused copies,
#: so flops alone cannot see one).
MAX_EQN_RATIO = 5.0
MAX_WORK_RATIO = 2.0


def metric_batches(rng) -> list[int]:
    """A small, a middle and a large batch: a padded loop's work cannot follow all three."""
    return [int(rng.integers(2, 5)), int(rng.integers(8, 13)), int(rng.integers(24, 41))]


def judge_metric_work(got: dict, want: dict, *, hidden: bool) -> None:
    """per_example's work per batch size (``metric_cost``) against the statement's vmapped
    metric's (``reference_metric_cost``): no host callback, no JAX loop over the examples,
    a jaxpr that does not grow with the batch, and flops that follow the batch."""
    advice = "write the metric for ONE example with jnp operations and map it with jax.vmap(..., in_axes=(None, 0, 0))"
    small, large = min(got), max(got)
    prims = set().union(*(g["primitives"] for g in got.values()))
    opaque = sorted(prims & OPAQUE_PRIMITIVES)
    if opaque:  # a loop hidden in host code (or a serialized module): no jaxpr would show it
        raise CheckFailed(
            f"per_example calls out of JAX ({', '.join(opaque)}), so its program cannot be read",
            measured=f"the traced program holds {', '.join(opaque)}",
            expected="the metric as JAX operations, mapped over the batch with jax.vmap",
            hint="write the metric for one example with jnp operations and jax.vmap it",
            diagnosis="per_example hands its work to host code (a callback), where the batch may be looped over",
            advice=advice)
    loops = sorted(p for p in prims if p in (SCAN_PRIMITIVE, WHILE_PRIMITIVE))
    if loops:
        raise CheckFailed(
            "per_example loops over the examples with a JAX loop", measured=f"`{'`, `'.join(loops)}` in the jaxpr",
            expected="no scan or while: one batched program", hint=advice,
            diagnosis="per_example's program holds a JAX loop (lax.map, scan, fori_loop or while_loop), which "
                      "processes the examples one after another instead of vectorising them",
            advice="jax.vmap builds one batched program; lax.map and the loops run the examples one by one")
    if got[large]["eqns"] > got[small]["eqns"]:
        raise CheckFailed(
            "per_example's program grows with the batch size: the examples are looped over in Python",
            measured=f"{got[small]['eqns']} jaxpr equations for a batch of {small}, {got[large]['eqns']} for "
                     f"{large}",
            expected="the same number of equations for every batch size", hint=advice,
            diagnosis="the traced program of per_example grows with the batch size (a Python loop over examples)",
            advice=advice)
    eqn_ratios = {b: got[b]["eqns"] / max(want[b]["eqns"], 1) for b in sorted(got)}
    if max(eqn_ratios.values()) > MAX_EQN_RATIO:
        raise CheckFailed(
            f"per_example's program holds many copies of the one-example computation: "
            f"{max(eqn_ratios.values()):.3g} times the equations of the statement's vmapped metric",
            measured="; ".join(f"batch {b}: {got[b]['eqns']} equations (the vmapped metric: {want[b]['eqns']})"
                               for b in sorted(got)),
            expected=f"at most {MAX_EQN_RATIO:g} times the vmapped metric's equations", hint=advice,
            diagnosis="per_example's traced program repeats the one-example computation many times, whatever the "
                      "batch size: a Python loop over a padded batch, which vmap would replace by one batched copy",
            advice=advice)
    ratios = {b: got[b]["flops"] / max(want[b]["flops"], 1.0) for b in sorted(got)}
    off = {b: r for b, r in ratios.items() if not 1 / MAX_WORK_RATIO <= r <= MAX_WORK_RATIO}
    if off:
        worst = max(off, key=lambda b: max(off[b], 1 / max(off[b], 1e-9)))
        more = off[worst] > 1
        raise CheckFailed(
            f"per_example's work does not follow the batch size: {off[worst]:.2g} times the statement's vmapped "
            f"metric's flops at a batch of {worst}",
            measured="; ".join(f"batch {b}: {got[b]['flops']:g} flops (the vmapped metric: {want[b]['flops']:g})"
                               for b in sorted(got)),
            expected=f"within {MAX_WORK_RATIO:g} times the vmapped metric's flops at every batch size",
            hint=advice,
            diagnosis="per_example's compiled work " + (
                "is many times what the batch needs at some batch size: the examples of a fixed-size (padded) batch "
                "are computed whatever the real batch is" if more else
                "is far below what the batch needs at some batch size: the examples are not all computed in one "
                "program") + ", so the metric is not vectorised over the batch",
            advice=advice)


def judge_report(out: dict, *, reveal: bool) -> None:
    truth, rep = out["truth"], out["report"]
    if out.get("runs_as_lowered") is False:
        raise CheckFailed(
            "train_step.lower gives a program other than the one train_step runs",
            measured="the compiled program from train_step.lower and a call of train_step gave different outputs "
                     "on the same inputs",
            expected="the program a call runs", hint="leave the jitted function's attributes as jax.jit made them",
            diagnosis="train_step's lowering is not the program its calls run",
            advice="decorate train_step with jax.jit(..., donate_argnums=(0, 1)) and report on that function")
    if truth is None:
        raise CheckFailed(
            "train_step is not the function jax.jit returns, so it has no compiled program to report on",
            measured="train_step is not a jitted function", expected="a jitted train_step",
            hint="decorate train_step itself with jax.jit (not a Python function that calls one)",
            diagnosis="train_step is not the function jax.jit returns",
            advice="decorate train_step with jax.jit(..., donate_argnums=(0, 1))")
    if rep["type"] != "dict" or set(rep["values"]) != {"flops", "bytes_accessed", "fusions"}:
        raise CheckFailed(
            "report should return a dict with the keys flops, bytes_accessed and fusions",
            measured=f"a {rep['type']}" + (f" with keys {rep.get('keys')}" if rep["type"] == "dict" else ""),
            expected="{'flops': float, 'bytes_accessed': float, 'fusions': int}",
            hint="return {'flops': ..., 'bytes_accessed': ..., 'fusions': ...}",
            diagnosis="report does not return a dict with exactly the keys flops, bytes_accessed and fusions",
            advice="return {'flops': ..., 'bytes_accessed': ..., 'fusions': ...}")
    want = {"flops": truth["flops"], "bytes_accessed": truth["bytes_accessed"], "fusions": entry_fusions(truth["hlo"])}
    wrong = []
    for key, value in want.items():
        got = rep["values"][key]
        if isinstance(got, dict) or isinstance(got, bool) or not np.isclose(float(got), value, rtol=1e-9, atol=0):
            wrong.append((key, got, value))
    if wrong:
        keys = [k for k, _, _ in wrong]
        if "fusions" in keys and rep["values"]["fusions"] == 0:
            advice = ("you read the program before XLA optimized it: lower(...).as_text() is StableHLO, which holds "
                      "no fusions, and lower(...).cost_analysis() is a pre-optimization estimate; call .compile() "
                      "on the lowered step and read the Compiled object")
        elif keys == ["fusions"]:
            advice = ("count the instructions of the ENTRY computation of compiled.as_text() whose opcode is "
                      "fusion: the optimized text starts with tables, and the unoptimized lower().as_text() has "
                      "no fusions at all")
        elif "fusions" in keys and len(keys) == 3:
            advice = ("report on train_step.lower(params, opt_state, x, y).compile() for the arguments you are "
                      "given: not another function, and not a result kept from an earlier call")
        else:
            advice = ("compute the numbers in report, on every call, from compiled.cost_analysis()['flops'] and "
                      "['bytes accessed'] of compiled = train_step.lower(params, opt_state, x, y).compile() for "
                      "the arguments report is given: numbers typed in or kept from another model do not follow "
                      "the step, and lower(...).cost_analysis() is the estimate before optimization")
        raise CheckFailed(
            "report's values differ from what the grader reads off your compiled train_step",
            measured="; ".join(f"{k}: got {g!r}" for k, g, _ in wrong),
            expected="; ".join(f"{k}: {v!r}" for k, _, v in wrong) if reveal else "the values of your own compiled step",
            hint=advice, diagnosis=f"report's {', '.join(keys)} differ from your compiled train_step's", advice=advice)
    if out["consumed"]:
        raise CheckFailed(
            "report deleted the arrays it was given: it ran the donating train_step on them",
            measured="after report, some of params/opt_state/x/y are deleted",
            expected="report reads the compiled program without running it",
            hint="lower(...).compile() needs only shapes; do not call train_step in report",
            diagnosis="after report returned, arrays passed to it were deleted: report ran the donating step",
            advice="analyse train_step.lower(params, opt_state, x, y).compile() without calling train_step: a "
                   "call consumes the donated buffers the caller still holds")

"""Probes for exercise 12 (remat and donation): residual bytes, gradients and a donating step.

*Residual bytes* of ``f`` at ``args`` is what reverse mode keeps from the forward pass for
the backward pass: the sum of ``nbytes`` over ``jax.tree.leaves(jax.vjp(f, *args)[1])``,
measured eagerly (``jax.vjp`` called outside any jit), as the statement defines it.

In the sandbox, beside the learner's code (each returns plain data; verdicts are the tests'):

``residual_bytes_of(ctx, params, x, y)``
    the learner's ``residual_bytes`` on three functions of the grader's own (the plain
    loss, the loss under one ``jax.checkpoint``, and each block under ``jax.checkpoint``
    with the ``dots_saveable`` policy), beside the probe's own measurement of each.
``remat_traced(ctx, params, x, y, segments)``
    for each segment size, ``remat_loss``'s value, gradient in ``params``, residual bytes
    and whether its head runs inside a checkpoint -- a ``jax.checkpoint`` equation that
    receives ``y`` together with a block's parameters (the bytes cannot show it: the head
    inside keeps ``y`` instead of ``h - y``) -- and the values of the residuals it keeps (the
    trusted side finds which blocks' inputs they are: where the segments begin, which the bytes
    alone cannot show) -- all read from one program traced once under our own jit (``jax.vjp``
    and its pull-back; ``traced_run``).
``choices(ctx, params, x, y, budgets)``
    the learner's ``choose_segment`` for each budget (the checks judge the answers on the
    grader's own measured levels).
``step_primitives(ctx, params, momentum, x, y, lr, beta)``
    how often each primitive appears in ``train_step``'s jaxpr, sub-jaxprs included: the
    checkpointed segments of ``remat_loss`` must be there, and no callback; whether a
    checkpoint there takes ``y`` with a block's parameters (the head, as training runs it: a
    ``remat_loss`` that reads JAX's frames can tell ``jax.vjp`` from ``jax.grad``), and its
    checkpoints by policy beside those of ``remat_loss(..., SEGMENT)`` under ``jax.vjp``; read from one
    trace under our own ``jax.jit`` (``grader.probes.generic.traced_run``), returned with
    ``"outputs"``, what that very program computed, which the trusted side compares with SGD
    with momentum before it reads the primitives.
``donation(ctx, params, momentum, x, y, lr, beta)``
    ``memory_analysis().alias_size_in_bytes`` and the module header of
    ``train_step.lower(...).compile()``, which arguments the lowering donates
    (``args_info``), then one call, and which inputs it deleted.

In the clean worker (no learner code; manifest ``clean_worker = true``): the grader's own
model -- ``reference_bytes`` (segment checkpointing as the statement defines it) and
``reference_value_and_grad``.

JAX entry points are bound at import, before the learner's module loads.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
from jax import stages as _stages

from grader import ir, jaxcompat
from grader.probes import steps as _steps
from grader.probes.errors import first_line_or_unimplemented as _first_line
from grader.probes.generic import traced_run
from grader.sandbox.context import to_jax

_jit = jax.jit
_vjp = jax.vjp
_value_and_grad = jax.value_and_grad
_checkpoint = jax.checkpoint
_dots_saveable = jax.checkpoint_policies.dots_saveable
_leaves = jax.tree.leaves
_tree_map = jax.tree.map
_ONE = np.float32(1.0)  # the cotangent remat_traced feeds the pull-back, as an input of its program
_block = jax.block_until_ready
_device_put = jax.device_put
_tanh = jnp.tanh
_sum = jnp.sum
_mean = jnp.mean
_Array = jax.Array
_deleted_flags = jaxcompat.deleted_flags()  # bound now, before any learner code
_compile = _stages.Lowered.compile
_as_text = _stages.Compiled.as_text
_memory_analysis = _stages.Compiled.memory_analysis
_make_jaxpr = jax.make_jaxpr
_issubdtype = jnp.issubdtype
_floating = jnp.floating


def measure(f, *args) -> int:
    """Residual bytes of ``f`` at ``args`` (the statement's definition)."""
    return int(sum(int(leaf.nbytes) for leaf in _leaves(_vjp(f, *args)[1])))


def _plain_number(value):
    if type(value) in (int, float):
        return value
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    if isinstance(value, (np.ndarray, _Array)) and getattr(value, "shape", None) == ():
        return np.asarray(value).item()
    return {"type": f"{type(value).__module__}.{type(value).__qualname__}"}


# --- the grader's own model ------------------------------------------------------------------------

def _block_fn(p, h):
    return _tanh(h @ p["w"] + p["b"])


def _head(h, y):
    return 0.5 * _mean(_sum((h - y) ** 2, axis=-1))


def _plain_loss(params, x, y):
    h = x
    for p in params:
        h = _block_fn(p, h)
    return _head(h, y)


def _run(ps, h):
    for p in ps:
        h = _block_fn(p, h)
    return h


def _segmented_loss(params, x, y, segment):
    """The statement's segment checkpointing: consecutive groups of ``segment`` blocks (the
    last may be shorter), each under ``jax.checkpoint`` with its default policy; the head
    outside.  ``segment == 0``: no checkpoint at all."""
    if segment == 0:
        return _plain_loss(params, x, y)
    h = x
    for i in range(0, len(params), segment):
        h = _checkpoint(_run)(params[i:i + segment], h)
    return _head(h, y)


def _dots_per_block(params, x, y):
    h = x
    for p in params:
        h = _checkpoint(_block_fn, policy=_dots_saveable)(p, h)
    return _head(h, y)


# --- probes run beside the learner's code ----------------------------------------------------------

def residual_bytes_of(ctx, params, x, y) -> list:
    fn = ctx.function("residual_bytes")
    params, x, y = to_jax([params, x, y])
    out = []
    for name, f in (("no remat", _plain_loss), ("one jax.checkpoint around the loss", _checkpoint(_plain_loss)),
                    ("each block under jax.checkpoint with dots_saveable", _dots_per_block)):
        truth = measure(f, params, x, y)
        out.append({"function": name, "truth": truth, "got": _plain_number(fn(f, params, x, y))})
    return out


def remat_traced(ctx, params, x, y, segments: list) -> list:
    """For each segment size ``k``, ``remat_loss(..., k)`` read from ONE program: ``jax.vjp``
    of it, then its pull-back of 1.0, traced once under our own ``jax.jit`` and run
    (``traced_run``).  That program's outputs give ``"loss"`` and ``"grads"``; its jaxpr gives
    ``"bytes"`` (the residuals ``vjp`` keeps: the avals of the pull-back's leaves, returned as
    outputs), ``"residuals"`` (those leaves' values, as float32: which activations are kept tells
    where each segment begins) and ``"head_inside"`` (a checkpoint equation that takes ``y`` with
    a block's parameters).  The value, gradient, bytes and structure checks all read this one trace, so a
    function that tells one kind of call from another (``isinstance`` on the tracer it gets)
    cannot show each check a program of its own.  Residuals are the same traced as eager (the
    statement's definition); ``reference_bytes`` measures the grader's own model eagerly."""
    fn = ctx.function("remat_loss")
    params, x, y = _block(to_jax([params, x, y]))
    n_params = len(_leaves(params))
    out = []
    for k in segments:
        run = traced_run(_vjp_program(fn, int(k)), params, x, y, _ONE)
        if run.error is not None:
            raise run.error
        invars = run.jaxpr.jaxpr.invars  # the leaves of params, then x, then y, then the cotangent
        residuals = run.jaxpr.out_avals[1 + n_params:]
        loss, grads, kept = run.outputs
        out.append({"loss": np.asarray(loss), "grads": grads,
                    "bytes": int(sum(int(np.prod(a.shape)) * np.dtype(a.dtype).itemsize for a in residuals)),
                    "residuals": _floating_values(kept),
                    "head_inside": _head_in_a_checkpoint(run.jaxpr.jaxpr, _labels(invars, n_params), follow=True)})
    return out


def _floating_values(leaves) -> list:
    """The floating-point leaves among ``leaves`` as float32 NumPy arrays (the others hold no
    activation): plain data the trusted side compares with the blocks' inputs."""
    return [np.asarray(leaf, np.float32) for leaf in leaves
            if _issubdtype(getattr(leaf, "dtype", np.int8), _floating)]  # bfloat16 too


def _labels(invars, n_params: int) -> dict:
    """``_head_in_a_checkpoint``'s labels for the inputs of a ``_vjp_program``: the parameters'
    leaves, x, y, then the cotangent."""
    return {**{v: frozenset({"p"}) for v in invars[:n_params]}, invars[n_params]: frozenset({"x"}),
            invars[n_params + 1]: frozenset({"y"}), invars[-1]: frozenset({"ct"})}


def _vjp_program(fn, segment: int):
    """``(loss, gradient in params, residual leaves)`` of ``fn(params, x, y, segment)``: ``jax.vjp``
    and its pull-back of ``ct`` (1.0, ``_ONE``), the program ``remat_traced`` reads.  The 1.0 is an
    input of the program, not a constant in it, so its backward pass is what that input carries
    (``_head_in_a_checkpoint``)."""
    def loss_grads_residuals(p, xx, yy, ct):
        loss, pull = _vjp(lambda a, b, c: fn(a, b, c, segment), p, xx, yy)
        return loss, pull(ct.astype(loss.dtype))[0], _leaves(pull)

    return loss_grads_residuals


def choices(ctx, params, x, y, budgets: list) -> list:
    choose = ctx.function("choose_segment")
    params, x, y = to_jax([params, x, y])
    return [_plain_number(choose(params, x, y, int(budget))) for budget in budgets]


def _head_in_a_checkpoint(jaxpr, marks: dict, *, follow: bool = False) -> bool:
    """Whether an equation of ``jaxpr`` (or of a sub-jaxpr reached through a call whose
    operands map one to one onto its inputs) checkpoints ``y`` together with a parameter.
    ``marks`` labels input variables: ``"y"``, ``"p"`` (a parameter), ``"x"`` and ``"ct"`` (the
    cotangent fed to the pull-back, an input of its own in ``remat_traced``'s program).

    ``follow``: the labels flow through every equation to its outputs, so a value computed
    from ``y`` (``y + 0``, ``y`` glued to the activations and sliced apart inside) carries
    ``y`` too; then a checkpoint that takes a value carrying ``y`` and not the cotangent (the
    backward pass of a block outside the head takes the head's cotangent, which carries
    both) together with one carrying a parameter and not ``x`` (a block's parameters, not the
    activations: a head checkpointed on its own, apart from the blocks, takes ``h`` and ``y``
    and is still outside them) holds the head.  Without ``follow``, only
    ``y`` and the parameters themselves count (a program with no cotangent input of its own:
    there every backward value carries ``y``)."""
    marks = dict(marks)
    for eqn in jaxpr.eqns:
        ins = [frozenset() if hasattr(v, "val") else marks.get(v, frozenset()) for v in eqn.invars]  # literals: nothing
        if ir.primitive_name(eqn.primitive) in jaxcompat.REMAT_PRIMITIVES and \
                any("y" in m and "ct" not in m for m in ins) and any("p" in m and "x" not in m for m in ins):
            return True
        for sub in jaxcompat.jaxprs_in_params(eqn.params):
            inner = getattr(sub, "jaxpr", sub)
            if len(inner.invars) > len(eqn.invars):
                continue
            outer = ins[len(ins) - len(inner.invars):]  # cond: the operands after the index
            if _head_in_a_checkpoint(inner, dict(zip(inner.invars, outer)), follow=follow):
                return True
        if follow:
            carried = frozenset().union(*ins)
            for var in eqn.outvars:
                marks[var] = carried
    return False


def step_primitives(ctx, params, momentum, x, y, lr: float, beta: float) -> dict:
    """``train_step`` traced once under our own ``jax.jit`` (``traced_run``; lr and beta traced,
    or, where ``train_step`` marks them static, passed as the numbers they are):
    ``"primitives"`` of that program, ``"outputs"`` it computed (``"error"`` when tracing or
    running it failed), and ``"jitted"``, whether ``train_step`` is exactly what ``jax.jit``
    returns.  The value and compile checks call the learner's own step (a compile count needs
    its own jit); a step that is jax.jit's own traces its body with tracers on every call, so
    it cannot show this trace one program and those calls another by testing
    ``isinstance(x, jax.core.Tracer)`` (a Python function in front of a jit can)."""
    fn = ctx.function("train_step")
    params, momentum, x, y = _block(to_jax([params, momentum, x, y]))
    run = traced_run(fn, params, momentum, x, y, float(lr), float(beta))  # as the calls pass them; donates nothing
    if run.jaxpr is None and run.error is not None and jaxcompat.STATIC_TRACER_ERROR in _first_line(run.error).lower():
        # lr or beta marked static: a compile-count mistake, the compile check's to judge; the
        # structure is judged on the step traced with them as the numbers the calls pass
        lr, beta = float(lr), float(beta)
        run = traced_run(lambda p, m, a, b: fn(p, m, a, b, lr, beta), params, momentum, x, y)
    out: dict = {"jitted": _steps.is_jitted(fn),
                 "primitives": ir.primitive_counts(run.jaxpr) if run.jaxpr is not None else {}}
    if run.jaxpr is not None:  # the head, as training runs it (remat_traced reads it under jax.vjp)
        invars, n_params = run.jaxpr.jaxpr.invars, len(_leaves(params))
        n_state = n_params + len(_leaves(momentum))
        out["head_inside"] = _head_in_a_checkpoint(
            run.jaxpr.jaxpr, {**{v: frozenset({"p"}) for v in invars[:n_params]}, invars[n_state + 1]: frozenset({"y"})})
        alone = _remat_loss_alone(ctx, params, x, y)
        if alone is not None and not out["head_inside"]:  # the step's remat_loss, y followed through it
            out["head_inside"] = _head_in_a_checkpoint(alone, _labels(alone.invars, n_params), follow=True)
        if alone is not None:
            out["checkpoints"] = {"train_step": _checkpoints(run.jaxpr.jaxpr), "remat_loss": _checkpoints(alone)}
            out["segments"] = {"train_step": _segments(run.jaxpr.jaxpr), "remat_loss": _segments(alone)}
            out["outside_checkpoints"] = {"train_step": _outside_checkpoints(run.jaxpr.jaxpr),
                                          "remat_loss": _outside_checkpoints(alone)}
    if run.error is not None:
        out["error"] = _first_line(run.error)
    else:
        out["outputs"] = _tree_map(np.asarray, run.outputs)
    return out


_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


def _checkpoint_equations(jaxpr) -> list:
    """Every checkpoint (remat) equation of ``jaxpr``, sub-jaxprs included, with how many times
    it runs (a checkpoint in a ``scan`` runs once per trip: ``ir.equations_with_trips``)."""
    return [(eqn, times) for eqn, name, times, _ in ir.equations_with_trips(jaxpr)
            if name in jaxcompat.REMAT_PRIMITIVES]


def _checkpoints(jaxpr) -> dict:
    """How many checkpoint (remat) equations ``jaxpr`` holds, sub-jaxprs included, by policy (as
    text, without object addresses)."""
    found: dict = {}
    for eqn, _ in _checkpoint_equations(jaxpr):
        policy = _ADDRESS.sub("", repr(eqn.params.get("policy")))[:200]
        found[policy] = found.get(policy, 0) + 1
    return found


def _segments(jaxpr) -> dict:
    """What each checkpoint (remat) equation of ``jaxpr`` holds of the blocks, sub-jaxprs included:
    ``"<runs joined by +> block(s), <policy> policy"`` -> how many such checkpoints run.
    ``runs``: the blocks' ``tanh``s the checkpoint recomputes, split at each ``checkpoint_name``
    (the boundaries a names policy saves) -- forward work, the same whatever transformation
    differentiates it (its matmuls are not: ``jax.grad`` in ``params`` alone skips the first
    segment's input cotangent).  The number of checkpoints cannot tell segments of [2, 2, 2]
    blocks from [1, 1, 4]; this can."""
    found: dict = {}
    for eqn, times in _checkpoint_equations(jaxpr):
        runs = [0]
        for sub in jaxcompat.jaxprs_in_params(eqn.params):
            _block_runs(getattr(sub, "jaxpr", sub), runs, 1)
        policy = eqn.params.get("policy")
        policy = "the default" if policy is None else _ADDRESS.sub("", repr(policy))[:200]
        key = f"{'+'.join(str(n) for n in runs)} block(s), {policy} policy"
        found[key] = found.get(key, 0) + times
    return found


def _block_runs(jaxpr, runs: list, times: int) -> list:
    """``runs`` extended with ``jaxpr``'s ``tanh``s in program order (times the ``scan`` trips
    around them), a new run at each ``checkpoint_name`` (primitive ``name``)."""
    for eqn in jaxpr.eqns:
        name = ir.primitive_name(eqn.primitive)
        if name == "tanh":
            runs[-1] += times
        elif name == "name":
            runs.append(0)
        inner = times * max(int(eqn.params.get("length", 1)), 1) if name == "scan" else times
        for sub in jaxcompat.jaxprs_in_params(eqn.params):
            _block_runs(getattr(sub, "jaxpr", sub), runs, inner)
    return runs


def _outside_checkpoints(jaxpr, found: dict | None = None, inside: bool = False) -> dict:
    """How many times each primitive appears in ``jaxpr`` (sub-jaxprs included) outside every
    checkpoint: remat_loss's gradient has only its head's and part of the backward pass's work
    there; a step that also takes another loss's gradient (the plain loss's, times zero; its
    matmuls spelled as products and sums, even) has every block's forward work too."""
    found = {} if found is None else found
    for eqn in jaxpr.eqns:
        name = ir.primitive_name(eqn.primitive)
        if not inside:
            found[name] = found.get(name, 0) + 1
        for sub in jaxcompat.jaxprs_in_params(eqn.params):
            _outside_checkpoints(getattr(sub, "jaxpr", sub), found, inside or name in jaxcompat.REMAT_PRIMITIVES)
    return found


def _remat_loss_alone(ctx, params, x, y):
    """The jaxpr of ``remat_loss(..., SEGMENT)`` in the program ``remat_traced`` reads (None when
    SEGMENT is no plain int or it does not trace: other checks say so).  A ``remat_loss`` that
    reads JAX's frames can tell ``jax.vjp`` from ``jax.grad``; a training step must hold exactly
    the checkpoints the byte check measured -- no other policy, no more or fewer segments -- and
    no more work outside them."""
    try:
        segment = ctx.attribute("SEGMENT")
    except LookupError:
        return None
    if type(segment) is not int:
        return None
    try:
        traced = _jit(_vjp_program(ctx.function("remat_loss"), segment)).trace(params, x, y, _ONE)
    except NotImplementedError:
        raise
    except Exception:  # noqa: BLE001 - the value and byte checks report it
        return None
    return traced.jaxpr.jaxpr


def _deleted(tree) -> list[bool]:
    return _deleted_flags(_leaves(tree))


def donation(ctx, params, momentum, x, y, lr: float, beta: float) -> dict:
    fn = ctx.function("train_step")
    params, momentum, x, y = _block(to_jax([params, momentum, x, y]))
    args = (params, momentum, x, y, float(lr), float(beta))
    result = {"jitted": False, "donatable_bytes": int(sum(leaf.nbytes for leaf in _leaves((params, momentum))))}
    lowered = _steps.lower(fn, args)  # jax.jit's own lower, only of what jax.jit returns
    if lowered is not None:
        compiled = _compile(lowered)
        text = _as_text(compiled)
        result.update(jitted=True, alias_bytes=int(_memory_analysis(compiled).alias_size_in_bytes),
                      header=text[: text.find("\n")][:20000], args_donated=_steps.donated_args(lowered))
    before = _steps.pointers((params, momentum))
    out = _block(fn(*args))
    result.update(params_deleted=_deleted(params), momentum_deleted=_deleted(momentum), batch_deleted=_deleted((x, y)),
                  reused_bytes=_steps.reused_bytes(out, before))
    return result


# --- the grader's references, run in the clean worker --------------------------------------------------

def reference_bytes(ctx, params, x, y, segments: list) -> list:
    """Residual bytes of the grader's segmented loss for each segment size (0: no remat)."""
    params, x, y = to_jax([params, x, y])
    return [measure(lambda p, xx, yy: _segmented_loss(p, xx, yy, int(k)), params, x, y) for k in segments]


_reference_vg = _jit(_value_and_grad(_plain_loss))


def reference_value_and_grad(ctx, params, x, y) -> dict:
    loss, grads = _reference_vg(*to_jax([params, x, y]))
    return {"loss": np.asarray(loss), "grads": grads}

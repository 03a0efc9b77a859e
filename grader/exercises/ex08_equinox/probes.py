"""Probes for exercise 8 (Equinox: the model is a pytree), run beside the learner's code.

The learner's Modules never leave the sandbox: each probe gets plain numbers and arrays,
builds the model with the learner's ``make_model(sizes, activation, dropout_rate, seed)``,
calls the learner's functions on it, and hands back plain data -- the learner's own
``weights(model)`` (``[{"w": f32[out, in], "b": f32[out]}, ...]``), outputs, losses,
descriptions of pytree leaves and treedefs, and compile records.  Nothing here decides a
verdict, and nothing here imports Equinox (every worker imports the probe modules; the
learner's file imports Equinox itself).

``forward``        weights and ``predict`` outputs of a model with dropout rate 0
``pytree_view``    the leaves and treedef of one architecture built with each activation
``grads_view``     ``compute_grads``' pytree next to the model's: treedefs, leaves, and the
                   learner's ``weights`` read off both
``train_run``      ``train_step`` over several batches from a fresh model, weights before and after
``prepare_training`` then ``train_steps``: the same, measured -- the first builds the model
                   and its optimizer state (building compiles JAX's random helpers) and keeps
                   them in ``ctx.slots``, and traces ``train_step`` once under our own jit
                   (``grader.probes.generic.traced_run``: its primitives and that program's
                   loss); the second runs ``train_step`` alone
``dropout_view``   ``predict`` and training-mode ``loss_fn`` under several keys
``dropout_losses`` training-mode ``loss_fn`` on one example (or copies of one) under many keys
``step_losses``    the loss ``train_step`` returns under many keys, from one model with dropout
"""

from __future__ import annotations

import dataclasses
import sys

import jax
import numpy as np

from grader import ir as _ir
from grader.compiles import LIBRARY as _LIBRARY
from grader.compiles import CompileRecorder
from grader.sandbox.context import to_jax
from grader.probes import steps as _steps
from grader.probes.errors import first_line as _first_line
from grader.probes.generic import traced_run

# Bound at import time (probe modules load before the learner's module does).
_key = jax.random.key
_block = jax.block_until_ready
_leaves = jax.tree_util.tree_leaves
_structure = jax.tree_util.tree_structure
_tree_map = jax.tree_util.tree_map
_Array = jax.Array
_flatten = jax.tree_util.tree_flatten
_unflatten = jax.tree_util.tree_unflatten
_make_jaxpr = jax.make_jaxpr
_asarray = np.asarray
_sys_modules = sys.modules
_fields, _is_dataclass = dataclasses.fields, dataclasses.is_dataclass

MAX_TREEDEF_CHARS = 4000


def _model(ctx, sizes, activation, rate, seed):
    return ctx.function("make_model")([int(s) for s in sizes], str(activation), float(rate), int(seed))


def _describe(leaf) -> dict:
    """A leaf as plain data: arrays by shape and dtype, anything else by its type's name."""
    if isinstance(leaf, _Array):
        return {"kind": "array", "shape": [int(d) for d in leaf.shape], "dtype": str(leaf.dtype)}
    return {"kind": type(leaf).__name__[:100]}


def _arrays_only(tree):
    """``tree`` with every leaf that is not a JAX array replaced by None (what
    ``eqx.filter(tree, eqx.is_array)`` gives for a model of JAX arrays)."""
    return _tree_map(lambda leaf: leaf if isinstance(leaf, _Array) else None, tree)


def forward(ctx, sizes, activation, seed, xs, key_seed) -> dict:
    model = _model(ctx, sizes, activation, 0.0, seed)
    out = ctx.function("predict")(model, to_jax(xs), _key(int(key_seed)))
    return {"weights": _block(ctx.function("weights")(model)), "outputs": _block(out)}


def _static_fields_holding(model, activation: str) -> list[str]:
    """The model's fields declared static (``eqx.field(static=True)``: the field's metadata)
    whose value is the activation: its name as a ``str``, or a function of that name."""
    if not _is_dataclass(model):
        return []
    out = []
    for field in _fields(model):
        if not field.metadata.get("static", False):
            continue
        value = model.__dict__.get(field.name)
        if (type(value) is str and value == activation) or (
                callable(value) and type(getattr(value, "__name__", None)) is str and value.__name__ == activation):
            out.append(field.name[:100])
    return out


def pytree_view(ctx, sizes, seed, rate) -> dict:
    """For each activation: the model's leaves (described), its treedef (as text), its weights,
    and which of its static fields hold the activation."""
    out = {}
    for activation in ("tanh", "relu"):
        model = _model(ctx, sizes, activation, rate, seed)
        out[activation] = {"leaves": [_describe(leaf) for leaf in _leaves(model)],
                           "treedef": str(_structure(model))[:MAX_TREEDEF_CHARS],
                           "weights": _block(ctx.function("weights")(model)),
                           "static_fields": _static_fields_holding(model, activation)}
    return out


def grads_view(ctx, sizes, activation, seed, xs, ys) -> dict:
    model = _model(ctx, sizes, activation, 0.0, seed)
    grads = _block(ctx.function("compute_grads")(model, to_jax(xs), to_jax(ys)))
    view = {"model_type": type(model).__name__[:100], "grads_type": type(grads).__name__[:100],
            "model_treedef": str(_structure(_arrays_only(model)))[:MAX_TREEDEF_CHARS],
            "grads_treedef": str(_structure(grads))[:MAX_TREEDEF_CHARS],
            "grads_leaves": [_describe(leaf) for leaf in _leaves(grads)][:200],
            "model_weights": _block(ctx.function("weights")(model))}
    try:  # the gradient pytree is an MLP too, so the learner's own `weights` reads it
        view["grad_weights"] = _block(ctx.function("weights")(grads))
    except NotImplementedError:
        raise
    except Exception as exc:  # measured, not judged: the check turns this into feedback
        view["grad_weights_error"] = _first_line(exc)
    return view


def _step(step, model, opt_state, xs, ys, key):
    out = step(model, opt_state, xs, ys, key)
    if not isinstance(out, (tuple, list)) or len(out) != 3:
        raise TypeError("train_step should return a tuple (new_model, new_opt_state, loss)")
    return _block(tuple(out))


def train_run(ctx, sizes, activation, seed, batches: list, key_seed) -> dict:
    """A fresh model (dropout rate 0) and optimizer state, then ``train_step`` once per batch
    (``{"xs", "ys"}``) with keys ``key(key_seed + t)``: the weights before and after each
    step, and the losses (compilations are not judged here: ``train_steps`` is measured)."""
    step, weights = ctx.function("train_step"), ctx.function("weights")
    data = _block([(to_jax(b["xs"]), to_jax(b["ys"])) for b in batches])
    model = _model(ctx, sizes, activation, 0.0, seed)
    opt_state = _block(ctx.function("init_opt_state")(model))
    initial, after, losses = _block(weights(model)), [], []
    for t, (xs, ys) in enumerate(data):
        model, opt_state, loss = _step(step, model, opt_state, xs, ys, _key(int(key_seed) + t))
        after.append(weights(model))
        losses.append(loss)
    return {"initial": initial, "after": after, "losses": losses}


def _traced_step(step, *args):
    """``step`` traced once on ``args`` under our own ``jax.jit`` (``traced_run``): the array
    leaves are traced, every other leaf (Dropout's float and bool) kept as it is, as
    ``eqx.filter_jit`` does; the program returns the step's loss."""
    leaves, treedef = _flatten(args)
    where = [i for i, leaf in enumerate(leaves) if isinstance(leaf, _Array)]

    def traced(*arrays):
        filled = list(leaves)
        for i, array in zip(where, arrays):
            filled[i] = array
        out = step(*_unflatten(treedef, filled))
        if not isinstance(out, (tuple, list)) or len(out) != 3:
            raise TypeError("train_step should return a tuple (new_model, new_opt_state, loss)")
        return out[2]

    return traced_run(traced, *[leaves[i] for i in where])


def _jit_made(ctx, fn) -> bool:
    """Whether ``fn`` is exactly what ``eqx.filter_jit`` (or ``jax.jit``) returns: a function
    whose every call traces its body, array leaves as tracers.  Equinox's wrapper type is read
    from the module the learner's file imported, and must be defined in the installation's
    code (a class of the learner's, however it is named, is not)."""
    if _steps.is_jitted(fn):
        return True
    cls = getattr(_sys_modules.get("equinox._jit"), "_JitWrapper", None)
    code = getattr(getattr(cls, "__call__", None), "__code__", None)
    return (type(fn) is cls and cls is not None and code is not None
            and ctx.roots.kind(code.co_filename) == _LIBRARY)


def prepare_training(ctx, slot: str, sizes, activation, seed, batches: list, key_seed) -> dict:
    """A fresh model (dropout rate 0), its optimizer state, the batches on device and the
    keys ``key(key_seed + t)``, kept in ``ctx.slots[slot]`` for ``train_steps``; and
    ``train_step`` traced once on the first batch under our own ``jax.jit``: the primitives of
    that program (the trusted side asks that the step's work is in it), the loss that very
    program computed (``"outputs"``; ``"error"`` when tracing or running it failed), and
    whether ``train_step`` is exactly what ``eqx.filter_jit`` (or ``jax.jit``) returns
    (``"jitted"``).

    The compile count needs the learner's own calls of its own filter_jit (``train_steps``):
    that is the program counted, so it cannot be our trace's.  What ties the two: a step that
    is filter_jit's own traces its body with tracers on every call, so it cannot show our trace
    one program and the calls another by testing ``isinstance(x, jax.core.Tracer)`` (a Python
    function in front of a jit can); and the traced program's loss must be the calls' first."""
    model = _model(ctx, sizes, activation, 0.0, seed)
    opt_state = ctx.function("init_opt_state")(model)
    data = [(to_jax(b["xs"]), to_jax(b["ys"]), _key(int(key_seed) + t)) for t, b in enumerate(batches)]
    ctx.slots[str(slot)] = _block((model, opt_state, data))
    xs, ys, key = data[0]
    step = ctx.function("train_step")
    run = _traced_step(step, model, opt_state, xs, ys, key)
    out: dict = {"jitted": _jit_made(ctx, step),
                 "step_primitives": _ir.primitive_counts(run.jaxpr) if run.jaxpr is not None else {}}
    if run.error is not None:
        out["error"] = _first_line(run.error)
    else:
        out["outputs"] = {"loss": _asarray(run.outputs)}
    return out


def train_steps(ctx, slot: str) -> dict:
    """``train_step`` alone, once per prepared batch: the losses and the recorder's record
    (feedback only: the sandbox's meter is what counts)."""
    step = ctx.function("train_step")
    model, opt_state, data = ctx.slots.pop(str(slot))
    losses = []
    with CompileRecorder(ctx.roots, explain_cache_misses=True) as rec:
        for xs, ys, key in data:
            model, opt_state, loss = _step(step, model, opt_state, xs, ys, key)
            losses.append(loss)
    return {"losses": losses, "compiles": rec.to_plain()}


def dropout_view(ctx, sizes, activation, rate, seed, xs, ys, key_seeds: list) -> dict:
    model = _model(ctx, sizes, activation, rate, seed)
    xs, ys = to_jax(xs), to_jax(ys)
    predict, loss_fn = ctx.function("predict"), ctx.function("loss_fn")
    return {"weights": _block(ctx.function("weights")(model)),
            "predictions": [_block(predict(model, xs, _key(int(k)))) for k in key_seeds],
            "losses": [_block(loss_fn(model, xs, ys, _key(int(k)))) for k in key_seeds]}


def dropout_losses(ctx, sizes, activation, rate, seed, x, y, key_seeds: list) -> dict:
    """``loss_fn(model, x, y, key)`` in training mode on ONE example (or a batch of copies of
    one) under each key, and the model's weights: each loss says which hidden units that
    key's masks kept (the trusted side finds the masks)."""
    model = _model(ctx, sizes, activation, rate, seed)
    loss_fn = ctx.function("loss_fn")
    xs, ys = to_jax(x), to_jax(y)
    keys = [_key(int(k)) for k in key_seeds]
    return {"weights": _block(ctx.function("weights")(model)),
            "losses": [_block(loss_fn(model, xs, ys, k)) for k in keys]}


def step_losses(ctx, sizes, activation, rate, seed, x, y, key_seeds: list) -> dict:
    """The loss ``train_step`` returns (the loss before its update, in training mode) from one
    model with dropout and its fresh optimizer state, on ONE example, under each key."""
    model = _model(ctx, sizes, activation, rate, seed)
    opt_state = _block(ctx.function("init_opt_state")(model))
    step = ctx.function("train_step")
    xs, ys = to_jax(x), to_jax(y)
    return {"weights": _block(ctx.function("weights")(model)),
            "losses": [_step(step, model, opt_state, xs, ys, _key(int(k)))[2] for k in key_seeds]}

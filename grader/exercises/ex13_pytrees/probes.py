"""Probes for exercise 13 (pure functions and pytrees), run in the sandbox beside the learner's code.

Trees arrive as descriptions (``grader.exercises.ex13_pytrees.trees``) and are built here, with
the namedtuple classes made when this module is imported; whatever the learner's functions
return goes back as a description.  Each probe measures; the verdicts are the tests'.

``shapes_of(ctx, desc)``
    ``tree_shapes(tree)``, described.
``norm_of(ctx, desc)``
    ``jax.jit(global_norm)(tree)``.
``ravel_of(ctx, desc, new_vec)``
    ``vec, unravel = ravel(tree)``; ``vec``, and ``jax.jit(unravel)(new_vec)`` described.
``dense_view(ctx, w, b, activation, x, cotangent, other)``
    builds ``Dense(w=w, b=b, activation=activation)``: its leaves, whether its tree structure
    changes with the activation (``other``), ``apply(layer, x)`` and the gradient of
    ``sum(apply(layer, x) * cotangent)`` in the layer (``jax.vjp``, under one ``jax.jit`` of
    ours): its type, activation and fields.
``dense_compiles(ctx, calls)``
    ``apply`` once per ``{"w", "b", "activation", "x"}`` (layers built first), recorded.
``pure_run(ctx, w, batches, lrs, record)``
    threads ``(w, count)`` through ``pure_step`` once per batch and learning rate, from
    ``count = int32 0``: every ``(w, count)`` after a step; which of the module's global
    variables the calls bound, rebound or wrote in place (``grader.probes.module_state``: compared by
    content, so ``STATE["steps"] += 1`` on a module-level dict shows); with ``record``, the compilations.

JAX entry points are bound at import, before the learner's module loads.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from grader.plaindata import as_plain_sequence as _as_plain_sequence
from grader.compiles import CompileRecorder
from grader.exercises.ex13_pytrees import trees
from grader.probes import module_state
from grader.probes.errors import first_line as _first_line

_jit = jax.jit
_vjp = jax.vjp
_leaves = jax.tree.leaves
_structure = jax.tree.structure
_device_put = jax.device_put
_block = jax.block_until_ready
_sum = jnp.sum
_asarray = np.asarray
_describe = trees.describe
_build = trees.build
_snapshot = module_state.snapshot
_changed = module_state.changed
MAX_GLOBALS = 40


def _tree(desc: dict):
    return _build(desc, _device_put)


def _plain(value):
    return _describe(value, _asarray)


def shapes_of(ctx, desc: dict) -> dict:
    return _plain(ctx.function("tree_shapes")(_tree(desc)))


def norm_of(ctx, desc: dict) -> dict:
    return _plain(_block(_jit(ctx.function("global_norm"))(_tree(desc))))


def ravel_of(ctx, desc: dict, new_vec: np.ndarray) -> dict:
    out = ctx.function("ravel")(_tree(desc))
    out = _as_plain_sequence(out)  # a NamedTuple is a tuple
    if type(out) not in (tuple, list) or len(out) != 2 or not callable(out[1]):
        return {"error": "ravel should return a pair (vec, unravel) whose second item is a function",
                "got": _plain(out) if type(out) not in (tuple, list) else {"kind": type(out).__name__, "items": [
                    _plain(v) if not callable(v) else {"kind": "other", "type": "function"} for v in out]}}
    vec, unravel = out
    rebuilt = _block(_jit(unravel)(_device_put(np.asarray(new_vec, np.float32))))
    return {"vec": _plain(_block(vec)), "unraveled": _plain(rebuilt)}


def _layer(ctx, w, b, activation: str):
    return ctx.function("Dense")(w=_device_put(w), b=_device_put(b), activation=str(activation))


def _layer_vjp(apply):
    """``(apply(layer, x), gradient in the layer of sum(apply(layer, x) * cotangent))`` under one
    ``jax.jit``, made afresh for each request: a wrapper kept in this module between requests
    could be swapped for another by learner code (the module is reachable from it through the
    class graph)."""
    def run(lyr, x, cot):
        out, pullback = _vjp(lambda layer: apply(layer, x), lyr)
        return out, pullback(cot)[0]

    return _jit(run)


def dense_view(ctx, w, b, activation: str, x, cotangent, other: str) -> dict:
    apply = ctx.function("apply")
    layer = _layer(ctx, w, b, activation)
    x, cot = _device_put(x), _device_put(cotangent)
    leaves = _leaves(layer)
    view = {"leaves": [_plain(leaf) for leaf in leaves[:8]], "num_leaves": len(leaves),
            "static_in_structure": _structure(layer) != _structure(_layer(ctx, w, b, other))}
    try:
        out, g = _block(_layer_vjp(apply)(layer, x, cot))
        view["output"] = _plain(out)
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001 - measured, not judged: the check says what it means
        view["error"] = _first_line(exc)
        return view
    cls = type(layer)
    view["grad_type"] = "same" if type(g) is cls else f"{type(g).__module__}.{type(g).__qualname__}"[:200]
    if type(g) is cls:
        view["grad_activation"] = _plain(getattr(g, "activation", None))
        view["grad_w"] = _plain(getattr(g, "w", None))
        view["grad_b"] = _plain(getattr(g, "b", None))
    return view


def prepare_dense(ctx, slot: str, calls: list) -> dict:
    """The learner's layers (its own class builds them) and the inputs on device, kept in
    ``ctx.slots[slot]`` for ``dense_compiles``: what building a layer compiles is not counted."""
    ctx.slots[str(slot)] = _block([(_layer(ctx, c["w"], c["b"], c["activation"]), _device_put(c["x"]))
                                   for c in calls])
    return {}


def dense_compiles(ctx, slot: str) -> dict:
    """``apply`` alone on the layers ``prepare_dense`` kept (measured: the sandbox's meter
    counts; the recorder's record is feedback)."""
    apply = ctx.function("apply")
    prepared = ctx.slots.pop(str(slot))
    with CompileRecorder(ctx.roots, explain_cache_misses=True) as rec:
        for layer, x in prepared:
            _block(apply(layer, x))
    return {"compiles": rec.to_plain()}


def pure_run(ctx, w, batches: list, lrs: list, record: bool = False) -> dict:
    step = ctx.function("pure_step")
    w = _device_put(np.asarray(w, np.float32))
    count = _device_put(np.int32(0))
    data = _block([(_device_put(b["x"]), _device_put(b["y"])) for b in batches])
    before = _snapshot(ctx.module)
    states = []
    with CompileRecorder(ctx.roots, explain_cache_misses=True) as rec:
        for (x, y), lr in zip(data, lrs):
            out = step(w, count, x, y, float(lr))
            out = _as_plain_sequence(out)
            if type(out) not in (tuple, list) or len(out) != 2:
                states.append({"error": _plain(out) if type(out) not in (tuple, list) else
                               {"kind": type(out).__name__, "items": len(out)}})
                break
            w, count = _block(tuple(out))
            states.append({"w": _plain(w), "count": _plain(count)})
    changed = _changed(before, _snapshot(ctx.module))
    result = {"states": states, "globals_changed": changed[:MAX_GLOBALS]}
    if record:
        result["compiles"] = rec.to_plain()
    return result


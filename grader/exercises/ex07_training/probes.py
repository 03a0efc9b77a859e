"""Probes for exercise 7 (the training lab): run the learner's step and read its compiled program.

In the sandbox, beside the learner's code (each returns plain data; verdicts are the tests'):

``init_params_of(ctx, seed, sizes)``
    the learner's ``init_params(jax.random.key(seed), sizes)``, under ``jax.jit`` with the
    sizes static (one compile instead of one per random primitive and shape).
``jitted_call(ctx, name, args)``
    ``jax.jit(<the learner's name>)(*args)``, for ``loss_fn`` and ``per_example``.
``optimizer_update(ctx, hyper, params, grads, adam)``
    one ``update`` of the learner's ``make_optimizer(*hyper)`` on the given gradients, from
    its state with the Adam moments replaced by ``adam`` (see below).
``step_once(ctx, hyper, params, adam, x, y)``
    one call of the learner's ``train_step`` from such a state.
``prepare_run(ctx, slot, hyper, params, x, y)`` then ``train_run(ctx, slot, n_steps)``
    ``n_steps`` calls of ``train_step``, each on the previous call's outputs, from the state
    the learner's own ``init`` builds.  The state (whose zeros compile helpers) and the
    inputs on device are made by the first request and kept in ``ctx.slots``; the second,
    measured, runs ``train_step`` alone.
``metric_cost(ctx, params, x, y)`` / ``reference_metric_cost`` (clean worker)
    the work of ``jax.jit(per_example)`` on these inputs: XLA's flops of the compiled
    program, and the jaxpr's size and primitives; the grader's own vmapped metric answers
    the same in the clean worker.
``donation(ctx, hyper, params, x, y)``
    what donation did: ``memory_analysis().alias_size_in_bytes`` and the module header of
    ``train_step.lower(...).compile()``, then one call and which inputs were deleted.
``report_and_truth(ctx, hyper, params, x, y)``
    the probe's own reading of ``train_step.lower(...).compile()`` (``cost_analysis()``
    and the optimized HLO text), then the learner's ``report`` on the same inputs and
    whether it consumed (deleted) them.

``hyper`` is ``[learning_rate, clip_norm, weight_decay]``; ``adam`` is
``{"count": int, "mu": tree, "nu": tree}``: the state's one ``optax.ScaleByAdamState`` is
replaced by it, so a step starts from moments the grader drew.  That state is built from
``jax.eval_shape(optimizer.init, params)`` (no compile); ``donation`` and ``report_and_truth``
use zero moments, as ``init`` would.  A state without exactly one ``ScaleByAdamState`` is
reported (``adam_states``), not stepped.

In the clean worker (no learner code; manifest ``clean_worker = true``): the grader's own
model, loss and optimizer, ``reference_init``, ``reference_update`` and ``reference_step``,
which answer in the same shapes.

Every JAX entry point is bound at import, before the learner's module loads, so a
submission that rebinds ``jax.jit``, ``optax`` or the ``Compiled`` methods does not change
what these measure.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import stages as _stages

from grader.plaindata import as_plain_sequence as _as_plain_sequence
from grader import ir as _ir
from grader import jaxcompat
from grader.compiles import CompileRecorder
from grader.probes import steps as _steps
from grader.probes.errors import first_line_or_unimplemented as _first_line
from grader.probes.generic import traced_run
from grader.sandbox.context import to_jax

_jit = jax.jit
_key = jax.random.key
_split = jax.random.split
_normal = jax.random.normal
_block = jax.block_until_ready
_device_put = jax.device_put
_leaves = jax.tree.leaves
_tree_map = jax.tree.map
_structure = jax.tree.structure
_value_and_grad = jax.value_and_grad
_vmap = jax.vmap
_make_jaxpr = jax.make_jaxpr
_eval_shape = jax.eval_shape
_ShapeDtypeStruct = jax.ShapeDtypeStruct
_log_softmax = jax.nn.log_softmax
_relu = jax.nn.relu
_take_along_axis = jnp.take_along_axis
_mean = jnp.mean
_zeros = jnp.zeros
_sqrt = np.sqrt
_asarray = np.asarray
_deleted_flags = jaxcompat.deleted_flags()  # bound now, before any learner code
_Array = jax.Array
_compile = _stages.Lowered.compile
_as_text = _stages.Compiled.as_text
_cost_analysis = _stages.Compiled.cost_analysis
_memory_analysis = _stages.Compiled.memory_analysis
_args_info = _stages.Lowered.__dict__["args_info"].__get__  # what lower() says each argument is (donated?)
_AdamState = optax.ScaleByAdamState
_chain = optax.chain
_clip = optax.clip_by_global_norm
_adamw = optax.adamw
_apply_updates = optax.apply_updates
_global_norm = optax.tree.norm


# --- helpers ---------------------------------------------------------------------------------

def _is_adam(node) -> bool:
    return isinstance(node, _AdamState)


def _adam_nodes(state) -> list:
    return [n for n in _leaves(state, is_leaf=_is_adam) if _is_adam(n)]


def _with_adam(state, adam: dict):
    """``state`` with its Adam moments replaced by the grader's (count int32, mu/nu like params)."""
    new = _AdamState(count=_device_put(np.asarray(adam["count"], np.int32)), mu=to_jax(adam["mu"]),
                     nu=to_jax(adam["nu"]))
    return _tree_map(lambda n: new if _is_adam(n) else n, state, is_leaf=_is_adam)


def _adam_of(state) -> dict:
    node = _adam_nodes(state)[0]
    return {"count": int(_asarray(node.count)), "mu": node.mu, "nu": node.nu}


def _learner_state(ctx, hyper, params):
    """The learner's optimizer and its initial state for ``params`` (a NotImplementedError propagates)."""
    opt = ctx.function("make_optimizer")(*hyper)
    return opt, opt.init(params)


def _state_from(opt, params, adam: dict):
    """``opt``'s state for ``params`` with the grader's Adam moments, built without running
    ``init`` (``jax.eval_shape`` gives its structure; no compile).  Leaves other than the Adam
    moments (a correct chain has none) are zeros.  ``None`` when the state does not hold
    exactly one ``ScaleByAdamState``; the second value is the structure either way."""
    shapes = _eval_shape(opt.init, params)
    if len(_adam_nodes(shapes)) != 1:
        return None, shapes
    state = _with_adam(shapes, adam)
    state = _tree_map(lambda leaf: _device_put(np.zeros(leaf.shape, leaf.dtype))
                      if isinstance(leaf, _ShapeDtypeStruct) else leaf, state)
    return state, shapes


def _constants(ctx) -> dict:
    """The hyperparameter constants of the learner's module, for feedback."""
    out = {}
    for name in ("LEARNING_RATE", "CLIP_NORM", "WEIGHT_DECAY"):
        try:
            value = ctx.attribute(name)
        except Exception:  # noqa: BLE001 - a missing constant is reported as None
            value = None
        out[name] = float(value) if type(value) in (int, float) else None
    return out


def _wrong_adam(state) -> dict:
    return {"adam_states": len(_adam_nodes(state)), "state_structure": str(_structure(state))[:600]}


def _plain_number(value):
    """A report value as a Python number, or a description of what it was."""
    if type(value) in (int, float):
        return value
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, (np.ndarray, _Array)) and getattr(value, "shape", None) == ():
        return _asarray(value).item()
    return {"type": f"{type(value).__module__}.{type(value).__qualname__}"}


# --- probes run beside the learner's code ----------------------------------------------------

def init_params_of(ctx, seed: int, sizes: list):
    """The learner's ``init_params`` under ``jax.jit`` (sizes static, as a tuple): one compile
    instead of one per random primitive and shape."""
    return _jit(ctx.function("init_params"), static_argnums=1)(_key(int(seed)), tuple(int(s) for s in sizes))


def jitted_call(ctx, name: str, args: list):
    """``jax.jit(learner's name)(*args)``: one compile instead of one per primitive and shape."""
    return _jit(ctx.function(name))(*to_jax(args))


def optimizer_update(ctx, hyper, params, grads, adam) -> dict:
    params, grads = to_jax(params), to_jax(grads)
    opt = ctx.function("make_optimizer")(*hyper)
    state, shapes = _state_from(opt, params, adam)
    if state is None:
        return _wrong_adam(shapes)
    update = _jit(lambda g, s, p: opt.update(g, s, p))  # one compile instead of one per primitive
    updates, new_state = _block(update(grads, state, params))
    if len(_adam_nodes(new_state)) != 1:
        return _wrong_adam(new_state)
    return {"adam_states": 1, "updates": updates, **_adam_of(new_state)}


def step_once(ctx, hyper, params, adam, x, y) -> dict:
    params = to_jax(params)
    state, shapes = _state_from(ctx.function("make_optimizer")(*hyper), params, adam)
    if state is None:
        return {**_wrong_adam(shapes), "constants": _constants(ctx)}
    out = _block(ctx.function("train_step")(params, state, _device_put(x), _device_put(y)))
    out = _as_plain_sequence(out)  # a NamedTuple is a tuple
    if type(out) not in (tuple, list) or len(out) != 3:
        return {"adam_states": 1, "returned": f"{type(out).__name__}" + (
            f" of {len(out)}" if type(out) in (tuple, list) else ""), "constants": _constants(ctx)}
    new_params, new_state, loss = out
    if len(_adam_nodes(new_state)) != 1:
        return {**_wrong_adam(new_state), "constants": _constants(ctx)}
    return {"adam_states": 1, "returned": "tuple of 3", "params": new_params, "loss": _asarray(loss),
            "constants": _constants(ctx), **_adam_of(new_state)}


def prepare_run(ctx, slot: str, hyper, params, x, y) -> dict:
    """The run's inputs, kept for ``train_run``, and ``train_step`` traced once on them under
    our own ``jax.jit`` (``traced_run``): the primitives of that program (every level: the
    trusted side asks that the step's work is in it), the loss that very program computed
    (``"outputs"``; ``"error"`` when tracing or running it failed), and whether ``train_step``
    is exactly what ``jax.jit`` returns (``"jitted"``).

    The compile count needs the learner's own calls of its own jit (``train_run``): that is the
    program counted, so it cannot be our trace's.  What ties the two: a step that is jax.jit's
    own traces its body with tracers on every call, so it cannot show our trace one program and
    the run another by testing ``isinstance(x, jax.core.Tracer)`` (a Python function in front of
    a jit can); and the traced program's loss must be the run's first loss."""
    params, x, y = _block((to_jax(params), _device_put(x), _device_put(y)))
    _, state = _learner_state(ctx, hyper, params)
    ctx.slots[str(slot)] = _block((params, state, x, y))
    fn = ctx.function("train_step")
    run = traced_run(fn, params, state, x, y)  # our jit adds no donation: the kept inputs stay alive
    out: dict = {"jitted": _steps.is_jitted(fn),
                 "step_primitives": _ir.primitive_counts(run.jaxpr) if run.jaxpr is not None else {}}
    if run.error is not None:
        out["error"] = _first_line(run.error)
    elif type(run.outputs) in (tuple, list) and len(run.outputs) == 3:
        out["outputs"] = {"loss": _asarray(run.outputs[2])}
    else:
        out["error"] = "train_step does not return (new_params, new_opt_state, loss)"
    return out


def train_run(ctx, slot: str, n_steps: int) -> dict:
    fn = ctx.function("train_step")
    params, state, x, y = ctx.slots.pop(str(slot))
    losses = []
    with CompileRecorder(ctx.roots, explain_cache_misses=True) as rec:  # for feedback: the meter decides
        for _ in range(int(n_steps)):
            params, state, loss = fn(params, state, x, y)
            losses.append(_block(loss))
    return {"losses": [float(_asarray(v)) for v in losses], "compiles": rec.to_plain()}


def _work(fn, args) -> dict:
    """What ``jax.jit(fn)`` does on ``args``: the compiled program's flops (XLA's cost
    analysis) and the jaxpr's size and primitives."""
    jitted = _jit(fn)
    summary = _ir.jaxpr_summary(_make_jaxpr(fn)(*args))
    cost = _cost_analysis(_compile(jitted.lower(*args)))
    return {"flops": float(cost.get("flops", 0.0)), "eqns": int(summary["total_eqns"]),
            "primitives": summary["primitives"]}


def metric_cost(ctx, params, x, y) -> dict:
    return _work(ctx.function("per_example"), (to_jax(params), _device_put(x), _device_put(y)))


def _deleted(tree) -> list[bool]:
    return _deleted_flags(_leaves(tree))


def _fresh_state(ctx, hyper, params):
    """The learner's optimizer state with zero moments (as ``init`` gives), built without a compile."""
    zeros = [{k: np.zeros(np.shape(v), np.float32) for k, v in layer.items()} for layer in params]
    state, shapes = _state_from(ctx.function("make_optimizer")(*hyper), to_jax(params),
                                {"count": 0, "mu": zeros, "nu": zeros})
    return state if state is not None else ctx.function("make_optimizer")(*hyper).init(to_jax(params))


def donation(ctx, hyper, params, x, y) -> dict:
    fn = ctx.function("train_step")
    state = _fresh_state(ctx, hyper, params)
    params = to_jax(params)
    x, y = _device_put(x), _device_put(y)
    _block((params, state, x, y))
    donatable = int(sum(leaf.nbytes for leaf in _leaves((params, state))))
    result = {"jitted": False, "donatable_bytes": donatable}
    lowered = _steps.lower(fn, (params, state, x, y))  # jax.jit's own, of exactly what it returns
    if lowered is not None:
        compiled = _compile(lowered)
        text = _as_text(compiled)
        result.update(jitted=True, alias_bytes=int(_memory_analysis(compiled).alias_size_in_bytes),
                      header=text[: text.find("\n")][:20000],
                      # a donated batch that no output can reuse only warns and stays alive, so
                      # is_deleted() cannot show it: lower() records what was asked to be donated
                      args_donated=[any(bool(a.donated) for a in _leaves(arg)) for arg in _args_info(lowered)[0]])
    before = _steps.pointers((params, state))
    out = _block(fn(params, state, x, y))
    result.update(params_deleted=_deleted(params), state_deleted=_deleted(state),
                  batch_deleted=_deleted((x, y)), reused_bytes=_steps.reused_bytes(out, before))
    return result


def report_and_truth(ctx, hyper, params, x, y) -> dict:
    fn = ctx.function("train_step")
    state = _fresh_state(ctx, hyper, params)
    params = to_jax(params)
    x, y = _device_put(x), _device_put(y)
    _block((params, state, x, y))
    truth = None
    lowered = _steps.lower(fn, (params, state, x, y))  # jax.jit's own, of exactly what it returns
    if lowered is not None:
        compiled = _compile(lowered)
        if not _steps.runs_as_lowered(fn, compiled, (params, state, x, y)):
            return {"truth": None, "report": None, "consumed": False, "runs_as_lowered": False}
        cost = _cost_analysis(compiled)
        truth = {"flops": float(cost["flops"]), "bytes_accessed": float(cost["bytes accessed"]),
                 "hlo": _as_text(compiled)}
    got = ctx.function("report")(params, state, x, y)
    if type(got) is dict:
        returned = {"type": "dict", "keys": sorted(str(k) for k in got)[:20],
                    "values": {k: _plain_number(got[k]) for k in ("flops", "bytes_accessed", "fusions") if k in got}}
    else:
        returned = {"type": f"{type(got).__module__}.{type(got).__qualname__}"}
    consumed = any(_deleted((params, state, x, y)))
    return {"truth": truth, "report": returned, "consumed": consumed}


# --- the grader's own model and optimizer, run in the clean worker ----------------------------

def _forward(params, x):
    h = x
    for layer in params[:-1]:
        h = _relu(h @ layer["w"] + layer["b"])
    return h @ params[-1]["w"] + params[-1]["b"]


def _loss(params, x, y):
    logp = _log_softmax(_forward(params, x), axis=-1)
    return -_mean(_take_along_axis(logp, y[:, None], axis=-1))


def _optimizer(lr, clip, wd):
    return _chain(_clip(clip), _adamw(lr, weight_decay=wd))


def _one_example(params, x, y):
    logits = _forward(params, x)
    return -_log_softmax(logits)[y], jnp.argmax(logits) == y


def reference_metric_cost(ctx, params, x, y) -> dict:
    """The statement's metric (one example's loss and correctness, vmapped): its work."""
    return _work(_vmap(_one_example, in_axes=(None, 0, 0)), (to_jax(params), _device_put(x), _device_put(y)))


def reference_init(ctx, seed: int, sizes: list):
    return _reference_init_jit(_key(int(seed)), tuple(int(s) for s in sizes))


def _reference_init(key, sizes):
    """The statement's recipe: one key per layer from ``split``, He-scaled normal weights, zero biases."""
    keys = _split(key, len(sizes) - 1)
    return [{"w": _normal(k, (a, b), jnp.float32) * np.float32(_sqrt(2.0 / a)), "b": _zeros((b,), jnp.float32)}
            for k, a, b in zip(keys, sizes[:-1], sizes[1:])]


# The hyperparameters are traced (float32 scalars), so one compile serves every value.
def _ref_update(grads, state, params, hyper):
    return _optimizer(*hyper).update(grads, state, params)


def _ref_step(params, state, x, y, hyper):
    loss, grads = _value_and_grad(_loss)(params, x, y)
    updates, state = _optimizer(*hyper).update(grads, state, params)
    return _apply_updates(params, updates), state, loss, _global_norm(grads)


def _hyper(hyper):
    return tuple(_device_put(np.float32(h)) for h in hyper)


_reference_init_jit = _jit(_reference_init, static_argnums=1)
_ref_update_jit = _jit(_ref_update)
_ref_step_jit = _jit(_ref_step)


def reference_update(ctx, hyper, params, grads, adam) -> dict:
    params, grads = to_jax(params), to_jax(grads)
    state, _ = _state_from(_optimizer(*hyper), params, adam)
    updates, new_state = _ref_update_jit(grads, state, params, _hyper(hyper))
    return {"adam_states": 1, "updates": updates, **_adam_of(new_state)}


def reference_step(ctx, hyper, params, adam, x, y) -> dict:
    params = to_jax(params)
    state, _ = _state_from(_optimizer(*hyper), params, adam)
    new_params, new_state, loss, grad_norm = _ref_step_jit(params, state, _device_put(x), _device_put(y),
                                                           _hyper(hyper))
    return {"params": new_params, "loss": _asarray(loss), "grad_norm": float(grad_norm), **_adam_of(new_state)}

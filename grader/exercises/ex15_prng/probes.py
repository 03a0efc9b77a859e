"""Probes for exercise 15 (PRNG discipline), run in the sandbox beside the learner's code, and the
truth, run in the clean worker.  Each returns plain data; the verdicts are the tests'.

Keys cross the sandbox as plain data, ``{"data": uint32[2], "kind": "typed" | "legacy"}``, and
are rebuilt on arrival by ``make_key``: ``jax.random.wrap_key_data(data)`` is the typed
``key<fry>[]`` that ``jax.random.key`` makes, the ``uint32[2]`` array itself is what the legacy
``jax.random.PRNGKey`` makes; both draw the same numbers.  A key a learner's function returns
goes back as ``key_facts``: its kind and data.

In the sandbox:

``init_values(ctx, keys, sizes)``
    ``init_mlp(key, sizes)`` for each key, each call with a key object of its own.
``init_draws(ctx, key, sizes)``
    the sizes of the random draws in ``init_mlp``'s program, traced once under our own
    ``jax.jit``, with what that program returned.
``dropout_values(ctx, cases)``
    ``dropout(key, x, rate, training)`` for each case.
``epoch_draws(ctx, key, params, batches, rate, lr)``
    the sizes of the random draws in one epoch's program, traced once under our own
    ``jax.jit``, with what that program returned.
``epoch_values(ctx, key, params, batches, rate, lr)``
    one ``train_epoch``; a second epoch started from the very key object the first returned;
    and the first again from a fresh copy of its key (same key, same epoch?).
``noise_values(ctx, cases)`` / ``noise_structure(ctx, key, batch_sizes, width)``
    ``per_example_noise(key, xs)`` for each case; the number of ``random_bits`` equations and of
    all equations in its jaxpr (nested ones included) at each batch size, that jaxpr being the
    one of ``per_example_noise(key, zeros(B, width))`` traced once under our own ``jax.jit``
    (``grader.probes.generic.traced_run``), returned with ``"outputs"``, what that very program
    drew: the trusted side compares them with the reference noise before it reads the counts,
    so a function that shows tracers a vmap and draws otherwise on concrete arrays is judged
    by the program it traced.
``key_reuse(ctx, target, ...)``
    JAX's key-reuse checker, the analysis ``jax.debug_key_reuse(True)`` runs, on the learner's
    function traced with a typed key: the ``KeyReuseError`` it raised, if any (tracing only, so
    it compiles nothing).  The learner's code can fool a checker in its own process, so the
    checks judge reuse by value as well, on the trusted side.

In the clean worker (no learner code): ``truth_bits`` (the random bits a key gives),
``truth_dropout``, ``truth_epoch`` (the epoch recomputed with the given ``sgd_step`` from the masks
the learner returned, and the bits each named key gives) and ``truth_noise``.

Every error of the learner's code is recorded as its first line (a ``NotImplementedError``
propagates, so the check says "not implemented").  JAX entry points are bound at import, before
the learner's module loads.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from grader.plaindata import as_plain_sequence as _as_plain_sequence
from grader import ir, jaxcompat
from grader.probes.errors import first_line_or_unimplemented as _first_line
from grader.probes.generic import traced_run
from grader.traced_work import HOST_CALLBACK_PRIMITIVES

_wrap_key_data = jax.random.wrap_key_data
_key_data = jax.random.key_data
_split = jax.random.split
_normal = jax.random.normal
_bernoulli = jax.random.bernoulli
_bits = jax.random.bits
_check_key_reuse = jaxcompat.key_reuse_checker()
_KeyReuseError = jax.errors.KeyReuseError
_issubdtype = jax.dtypes.issubdtype
_prng_key = jax.dtypes.prng_key
_Array = jax.Array
_device_put = jax.device_put
_block = jax.block_until_ready
_jit = jax.jit
_grad = jax.grad
_vmap = jax.vmap
_tree_map = jax.tree.map
_tanh = jnp.tanh
_where = jnp.where
_mean = jnp.mean
_asarray = np.asarray
_RANDOM_BITS = jaxcompat.RANDOM_BITS_PRIMITIVES
_LOOPS = (jaxcompat.SCAN_PRIMITIVE, jaxcompat.WHILE_PRIMITIVE)

MAX_DEPTH = 6


def make_key(spec: dict):
    """A key from its plain form: typed (``jax.random.key``'s kind) or legacy (``PRNGKey``'s)."""
    data = _device_put(np.asarray(spec["data"], np.uint32))
    return _wrap_key_data(data) if spec["kind"] == "typed" else data


def is_typed_key(value) -> bool:
    return isinstance(value, _Array) and _issubdtype(value.dtype, _prng_key)


def key_facts(value) -> dict:
    """What a returned key is: ``{"kind", "data"}`` for a typed ``key<fry>[]`` or a legacy
    ``uint32[2]``; ``{"kind": "other", "what": ...}`` for anything else."""
    if is_typed_key(value):
        if value.shape != ():
            return {"kind": "other", "what": f"a typed key array of shape {tuple(value.shape)}"}
        return {"kind": "typed", "data": _asarray(_key_data(value))}
    if isinstance(value, _Array) and value.dtype == np.uint32 and value.shape == (2,):
        return {"kind": "legacy", "data": _asarray(value)}
    what = f"{type(value).__module__}.{type(value).__qualname__}"
    if isinstance(value, _Array):
        what = f"an array {value.dtype}{list(value.shape)}"
    return {"kind": "other", "what": what}


def plain(value, depth: int = 0):
    """A learner's output as plain data: arrays as NumPy, keys as ``{"key": key_facts}``,
    lists, tuples and dicts with string keys kept; anything else as ``{"type": name}``."""
    if depth > MAX_DEPTH:
        return {"type": "too deep"}
    value = _as_plain_sequence(value)  # a NamedTuple is a tuple
    if is_typed_key(value):
        return {"key": key_facts(value)}
    if isinstance(value, _Array):
        return _asarray(value)
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return value.copy()
    if type(value) in (list, tuple):
        return [plain(v, depth + 1) for v in value]
    if type(value) is dict and all(type(k) is str for k in value):
        return {k: plain(v, depth + 1) for k, v in value.items()}
    if type(value) in (bool, int, float) or value is None:
        return value
    return {"type": f"{type(value).__module__}.{type(value).__qualname__}"}


def _attempt(fn, *args) -> dict:
    try:
        return {"out": _block(fn(*args))}
    except Exception as exc:  # noqa: BLE001 - measured, not judged
        return {"error": _first_line(exc)}


def _plain_attempt(fn, *args) -> dict:
    got = _attempt(fn, *args)
    return {"out": plain(got["out"])} if "out" in got else got


# --- part A: init_mlp ------------------------------------------------------------------------------

def init_values(ctx, keys: list, sizes: list) -> list:
    fn = ctx.function("init_mlp")
    return [_plain_attempt(fn, make_key(k), [int(s) for s in sizes]) for k in keys]


def init_draws(ctx, key: dict, sizes: list) -> dict:
    """``init_mlp(key, sizes)`` traced once under our own ``jax.jit``: its random draws by size
    (``_draws``) and what that very program returned (``"outputs"``), for the trusted side to
    compare with the layers the call itself gave."""
    fn = ctx.function("init_mlp")
    sizes = [int(s) for s in sizes]
    run = traced_run(lambda k: fn(k, sizes), make_key(key))
    if run.error is not None:
        return {"error": _first_line(run.error)}
    facts = _draws(run.jaxpr)
    return facts if "error" in facts else {**facts, "outputs": plain(run.outputs)}


def _draws(jaxpr) -> dict:
    """The random draws of a traced program by size (``ir.random_draws``): ``{"draws": [[elements
    one draw gives, how many such draws], ...], "in_while": bool}``, and ``"reused"``: the keys
    the program uses up twice, following copies (``ir.keys_used_twice``)."""
    try:
        draws, in_while = ir.random_draws(jaxpr)
        reused = ir.keys_used_twice(jaxpr)[:5]
    except Exception as exc:  # noqa: BLE001 - a primitive of the learner's (ir.ForeignPrimitive)
        return {"error": _first_line(exc)}
    return {"draws": sorted([int(k), int(v)] for k, v in draws.items()), "in_while": in_while, "reused": reused}


# --- part B: dropout -------------------------------------------------------------------------------

def dropout_values(ctx, cases: list) -> list:
    fn = ctx.function("dropout")
    return [_plain_attempt(fn, make_key(c["key"]), _device_put(c["x"]), float(c["rate"]), bool(c["training"]))
            for c in cases]


# --- part C: train_epoch ---------------------------------------------------------------------------

def _to_jax(tree):
    if isinstance(tree, np.ndarray):
        return _device_put(tree)
    if isinstance(tree, list):
        return [_to_jax(v) for v in tree]
    if isinstance(tree, tuple):
        return tuple(_to_jax(v) for v in tree)
    if isinstance(tree, dict):
        return {k: _to_jax(v) for k, v in tree.items()}
    return tree


def _epoch_facts(out) -> dict:
    """(params, key, masks) as plain data; the key object itself kept aside for chaining."""
    out = _as_plain_sequence(out)  # a NamedTuple is a tuple
    if type(out) not in (tuple, list) or len(out) != 3:
        return {"shape_error": f"train_epoch returned {plain(out) if type(out) in (tuple, list) else type(out).__name__}"
                               f" (expected a tuple (params, key, masks))"}
    params, key, masks = out
    if isinstance(masks, _Array) and not is_typed_key(masks) and masks.ndim == 3:
        masks = list(masks)  # a stacked (steps, B, H) array of masks: one mask per step
    return {"params": plain(params), "key": key_facts(key), "masks": plain(masks)}


def epoch_draws(ctx, key: dict, params, batches: list, rate: float, lr: float) -> dict:
    """One ``train_epoch`` traced once under our own ``jax.jit`` (the key, typed, and the
    parameters traced; batches, rate and lr as given): its random draws by size (``_draws``)
    and what that very program returned (``"outputs"``, as ``epoch_values`` reports an epoch)."""
    fn = ctx.function("train_epoch")
    rest = ([(_device_put(x), _device_put(y)) for x, y in batches], float(rate), float(lr))
    run = traced_run(lambda k, p: fn(k, p, *rest), make_key(_typed(key)), _to_jax(params))
    if run.error is not None:
        return {"error": _first_line(run.error)}
    facts = _draws(run.jaxpr)
    return facts if "error" in facts else {**facts, "outputs": _epoch_facts(run.outputs)}


def epoch_values(ctx, key: dict, params, batches: list, rate: float, lr: float) -> dict:
    fn = ctx.function("train_epoch")
    args = (_to_jax(params), [(_device_put(x), _device_put(y)) for x, y in batches], float(rate), float(lr))
    first = _attempt(fn, make_key(key), *args)
    if "error" in first:
        return {"first": first}
    facts = {"first": _epoch_facts(first["out"])}
    if "shape_error" in facts["first"]:
        return facts
    returned = first["out"][1]
    second = _attempt(fn, returned, *args)
    facts["second"] = _epoch_facts(second["out"]) if "out" in second else second
    again = _attempt(fn, make_key(key), *args)
    facts["again"] = _epoch_facts(again["out"]) if "out" in again else again
    return facts


# --- part D: per_example_noise ---------------------------------------------------------------------

def noise_values(ctx, cases: list) -> list:
    fn = ctx.function("per_example_noise")
    return [_plain_attempt(fn, make_key(c["key"]), _device_put(c["xs"])) for c in cases]


def noise_structure(ctx, key: dict, batch_sizes: list, width: int) -> list:
    """For each batch size, the ``random_bits`` equations and all equations of the jaxpr of
    ``per_example_noise`` (nested jaxprs included, each visit counted), its loops and host
    callbacks (``"loops"``: ``scan``, ``while``, ``pure_callback``, ``io_callback`` counts; and
    ``"scan_lengths"``), and the noise that same traced program drew on ``xs = 0``
    (``"outputs"``)."""
    fn = ctx.function("per_example_noise")
    out = []
    for b in batch_sizes:
        xs = _device_put(np.zeros((int(b), int(width)), np.float32))
        run = traced_run(fn, make_key(key), xs)
        if run.error is not None:
            out.append({"batch": int(b), "error": _first_line(run.error)})
            continue
        counts = ir.primitive_counts(run.jaxpr)
        out.append({"batch": int(b), "random_bits": sum(counts.get(p, 0) for p in _RANDOM_BITS),
                    "equations": sum(counts.values()), "outputs": plain(run.outputs),
                    "loops": {p: n for p, n in counts.items() if p in _LOOPS or p in HOST_CALLBACK_PRIMITIVES},
                    "scan_lengths": [int(e.params.get("length", 0)) for e in ir.walk_equations(run.jaxpr)
                                     if ir.primitive_name(e.primitive) == jaxcompat.SCAN_PRIMITIVE]})
    return out


# --- the reuse checker -----------------------------------------------------------------------------

def _typed(spec: dict) -> dict:
    return {"data": spec["data"], "kind": "typed"}


def key_reuse(ctx, target: str, key: dict, *args) -> dict:
    """JAX's key-reuse checker (``jaxcompat.key_reuse_checker``: what ``jax.debug_key_reuse(True)``
    runs) on ``target`` traced with a typed key: the ``KeyReuseError`` it raised, if any
    (``{"reuse": first line}``).  ``train_epoch`` is checked over one epoch, or (``args[-1]``,
    ``chain``) over two, the second started from the key the first returned.  Another error (a
    function that does not trace) is recorded apart, ``{"other": ...}``: the value checks judge
    such code."""
    fn = ctx.function(target)
    if target == "init_mlp":
        sizes = [int(s) for s in args[0]]

        def traced(k):
            return fn(k, sizes)
    elif target == "train_epoch":
        params, batches, rate, lr, chain = args
        rest = ([(_device_put(x), _device_put(y)) for x, y in batches], float(rate), float(lr))

        def traced(k, p):
            out = fn(k, p, *rest)
            return fn(out[1], out[0], *rest) if chain else out
    else:
        raise ValueError(f"no reuse probe for {target!r}")
    inputs = (make_key(_typed(key)),) + ((_to_jax(args[0]),) if target == "train_epoch" else ())
    try:
        _check_key_reuse(traced, *inputs)
    except _KeyReuseError as exc:
        return {"reuse": _first_line(exc)}
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001
        return {"other": _first_line(exc)}
    return {}


# --- the truth, in the clean worker ----------------------------------------------------------------

def _forward(params, x, keep, rate):
    """The stub's given ``forward``, ``loss`` and ``sgd_step``, op for op."""
    h = _tanh(x @ params[0]["w"] + params[0]["b"])
    h = _where(keep, h / (1.0 - rate), 0.0)
    return h @ params[1]["w"] + params[1]["b"]


def _loss(params, x, y, keep, rate):
    return _mean((_forward(params, x, keep, rate) - y) ** 2)


@_jit
def _sgd_step(params, x, y, keep, rate, lr):
    grads = _grad(_loss)(params, x, y, keep, rate)
    return _tree_map(lambda p, g: p - lr * g, params, grads)


def truth_bits(ctx, key: dict, n: int):
    """``jax.random.bits(key, (n,), uint32)``: the random bits the key itself gives, in the order
    every draw from it lays them out (``uniform``, ``normal`` and ``bernoulli`` are monotone
    functions of them; a shorter draw, or one of shape ``(a, b)`` with ``a * b <= n``, uses a
    prefix)."""
    return _asarray(_bits(make_key(key), (int(n),), np.uint32))


def truth_dropout(ctx, cases: list) -> list:
    out = []
    for c in cases:
        x = _device_put(c["x"])
        if not c["training"]:
            out.append(_asarray(x))
            continue
        rate = float(c["rate"])
        keep = _bernoulli(make_key(c["key"]), 1.0 - rate, x.shape)
        out.append(_asarray(_where(keep, x / (1.0 - rate), 0.0)))
    return out


def truth_epoch(ctx, params, batches: list, masks: list, rate: float, lr: float, keys: dict) -> dict:
    """The epoch recomputed from ``masks`` with the given ``sgd_step``; and for each named key
    the random bits it gives over the largest mask's size (``truth_bits``)."""
    p = _to_jax(params)
    for (x, y), keep in zip(batches, masks):
        p = _sgd_step(p, _device_put(x), _device_put(y), _device_put(keep), float(rate), float(lr))
    n = max((int(np.size(m)) for m in masks), default=0)
    return {"params": plain(p), "bits": {name: truth_bits(ctx, k, n) for name, k in keys.items()}}


def truth_noise(ctx, cases: list, alternatives: bool = False) -> list:
    """For each case the reference (``split(key, B)`` and ``vmap``); with ``alternatives``, a
    classic mistake instead, for a diagnosis: one draw for the whole batch."""
    out = []
    for c in cases:
        k, xs = make_key(c["key"]), _device_put(c["xs"])
        if alternatives:
            out.append({"one_draw": _asarray(xs + _normal(k, xs.shape))})
        else:
            out.append(_asarray(_vmap(lambda kk, x: x + _normal(kk, x.shape))(_split(k, xs.shape[0]), xs)))
    return out

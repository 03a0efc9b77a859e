"""Probes for `grade compare`: how a learner's function is built, measured on fixed inputs.

``fingerprint:measure(ctx, spec)`` takes one measurement of an exercise's spec
(``grader/exercises/<pkg>/compare.py``; plain data: a ``kind``, the learner function's name,
fixed inputs) and returns plain facts, never a verdict.  Kinds:

``jax``        trace ``target`` on the first call's inputs (``static`` keyword arguments
               bound first; ``transform = "grad"`` measures ``jax.grad`` of the sum of its
               first output instead): the canonical jaxpr (``grader.compare.jaxpr_canon``),
               primitive counts and equation counts; then run every call in ``calls``
               (same shapes, other values or argument kinds) while counting compiles of
               the learner's functions, and every compile after the first call
               (``later_compiles``: a function jitted afresh on each call); then XLA's ``cost_analysis`` (flops, bytes
               accessed) of the jitted function and its median run time.
               ``bind``: positional arguments bound before each call's own, held fixed (never
               traced): plain values (``clip_gradient(lo, hi, x)``'s bounds), or
               ``{"source", "fn_name"}``, a function the spec writes (``hvp(f, x, v)``'s ``f``).
``value``      call ``target`` once per call in ``calls`` and return the outputs (pure-Python
               functions; ``numpy = true`` hands arrays over as NumPy, as a data loader would).
``jaxpr_arg``  trace a function the spec writes (``source``) and hand the ``ClosedJaxpr``
               to ``target`` (exercise 6's ``count_primitives``); return its output.
``fn_arg``     hand ``target`` the function the spec writes itself, then
               ``jax.ShapeDtypeStruct``s of ``arg_specs`` and the keyword arguments ``kwargs``
               (exercise 9's ``ir_stats``, exercise 11's ``analyze``); return its output.
``mesh``       build a ``(data, model)`` mesh, place the host arrays with ``place``
               (``shard_inputs``), then compile ``target`` on them: the input layouts,
               collectives in the optimized HLO, cost analysis and run time.  Instead of
               ``place``: ``specs`` (one PartitionSpec per argument, as lists of axis names,
               applied to every leaf of that argument) or ``specs_from`` (a learner function
               returning ``{name: PartitionSpec}``, read in the order of ``arg_names``).
               ``mesh_arg``: ``target`` takes the mesh first (``target(mesh, *args)``);
               ``shard_map``: ``{"in_specs", "out_specs"}`` wraps ``target`` in our
               ``jax.shard_map`` over the mesh before it is jitted (``check_vma`` on).

``build`` (``jax`` and ``value``): objects the learner's code must make in the sandbox because
plain data cannot carry them (an Equinox Module, an optax state).  Each entry is
``{"target": name, "args": [...]}``, optionally with ``"method"`` and ``"method_args"``
(``make_optimizer(lr, clip, wd).init(params)``); ``{"built": i}`` in a call's arguments, or a
later entry's, stands for the i-th object.  They are made afresh for every call (so a
donating function gets its own).  With ``build``, the ``jax`` kind traces only the array
leaves of the arguments and of the output, and holds every other leaf fixed (a Python float
or bool, a string), as Equinox's filtered transformations do; its cost analysis is then that
of our ``jit`` of this function (an ``eqx.filter_jit``'s ``lower`` gives no JAX ``Lowered``).

A ``jax`` measurement of a function that donates its arguments times fresh copies of the
first call's inputs (the calls have consumed theirs).

``grow`` (``jax``): ``{"call": ..., "static": {...}}``, the same function at another size (a
larger batch, a larger ``max_steps``): it is traced there too, and ``grown`` says how many
equations it has and how long its loops are (``grader.compare.features`` reads how the
program grows with the size from it).

``jit`` (``jax``): run and time the function as one program under the grader's jit (what a
learner's jitted step does with it), not op by op: an optimizer's ``update`` run eagerly
compiles each of its operations alone, most of what measuring it would cost.  Its jaxpr
and cost are read as without it.

A step that fails is recorded in ``errors`` (``"<ExceptionType>: <first line>"``; a
``NotImplementedError`` as ``not_implemented``) and the other steps still run.  Every JAX
entry point is bound when this module is imported, before the learner's module loads.
"""

from __future__ import annotations

import functools
import re
import statistics
import time
from collections.abc import Mapping
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import stages as _stages
from jax.sharding import Mesh as _Mesh
from jax.sharding import NamedSharding as _NamedSharding
from jax.sharding import PartitionSpec as _P

from grader.compare import jaxpr_canon

try:  # bound now: this module may import nothing once learner code runs
    from jax._src import monitoring as _monitoring
except ImportError:  # pragma: no cover - a JAX without it: compile counts are not measured
    _monitoring = None

_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"  # fires once per XLA compilation
_JIT_NAME = re.compile(r"^(?:jit|pjit)\((.*)\)$")
_make_jaxpr = jax.make_jaxpr
_device_put = jax.device_put
_jit = jax.jit
_grad = jax.grad
_flatten = jax.tree_util.tree_flatten
_unflatten = jax.tree_util.tree_unflatten
_tree_leaves = jax.tree_util.tree_leaves
_block = jax.block_until_ready
_devices = jax.devices
_jsum = jnp.sum
_Array = jax.Array
_ShapeDtypeStruct = jax.ShapeDtypeStruct
_shard_map = jax.shard_map
_compile = _stages.Lowered.compile
_cost_analysis = _stages.Compiled.cost_analysis
_as_text = _stages.Compiled.as_text
_input_shardings = _stages.Compiled.input_shardings.fget
_run_compiled = _stages.Compiled.__call__
_asarray = np.asarray
_perf = time.perf_counter
_partial = functools.partial
_median = statistics.median
_NAMESPACE = {"jax": jax, "jnp": jnp, "lax": jax.lax}

MAX_OUTPUT_ELEMENTS = 4096
_PLAIN_DTYPES = frozenset(["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                           "float16", "float32", "float64", "complex64", "complex128", "bfloat16"])
_names_cache: dict[int, frozenset[str]] = {}


def _first_line(exc: BaseException, limit: int = 300) -> str:
    if isinstance(exc, NotImplementedError):
        return "not_implemented"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:limit] if text else ''}".rstrip(": ")


def _step(facts: dict, name: str, work: Callable[[], Any]) -> Any:
    """Run one measuring step; a failure is recorded under ``errors`` and gives None."""
    try:
        return work()
    except Exception as exc:  # noqa: BLE001 - measured, not judged
        facts.setdefault("errors", {})[name] = _first_line(exc)
        return None


def _plain(value: Any, depth: int = 0) -> Any:
    """Whatever the learner's code returned, as plain data (unknown objects as text)."""
    if depth > 8:
        return "<nested too deeply>"
    t = type(value)
    if value is None or t in (bool, str, int, float):
        return value
    if isinstance(value, (np.ndarray, np.generic, _Array)):
        arr = _asarray(value)
        if str(arr.dtype) not in _PLAIN_DTYPES:
            return f"<array of {arr.dtype}>"
        if arr.size > MAX_OUTPUT_ELEMENTS:
            return {"shape": list(arr.shape), "dtype": str(arr.dtype), "elements": int(arr.size)}
        return arr
    if isinstance(value, Mapping):
        return {str(k): _plain(v, depth + 1) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_plain(v, depth + 1) for v in value]
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return str(value)[:300]


def to_jax(tree: Any) -> Any:
    """NumPy arrays -> JAX arrays, recursively (``device_put``: nothing compiles)."""
    if isinstance(tree, np.ndarray):
        return _device_put(tree)
    if isinstance(tree, list):
        return [to_jax(x) for x in tree]
    if isinstance(tree, tuple):
        return tuple(to_jax(x) for x in tree)
    if isinstance(tree, dict):
        return {k: to_jax(v) for k, v in tree.items()}
    return tree


def _code_names(code, out: set[str]) -> None:
    out.add(code.co_name)
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            _code_names(const, out)


def _learner_names(ctx) -> frozenset[str]:
    """Names of every function the learner's module defines (nested ones included): a
    compilation of one of them is the learner's, any other is incidental."""
    module = getattr(ctx, "module", None)
    key = id(module)
    if key not in _names_cache:
        filename = getattr(module, "__file__", None)
        names: set[str] = set()
        for value in list(vars(module).values()) if module is not None else []:
            for _ in range(4):  # jit and partial wrappers keep the function in __wrapped__ / .func
                code = getattr(value, "__code__", None)
                if code is not None:
                    if filename is None or code.co_filename == filename:
                        _code_names(code, names)
                    break
                value = getattr(value, "__wrapped__", None) or getattr(value, "func", None)
                if value is None:
                    break
        _names_cache[key] = frozenset(names - {"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"})
    return _names_cache[key]


class _Compiles:
    """Counts XLA compilations by function name (``jax.monitoring``'s backend-compile event)."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def _listener(self, event: str, duration: float, **kw: Any) -> None:
        if event == _COMPILE_EVENT:
            name = str(kw.get("fun_name", ""))
            m = _JIT_NAME.match(name)
            self.names.append(m.group(1) if m else name)

    def __enter__(self) -> "_Compiles":
        if _monitoring is not None:
            _monitoring.register_event_duration_secs_listener(self._listener)
        return self

    def __exit__(self, *exc: Any) -> None:
        if _monitoring is not None:
            try:
                _monitoring.unregister_event_duration_listener(self._listener)
            except (AssertionError, ValueError):
                pass

    def by_name(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for n in self.names:
            counts[n] = counts.get(n, 0) + 1
        return counts


def _jaxpr_facts(facts: dict, closed) -> None:
    facts["jaxpr"] = jaxpr_canon.canonical_text(closed)
    facts["primitives"] = jaxpr_canon.primitive_counts(closed)
    facts["eqns"] = sum(1 for _ in jaxpr_canon.equations(closed))
    facts["top_level_eqns"] = len(getattr(closed, "jaxpr", closed).eqns)
    facts["structure"] = jaxpr_canon.structure(closed)


def _grown_facts(ctx, spec: dict) -> dict:
    """The program traced once more at another size (``grow``: a call with a larger batch,
    or other ``static`` values such as a larger ``max_steps``): how many equations it has
    there and how long its loops are, to tell how the program grows with the size."""
    grow = spec["grow"]
    f, _ = _target(ctx, {**spec, "static": grow.get("static", spec.get("static") or {})})
    args, kwargs = _prepare(ctx, spec, grow["call"])
    if spec.get("build"):
        traced, arrays = _arrays_only(f, args, kwargs)
        closed = _make_jaxpr(traced)(*arrays)
    else:
        closed = _make_jaxpr(f)(*args, **kwargs)
    shape = jaxpr_canon.structure(closed)
    return {"eqns": sum(shape["paths"].values()), "loops": shape["loops"]}


def _cost_facts(facts: dict, compiled) -> None:
    cost = _cost_analysis(compiled)
    if isinstance(cost, (list, tuple)):
        cost = cost[0] if cost else {}
    cost = dict(cost or {})
    facts["flops"] = float(cost.get("flops", -1.0))
    facts["bytes_accessed"] = float(cost.get("bytes accessed", -1.0))


def _timed(run: Callable[[], Any], reps: int) -> float:
    times = []
    for _ in range(max(1, reps)):
        t0 = _perf()
        _block(run())
        times.append(_perf() - t0)
    return float(_median(times))


def _timed_fresh(f: Callable, inputs: list) -> float:
    """The median time of ``f`` on each of ``inputs`` (one fresh ``(args, kwargs)`` per run)."""
    times = []
    for a, k in inputs:
        t0 = _perf()
        _block(f(*a, **k))
        times.append(_perf() - t0)
    return float(_median(times))


def _first_output(out: Any) -> Any:
    return out[0] if isinstance(out, (tuple, list)) else out


def _target(ctx, spec: dict) -> tuple[Callable, Callable]:
    """The function to measure, and how to lower it for XLA's cost analysis: through the
    learner's own ``jit`` when it has one (its executable is then already compiled by the
    calls, so nothing compiles twice), else through a ``jit`` of ours.  A target
    ``{"built": i, "method": name}`` is a method of an object ``build`` makes (an optax
    optimizer's ``update``)."""
    target = spec["target"]
    if isinstance(target, dict):
        fn = getattr(_build(ctx, spec["build"])[int(target["built"])], str(target["method"]))
        return fn, _jit(fn).lower
    fn = ctx.function(target)
    bound = tuple(_spec_function(b["source"], b["fn_name"]) if isinstance(b, Mapping) else b
                  for b in spec.get("bind") or ())
    static = spec.get("static") or {}
    f = _partial(fn, *bound, **static) if bound or static else fn
    if spec.get("transform") == "grad":
        argnums = tuple(spec.get("argnums", [0]))
        inner = f
        g = _grad(lambda *a, **k: _jsum(_first_output(inner(*a, **k))), argnums=argnums)
        return g, _jit(g).lower
    own_lower = getattr(fn, "lower", None)
    if callable(own_lower) and not bound:
        return f, lambda *a, **k: own_lower(*a, **static, **k)
    return f, _jit(f).lower


def _resolve(tree: Any, built: list) -> Any:
    """``{"built": i}`` placeholders -> the objects ``build`` made."""
    if isinstance(tree, dict):
        if set(tree) == {"built"} and isinstance(tree["built"], int):
            return built[tree["built"]]
        return {k: _resolve(v, built) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_resolve(x, built) for x in tree]
    if isinstance(tree, tuple):
        return tuple(_resolve(x, built) for x in tree)
    return tree


def _build(ctx, steps: list) -> list:
    built: list = []
    for step in steps:
        obj = ctx.function(step["target"])(*_resolve(to_jax(list(step.get("args", []))), built))
        if step.get("method"):
            obj = getattr(obj, step["method"])(*_resolve(to_jax(list(step.get("method_args", []))), built))
        built.append(obj)
    return built


def _prepare(ctx, spec: dict, call: dict, convert: bool = True) -> tuple[list, dict]:
    """One call's arguments: arrays made JAX arrays (``convert``), placeholders resolved."""
    args, kwargs = list(call.get("args", [])), dict(call.get("kwargs", {}))
    if convert:
        args, kwargs = to_jax(args), to_jax(kwargs)
    if not spec.get("build"):
        return args, kwargs
    built = _build(ctx, spec["build"])
    return _resolve(args, built), _resolve(kwargs, built)


def _arrays_only(f: Callable, args: list, kwargs: dict) -> tuple[Callable, list]:
    """``f`` as a function of the array leaves of its arguments alone (every other leaf held
    fixed), returning the array leaves of its output: what ``build``'s objects are traced as."""
    leaves, treedef = _flatten((args, kwargs))
    mask = [isinstance(leaf, _Array) for leaf in leaves]

    def g(*arrays):
        it = iter(arrays)
        a, k = _unflatten(treedef, [next(it) if m else leaf for leaf, m in zip(leaves, mask)])
        return [leaf for leaf in _tree_leaves(f(*a, **k)) if isinstance(leaf, _Array)]

    return g, [leaf for leaf, m in zip(leaves, mask) if m]


def _under_jit(f: Callable, calls: list) -> Callable:
    """``f`` run as one program under the grader's jit, for a measurement that asks for it
    (``"jit": True``): a function that is not jitted itself (an optimizer's ``update``) would
    otherwise run op by op, each op an XLA compilation of its own.  A call whose non-array
    leaves are not the first call's, or that the jit refuses (an output that is not arrays),
    runs ``f`` as it is."""
    args0, kwargs0 = calls[0]
    leaves0, treedef0 = _flatten((list(args0), kwargs0))
    mask0 = [isinstance(leaf, _Array) for leaf in leaves0]

    def under_graders_jit(*arrays):
        it = iter(arrays)
        a, k = _unflatten(treedef0, [next(it) if m else leaf for leaf, m in zip(leaves0, mask0)])
        return f(*a, **k)

    jitted = _jit(under_graders_jit)

    def run(*a, **kw):
        leaves, treedef = _flatten((list(a), kw))
        if treedef != treedef0 or [isinstance(leaf, _Array) for leaf in leaves] != mask0 or not all(
                m or _same_leaf(x, y) for x, y, m in zip(leaves, leaves0, mask0)):
            return f(*a, **kw)
        try:
            return jitted(*[leaf for leaf, m in zip(leaves, mask0) if m])
        except Exception:
            return f(*a, **kw)

    return run


def _same_leaf(x: Any, y: Any) -> bool:
    if x is y:
        return True
    try:
        return type(x) is type(y) and bool(x == y)
    except Exception:
        return False


def _deleted(tree: Any) -> bool:
    return any(isinstance(leaf, _Array) and leaf.is_deleted() for leaf in _tree_leaves(tree))


def _measure_jax(ctx, spec: dict) -> dict:
    f, lower = _target(ctx, spec)
    facts: dict = {}
    calls = _step(facts, "build", lambda: [_prepare(ctx, spec, c) for c in spec["calls"]])
    if calls is None:
        return facts
    _block(calls)
    args, kwargs = calls[0]
    if spec.get("build"):
        traced, arrays = _arrays_only(f, args, kwargs)
        trace_args, trace_kwargs = arrays, {}
        lower = lambda *a, **k: _jit(traced).lower(*arrays)  # noqa: E731 - a filter_jit's lower is no jax Lowered
    else:
        traced, trace_args, trace_kwargs = f, args, kwargs
    closed = _step(facts, "jaxpr", lambda: _make_jaxpr(traced)(*trace_args, **trace_kwargs))
    if closed is not None:
        _step(facts, "jaxpr", lambda: _jaxpr_facts(facts, closed))
    if spec.get("grow") and closed is not None:
        facts["grown"] = _step(facts, "grow", lambda: _grown_facts(ctx, spec))
    names = _learner_names(ctx)
    run = _under_jit(f, calls) if spec.get("jit") else f

    def run_calls():
        outs, later = [], 0
        with _Compiles() as rec:
            for k, (a, kw) in enumerate(calls):
                before = len(rec.names)
                outs.append(_block(run(*a, **kw)))
                later += (len(rec.names) - before) if k else 0
        by_name = rec.by_name()
        facts["compiles"] = sum(n for name, n in by_name.items() if name in names)
        facts["compiles_by_name"] = by_name
        facts["later_compiles"] = later  # any compilation after the first call, whoever's it is
        facts["output"] = _plain(outs[0])

    _step(facts, "run", run_calls)
    if "run" not in facts.get("errors", {}):
        reps = spec.get("reps", 3)
        if _deleted(calls[0]):  # a donating function consumed its inputs: time fresh copies
            facts["seconds"] = _step(facts, "time", lambda: _timed_fresh(
                f, [_block(_prepare(ctx, spec, spec["calls"][0])) for _ in range(max(1, reps))]))
        else:
            facts["seconds"] = _step(facts, "time", lambda: _timed(lambda: run(*args, **kwargs), reps))
    _step(facts, "cost", lambda: _cost_facts(facts, _compile(lower(*args, **kwargs))))
    return facts


def _measure_value(ctx, spec: dict) -> dict:
    fn = ctx.function(spec["target"])
    facts: dict = {}
    calls = _step(facts, "build", lambda: [_prepare(ctx, spec, c, convert=not spec.get("numpy"))
                                           for c in spec["calls"]])
    if calls is None:
        return facts
    t0 = _perf()
    outs = _step(facts, "run", lambda: [_block(fn(*a, **k)) for a, k in calls])
    if outs is not None:
        facts["seconds"] = (_perf() - t0) / max(1, len(calls))
        facts["output"] = _step(facts, "output", lambda: _plain(outs))
    return facts


def _spec_function(source: str, fn_name: str) -> Callable:
    namespace = dict(_NAMESPACE)
    namespace["__name__"] = "compare_fixed_input"
    exec(compile(source, "<grade-compare-spec>", "exec"), namespace)  # source from the trusted spec
    return namespace[fn_name]


def _shape_structs(arg_specs: list) -> list:
    return [_ShapeDtypeStruct(tuple(shape), dtype) for shape, dtype in arg_specs]


def _trace_source(source: str, fn_name: str, arg_specs: list):
    return _make_jaxpr(_spec_function(source, fn_name))(*_shape_structs(arg_specs))


def _measure_jaxpr_arg(ctx, spec: dict) -> dict:
    fn = ctx.function(spec["target"])
    closed = _trace_source(spec["source"], spec["fn_name"], spec["arg_specs"])
    facts: dict = {}
    t0 = _perf()
    out = _step(facts, "run", lambda: fn(closed))
    if "run" not in facts.get("errors", {}):
        facts["seconds"] = _perf() - t0
        facts["output"] = _step(facts, "output", lambda: _plain(out))
    return facts


def _measure_fn_arg(ctx, spec: dict) -> dict:
    fn = ctx.function(spec["target"])
    given = _spec_function(spec["source"], spec["fn_name"])
    args, kwargs = _shape_structs(spec["arg_specs"]), dict(spec.get("kwargs") or {})
    facts: dict = {}
    t0 = _perf()
    out = _step(facts, "run", lambda: fn(given, *args, **kwargs))
    if "run" not in facts.get("errors", {}):
        facts["seconds"] = _perf() - t0
        facts["output"] = _step(facts, "output", lambda: _plain(out))
    return facts


def _layout(sharding, shape: tuple) -> dict:
    """A layout independent of how it was spelled: the block each device holds."""
    blocks = {tuple((sl.indices(n)[0], sl.indices(n)[1]) for sl, n in zip(index, shape))
              for index in sharding.devices_indices_map(shape).values()}
    spec = getattr(sharding, "spec", None)
    return {"shard_shape": [int(n) for n in sharding.shard_shape(shape)], "distinct_blocks": len(blocks),
            "spec": None if spec is None else str(spec)}


def _spec(entries) -> Any:
    return entries if isinstance(entries, _P) else _P(*entries)


def _placed_by_specs(ctx, spec: dict, mesh, host: list) -> list:
    """The host arguments placed by the grader: ``specs``, or the learner's ``specs_from``."""
    if "specs_from" in spec:
        given = ctx.function(spec["specs_from"])()
        specs = [given[name] for name in spec["arg_names"]]
    else:
        specs = spec["specs"]
    return [_device_put(a, _NamedSharding(mesh, _spec(s))) for a, s in zip(host, specs)]


def _measure_mesh(ctx, spec: dict) -> dict:
    d, m = (int(n) for n in spec["mesh_shape"])
    mesh = _Mesh(np.array(_devices()[: d * m]).reshape(d, m), tuple(spec["axes"]))
    host = [_asarray(a) if isinstance(a, np.ndarray) else a for a in spec["args"]]
    facts: dict = {}
    if "place" in spec:
        placed = _step(facts, "place", lambda: ctx.function(spec["place"])(mesh, *host))
    else:
        placed = _step(facts, "place", lambda: _placed_by_specs(ctx, spec, mesh, host))
    if placed is None:
        return facts
    items = list(placed) if isinstance(placed, (list, tuple)) else []
    if len(items) != len(host) or not all(isinstance(a, _Array) for a in _tree_leaves(items)):
        facts.setdefault("errors", {})["place"] = f"{spec.get('place', 'placing')} did not give {len(host)} JAX arrays"
        return facts
    fn = ctx.function(spec["target"])
    if spec.get("mesh_arg"):
        fn = _partial(fn, mesh)
    if spec.get("shard_map"):
        wrap = spec["shard_map"]
        fn = _shard_map(fn, mesh=mesh, in_specs=tuple(_spec(s) for s in wrap["in_specs"]),
                        out_specs=_spec(wrap["out_specs"]))
    closed = _step(facts, "jaxpr", lambda: _make_jaxpr(fn)(*items))
    if closed is not None:
        _jaxpr_facts(facts, closed)
    compiled = _step(facts, "compile", lambda: _compile(_jit(fn).lower(*items)))
    if compiled is None:
        return facts
    facts["layouts"] = [_layout(s, tuple(a.shape))
                        for s, a in zip(_tree_leaves(_input_shardings(compiled)[0]), _tree_leaves(items))]
    facts["collectives"] = jaxpr_canon.collective_counts(_as_text(compiled))
    _step(facts, "cost", lambda: _cost_facts(facts, compiled))
    facts["output"] = _step(facts, "run", lambda: _plain(_block(_run_compiled(compiled, *items))))
    facts["seconds"] = _step(facts, "time", lambda: _timed(lambda: _run_compiled(compiled, *items),
                                                           spec.get("reps", 5)))
    return facts


_KINDS: dict[str, Callable[[Any, dict], dict]] = {
    "jax": _measure_jax, "value": _measure_value, "jaxpr_arg": _measure_jaxpr_arg, "fn_arg": _measure_fn_arg,
    "mesh": _measure_mesh,
}


def measure(ctx, spec: dict) -> dict:
    """One measurement of a spec (see the module docstring); plain facts."""
    kind = spec.get("kind")
    if kind not in _KINDS:
        raise ValueError(f"unknown measurement kind {kind!r}")
    t0 = _perf()
    facts = _KINDS[kind](ctx, spec)
    facts["wall_s"] = _perf() - t0
    return facts

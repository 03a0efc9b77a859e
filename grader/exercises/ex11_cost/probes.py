"""Probes for exercise 11 (cost, memory and honest timing).

The functions the learner's ``analyze`` is handed (``FUNCTIONS``) and the timing workload
live here, so the sandbox (which measures the learner) and the clean worker (which
measures the truth, manifest ``clean_worker = true``) compile exactly the same programs.

In the clean worker, with no learner code:

``dot_costs`` / ``elementwise_costs``
    ``cost_analysis()`` of the compiled ``x @ w`` and ``tanh(x * y + 1)`` per drawn shape.
``reports``
    ``cost_analysis()`` and ``memory_analysis()`` of each drawn (function, shapes, donated
    arguments), plus the *unoptimized* program's cost (``Lowered.cost_analysis()``), which
    the checks use to say "you read the program before XLA optimized it".

In the sandbox, beside the learner's code:

``analyze_each``
    the learner's ``analyze(fn, *args, donate_argnums=...)`` per drawn case.
``benchmark_against_probe``
    for a light and a heavy workload: the probe's own compile and run times of the
    workload, then the learner's ``benchmark`` of an equivalent copy (the heavy one with
    more repeats: a total of the repeats stands out), then the probe's again.  Every copy multiplies by its own constant (from the clock), so no copy can
    reuse another's compiled program, in memory or in a persistent compile cache.

All of it measures; the trusted checks decide.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

# Bound at import time (probe modules load before the learner's module does).
from grader import jaxcompat

_jit = jax.jit
_compilations = jaxcompat.jax_caches()["compiles"][2]  # bound before the learner's module loads
_lowerings = jaxcompat.lowering_cache()
_Tracer = jax.core.Tracer
_module_name = jaxcompat.module_name
_block = jax.block_until_ready
_device_put = jax.device_put
_sds = jax.ShapeDtypeStruct
_perf = time.perf_counter
_time_ns = time.time_ns
_tanh, _relu, _softmax, _sum = jnp.tanh, jax.nn.relu, jax.nn.softmax, jnp.sum
_debug_callback, _effects_barrier, _as_array = jax.debug.callback, jax.effects_barrier, np.asarray


# --- the functions of Part B (names are what the checks draw) ---------------------------
def ex11_matmul(x, w):
    return x @ w


def ex11_chain(x, y):
    return _tanh(x * y + 1.0)


def ex11_layer(x, w, b):
    return _relu(x @ w + b)


def ex11_twice(x, w):
    return (x @ w) + (x @ w)  # XLA computes the product once


def ex11_softmax(x):
    return _softmax(x, axis=-1)


def ex11_update(w, g):
    return w - 0.1 * g  # analysed with w donated


def ex11_sumsq(x):
    return _sum(x * x)


FUNCTIONS = {"matmul": ex11_matmul, "chain": ex11_chain, "layer": ex11_layer, "twice": ex11_twice,
             "softmax": ex11_softmax, "update": ex11_update, "sumsq": ex11_sumsq}


def _costs(cost: dict) -> dict:
    return {"flops": float(cost.get("flops", 0.0)), "bytes": float(cost.get("bytes accessed", 0.0)),
            "transcendentals": float(cost.get("transcendentals", 0.0))}


def _compiled(fn, specs, donate=()):
    return _jit(fn, donate_argnums=tuple(donate)).lower(*[_sds(tuple(s), d) for s, d in specs]).compile()


# --- truth, in the clean worker -----------------------------------------------------------
def dot_costs(ctx, shapes: list) -> list:
    """``[(m, k, n), ...]`` -> the compiled f32 ``x @ w``'s flops, bytes and transcendentals."""
    return [_costs(_compiled(ex11_matmul, [((m, k), "float32"), ((k, n), "float32")]).cost_analysis())
            for m, k, n in shapes]


def elementwise_costs(ctx, cases: list) -> list:
    """``[(shape, dtype), ...]`` -> the compiled ``tanh(x * y + 1)``'s costs."""
    return [_costs(_compiled(ex11_chain, [(shape, dtype), (shape, dtype)]).cost_analysis()) for shape, dtype in cases]


def reports(ctx, cases: list) -> list:
    """``[{"name", "shapes", "donate"}, ...]`` (f32 arguments) -> what the compiled program's
    analyses say, and the unoptimized program's cost."""
    out = []
    for case in cases:
        specs = [(tuple(s), "float32") for s in case["shapes"]]
        lowered = _jit(FUNCTIONS[case["name"]], donate_argnums=tuple(case["donate"])).lower(
            *[_sds(s, d) for s, d in specs])
        compiled = lowered.compile()
        mem = compiled.memory_analysis()
        out.append({**_costs(compiled.cost_analysis()),
                    "argument_bytes": int(mem.argument_size_in_bytes), "output_bytes": int(mem.output_size_in_bytes),
                    "alias_bytes": int(mem.alias_size_in_bytes),
                    "unoptimized": _costs(lowered.cost_analysis())})
    return out


# --- the learner's analyze, in the sandbox --------------------------------------------------
def analyze_each(ctx, cases: list, seed: int) -> list:
    """The learner's ``analyze`` on each case, with f32 arguments drawn from ``seed``."""
    analyze = ctx.function("analyze")
    rng = np.random.default_rng(seed)
    out = []
    for case in cases:
        args = [_device_put(rng.normal(size=tuple(s)).astype(np.float32)) for s in case["shapes"]]
        _block(args)
        out.append(analyze(FUNCTIONS[case["name"]], *args, donate_argnums=tuple(case["donate"])))
    return out


# --- timing, in the sandbox ------------------------------------------------------------------
def _workload(salt: float, traced: list | None = None, ran: list | None = None, depth: int = 1):
    """A fresh function (its own constant): ``depth`` layers of one matmul and a tanh each (the
    light workload is several small layers, slower to compile than the heavy one's single
    large layer, and quicker to run).  Each time it is traced
    (called with tracers: under ``jax.jit``, or inside a wrapper that ``jax.jit`` traces) it
    appends to ``traced``.  With ``ran`` every execution of it, compiled or eager, appends the
    bytes of its output's first row to ``ran`` (a host callback in the program): the runs can
    be counted, and a record is only worth one when its bytes are what running the program
    gives (``_runs``)."""
    def record(row):
        ran.append(_as_array(row).tobytes())

    def ex11_workload(x, w):
        if traced is not None and isinstance(x, _Tracer):
            traced.append(True)
        y = _tanh((x @ w) * salt + 0.01)
        for layer in range(1, depth):
            y = _tanh((y @ w) * (salt + layer / 64.0) + 0.01)
        if ran is not None:
            _debug_callback(record, y[0])
        return y
    return ex11_workload


def _runs(fn, args, ran: list) -> int:
    """How many of ``ran``'s records (made during the learner's ``benchmark(fn, ...)``) are
    real runs of ``fn`` on ``args``: bytes equal to what the grader's own run of the compiled
    ``fn`` records, or of ``fn`` called eagerly (op by op, whose last bits may differ).  A
    record is the program's output; one made up is worth nothing."""
    _effects_barrier()  # a run the learner did not wait for still records
    mine = list(ran)
    _block(_jit(fn)(*args))
    _block(fn(*args))
    _effects_barrier()
    truths = {r for r in ran[len(mine):] if type(r) is bytes}
    return sum(1 for r in mine if type(r) is bytes and r in truths)


def _compiles_since(before: int, sentinel) -> int:
    """XLA compilations since the compile cache's miss counter read ``before``.  A learner who
    calls ``jax.clear_caches()`` restarts the counter (and drops ``sentinel``'s entry): then
    what it counts now are compilations since the clear."""
    now = _compilations.cache_info().misses
    cleared = now < before or not any(k[0]() is sentinel for k in _compilations.cache_keys() if callable(k[0]))
    return now if cleared else now - before


_SENTINEL: list = []


def _compile_sentinel():
    """An entry of the compile cache this module keeps alive, planted again after a clear."""
    if not _SENTINEL or not any(k[0]() is _SENTINEL[0] for k in _compilations.cache_keys() if callable(k[0])):
        _SENTINEL[:] = jaxcompat.plant_sentinels()["compiles"][:1] or [None]
    return _SENTINEL[0]


def _salt(k: int) -> float:
    """A constant no earlier copy used (a multiple of 2**-16, exact in float32)."""
    return 1.0 + ((_time_ns() // 1000) % 4093 * 8 + k) / 65536.0


def _own_timing(args, repeats: int, k: int, depth: int) -> dict:
    """Compile a fresh copy ahead of time (trace, lower, compile), warm it up, then time
    ``repeats`` blocked calls; the run time is their median."""
    t0 = _perf()
    compiled = _jit(_workload(_salt(k), depth=depth)).lower(*args).compile()
    compile_s = _perf() - t0
    _block(compiled(*args))
    runs = []
    for _ in range(repeats):
        t0 = _perf()
        _block(compiled(*args))
        runs.append(_perf() - t0)
    return {"compile": compile_s, "run": sorted(runs)[len(runs) // 2]}


def benchmark_against_probe(ctx, sizes: dict, repeats, seed: int, again: dict | None = None) -> dict:
    """For each workload ``{"light": [n, depth], "heavy": [n, depth]}`` (``depth`` layers of
    f32[n, n] @ f32[n, n] then tanh; a plain ``n`` is one layer): the
    probe's own timing, the learner's ``benchmark(fn, x, w, repeats=...)`` of another fresh
    copy, and the probe's timing again.  ``repeats``: an int for every workload, or
    ``{label: int}`` (the probe's own timing uses the light workload's).  ``again``
    (``{label: repeats}``): benchmark that workload a second time, on another fresh copy, with
    other repeats -- a median does not move with repeats, a total does.

    Evidence that the learner's times measured something: XLA compiled during the call
    (JAX's compile cache, read around it, robust to ``jax.clear_caches()``), and ``fn`` was
    traced -- lowered by ``jax.jit`` under its own name, or traced inside a wrapper that
    ``jax.jit`` compiles (``jax.jit(lambda *a: fn(*a))`` traces and compiles fn's work)."""
    benchmark = ctx.function("benchmark")
    rng = np.random.default_rng(seed)
    counts = repeats if isinstance(repeats, dict) else {label: repeats for label in sizes}
    own = int(counts.get("light", min(counts.values())))
    out = {}
    for i, (label, size) in enumerate(sorted(sizes.items())):
        n, depth = (size, 1) if isinstance(size, int) else (int(size[0]), int(size[1]))
        args = [_device_put(rng.normal(size=(n, n)).astype(np.float32)),
                _device_put((rng.normal(size=(n, n)) / np.sqrt(n)).astype(np.float32))]
        _block(args)
        before = _own_timing(args, own, 3 * i, depth)
        traced: list = []
        fn = _workload(_salt(3 * i + 1), traced, depth=depth)
        fn.__name__ = fn.__qualname__ = f"ex11_workload_{label}"  # its own module name: jit(ex11_workload_heavy)
        sentinel = _compile_sentinel()
        compiled_before = _compilations.cache_info().misses
        learner = benchmark(fn, *args, repeats=int(counts[label]))
        # evidence, from JAX's own caches, that the timings measured something: fn was lowered
        # (its module is in the lowering cache while fn lives, or it was traced during the call)
        # and XLA compiled during the call
        evidence = {"compiles": _compiles_since(compiled_before, sentinel),
                    "lowered": bool(traced) or any(_module_name(key) == f"jit({fn.__name__})"
                                                   for key in _lowerings.cache_keys())}
        after = _own_timing(args, own, 3 * i + 2, depth)
        out[label] = {"probe": [before, after], "learner": learner, "evidence": evidence,
                      "repeats": int(counts[label])}
        if again and label in again:
            # this copy counts its runs (a host callback: its calls no longer return before the
            # result is ready, so the copies the no-block rule reads go without one)
            ran: list = []
            fn_again = _workload(_salt(3 * i + 3), None, ran, depth)
            out[label].update(learner_again=benchmark(fn_again, *args, repeats=int(again[label])),
                              repeats_again=int(again[label]), runs_again=_runs(fn_again, args, ran))
    return out

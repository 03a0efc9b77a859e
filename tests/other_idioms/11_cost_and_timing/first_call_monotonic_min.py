"""Generic shape/dtype arithmetic (numpy itemsize); first-call compile timing with time.monotonic_ns; min of runs blocked via .block_until_ready() on each output leaf."""

import functools
import operator
import time

import jax
import numpy as np


def dot_cost(m, k, n):
    shapes_read = [(m, k), (k, n)]
    shape_written = (m, n)
    itemsize = np.dtype(np.float32).itemsize
    elements = sum(functools.reduce(operator.mul, s, 1) for s in shapes_read + [shape_written])
    # m * n outputs, each a dot product of length k: k multiplies and k adds
    return {"flops": m * n * k * 2, "bytes": elements * itemsize}


def elementwise_cost(shape, dtype):
    n = functools.reduce(operator.mul, tuple(shape), 1)
    width = np.dtype(dtype).itemsize
    n_inputs, n_outputs = 2, 1
    arithmetic_ops = 2  # x * y, then + 1.0
    return {"flops": arithmetic_ops * n, "transcendentals": 1 * n, "bytes": (n_inputs + n_outputs) * n * width}


def _as_dict(cost):
    # this JAX returns a dict; older versions a list with one dict
    if isinstance(cost, (list, tuple)):
        cost = cost[0] if cost else {}
    return dict(cost or {})


def analyze(fn, *args, donate_argnums=()):
    traced = jax.jit(fn, donate_argnums=tuple(donate_argnums)).trace(*args)
    compiled = traced.lower().compile()
    cost = _as_dict(compiled.cost_analysis())
    mem = compiled.memory_analysis()
    report = {key: float(cost[name]) if name in cost else 0.0
              for key, name in (("flops", "flops"), ("bytes", "bytes accessed"),
                                ("transcendentals", "transcendentals"))}
    report["intensity"] = report["flops"] / report["bytes"] if report["bytes"] else 0.0
    report["argument_bytes"] = mem.argument_size_in_bytes
    report["output_bytes"] = mem.output_size_in_bytes
    report["alias_bytes"] = mem.alias_size_in_bytes
    return report


def _wait(out):
    for leaf in jax.tree.leaves(out):
        leaf.block_until_ready()
    return out


def benchmark(fn, *args, repeats=5):
    f = jax.jit(fn)  # lazy: nothing compiled yet
    t0 = time.monotonic_ns()
    _wait(f(*args))  # first call = trace + lower + compile + one run
    compile_seconds = (time.monotonic_ns() - t0) / 1e9

    _wait(f(*args))  # warm-up
    best = None
    for _ in range(repeats):
        t0 = time.monotonic_ns()
        _wait(f(*args))
        elapsed = (time.monotonic_ns() - t0) / 1e9
        best = elapsed if best is None else min(best, elapsed)
    return compile_seconds, best

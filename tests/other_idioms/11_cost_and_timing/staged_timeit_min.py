"""Shape products with numpy; trace/lower/compile timed stage by stage with timeit.default_timer; timeit.repeat (number=1) minimum of blocked runs."""

import timeit

import jax
import numpy as np

_BYTES_PER = {"float32": 4, "float16": 2}


def dot_cost(m, k, n):
    x_elems, w_elems, out_elems = m * k, k * n, m * n
    return {"flops": int(2 * k * out_elems), "bytes": int(_BYTES_PER["float32"] * (x_elems + w_elems + out_elems))}


def elementwise_cost(shape, dtype):
    n = int(np.prod(np.asarray(shape, dtype=np.int64)))
    per = _BYTES_PER[str(dtype)]
    return {"flops": int(2 * n), "bytes": int(3 * n * per), "transcendentals": int(n)}


def analyze(fn, *args, donate_argnums=()):
    lowered = jax.jit(fn, donate_argnums=donate_argnums).lower(*args)
    compiled = lowered.compile()
    cost = compiled.cost_analysis() or {}
    flops = cost.get("flops") or 0.0
    accessed = cost.get("bytes accessed") or 0.0
    trans = cost.get("transcendentals") or 0.0
    mem = compiled.memory_analysis()
    return dict(
        flops=float(flops),
        bytes=float(accessed),
        transcendentals=float(trans),
        intensity=float(flops) / float(accessed),
        argument_bytes=int(mem.argument_size_in_bytes),
        output_bytes=int(mem.output_size_in_bytes),
        alias_bytes=int(mem.alias_size_in_bytes),
    )


def benchmark(fn, *args, repeats=5):
    clock = timeit.default_timer
    t_trace = clock()
    traced = jax.jit(fn).trace(*args)
    t_lower = clock()
    lowered = traced.lower()
    t_compile = clock()
    compiled = lowered.compile()
    t_done = clock()
    compile_seconds = (t_lower - t_trace) + (t_compile - t_lower) + (t_done - t_compile)

    def once():
        jax.block_until_ready(compiled(*args))

    once()  # warm-up
    runs = timeit.repeat(once, number=1, repeat=repeats)
    return compile_seconds, min(runs)

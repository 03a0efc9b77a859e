"""Explicit formulas; AOT lower().compile() timed with time.perf_counter; median of blocked runs via jax.block_until_ready."""

import math
import statistics
import time

import jax


def dot_cost(m, k, n):
    flops = 2 * m * k * n                 # one multiply and one add per term
    nbytes = 4 * (m * k + k * n + m * n)  # read x and w, write the result, float32
    return {"flops": flops, "bytes": nbytes}


def elementwise_cost(shape, dtype):
    size = math.prod(shape)
    itemsize = {"float32": 4, "float16": 2}[dtype]
    return {
        "flops": 2 * size,            # the multiply and the add
        "bytes": 3 * size * itemsize,  # read x, read y, write the result (one fused loop)
        "transcendentals": size,      # the tanh
    }


def analyze(fn, *args, donate_argnums=()):
    compiled = jax.jit(fn, donate_argnums=donate_argnums).lower(*args).compile()
    cost = compiled.cost_analysis()
    mem = compiled.memory_analysis()
    flops = float(cost.get("flops", 0.0))
    nbytes = float(cost.get("bytes accessed", 0.0))
    return {
        "flops": flops,
        "bytes": nbytes,
        "transcendentals": float(cost.get("transcendentals", 0.0)),
        "intensity": flops / nbytes,
        "argument_bytes": int(mem.argument_size_in_bytes),
        "output_bytes": int(mem.output_size_in_bytes),
        "alias_bytes": int(mem.alias_size_in_bytes),
    }


def benchmark(fn, *args, repeats=5):
    jitted = jax.jit(fn)
    start = time.perf_counter()
    compiled = jitted.lower(*args).compile()
    compile_seconds = time.perf_counter() - start

    jax.block_until_ready(compiled(*args))  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = compiled(*args)
        jax.block_until_ready(out)
        times.append(time.perf_counter() - start)
    return compile_seconds, statistics.median(times)

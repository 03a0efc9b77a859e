"""A jitted lambda wrapper around fn (a fresh function, so nothing cached can answer), compiled ahead of time and timed with time.monotonic; the minimum of blocked runs; itemsizes from np.dtype."""
import math
import statistics
import time

import jax

import numpy as np


def dot_cost(m, k, n):
    itemsize = np.dtype(np.float32).itemsize
    macs = m * k * n
    return {"flops": float(2 * macs), "bytes": float(itemsize * (m * k + k * n + m * n))}


def elementwise_cost(shape, dtype):
    n = int(np.prod(shape, dtype=np.int64))
    b = np.dtype(dtype).itemsize
    # x*y and +1.0 are one flop per element each; tanh is a transcendental; read x, y, write the result
    return {"flops": float(2 * n), "bytes": float(b * n * 3), "transcendentals": float(n)}



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
    wrapped = jax.jit(lambda *a: fn(*a))        # a fresh function: nothing cached can answer
    start = time.monotonic()
    exe = wrapped.lower(*args).compile()
    compile_s = time.monotonic() - start
    exe(*args).block_until_ready()
    samples = []
    for _ in range(max(repeats, 1)):
        start = time.monotonic()
        exe(*args).block_until_ready()
        samples.append(time.monotonic() - start)
    return compile_s, min(samples)

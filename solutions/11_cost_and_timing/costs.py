"""Reference solution for exercise 11 (cost, memory and honest timing)."""

import math
import statistics
import time

import jax

ITEMSIZE = {"float32": 4, "float16": 2}


# --- Part A: predictions (pencil and paper, no JAX) ------------------------------------------
def dot_cost(m, k, n):
    # m*n outputs, each k multiplies and k adds; XLA reads both operands and writes the
    # result once: nothing else touches memory.
    return {"flops": 2.0 * m * k * n, "bytes": 4.0 * (m * k + k * n + m * n)}


def elementwise_cost(shape, dtype):
    # One fused loop: per element a multiply and an add (flops), a tanh (transcendental),
    # two reads and one write; the intermediates never reach memory.
    size = math.prod(shape)
    return {"flops": 2.0 * size, "bytes": 3.0 * ITEMSIZE[dtype] * size, "transcendentals": float(size)}


# --- Part B: what the compiled program says -----------------------------------------------------
def analyze(fn, *args, donate_argnums=()):
    compiled = jax.jit(fn, donate_argnums=donate_argnums).lower(*args).compile()
    cost = compiled.cost_analysis()  # a dict in this JAX (older versions returned a list of dicts)
    mem = compiled.memory_analysis()
    flops = float(cost.get("flops", 0.0))
    bytes_accessed = float(cost.get("bytes accessed", 0.0))
    return {
        "flops": flops,
        "bytes": bytes_accessed,
        "transcendentals": float(cost.get("transcendentals", 0.0)),  # absent when there are none
        "intensity": flops / bytes_accessed,
        "argument_bytes": int(mem.argument_size_in_bytes),
        "output_bytes": int(mem.output_size_in_bytes),
        "alias_bytes": int(mem.alias_size_in_bytes),
    }


# --- Part C: honest timing -------------------------------------------------------------------
def benchmark(fn, *args, repeats=5):
    jitted = jax.jit(fn)
    t0 = time.perf_counter()
    compiled = jitted.lower(*args).compile()  # trace, lower and compile; nothing runs yet
    compile_s = time.perf_counter() - t0
    jax.block_until_ready(compiled(*args))  # warm-up: the first run pays one-time costs
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(*args))  # wait for the result, not just the dispatch
        runs.append(time.perf_counter() - t0)
    return compile_s, statistics.median(runs)



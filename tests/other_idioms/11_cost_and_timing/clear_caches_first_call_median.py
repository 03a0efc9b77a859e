"""jax.clear_caches() first, so a fresh jax.jit(fn)'s first call surely compiles: that call as the compile; a warm-up, then the median of blocked runs; itemsizes from a dict."""
import math
import statistics
import time

import jax

def dot_cost(m, k, n):
    return {"flops": 2 * m * k * n, "bytes": 4 * (m * k + k * n + m * n)}


def elementwise_cost(shape, dtype):
    size = math.prod(shape)
    itemsize = {"float32": 4, "float16": 2}[str(dtype)]
    return {"flops": 2 * size, "bytes": 3 * size * itemsize, "transcendentals": size}



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
    jax.clear_caches()                                # make sure nothing cached answers the first call
    f = jax.jit(fn)
    t0 = time.perf_counter()
    jax.block_until_ready(f(*args))                   # fresh jit: trace + lower + compile + one run
    compile_s = time.perf_counter() - t0
    jax.block_until_ready(f(*args))                   # warm-up
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(f(*args))
        runs.append(time.perf_counter() - t0)
    return compile_s, statistics.median(runs)

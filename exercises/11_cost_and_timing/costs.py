"""Exercise 11: cost, memory and honest timing.

Read README.md in this folder first.  Fill in every TODO; keep the names and
signatures.  Check your work with:  grade exercise 11
"""

import math  # noqa: F401 - the modules a solution needs, imported for you
import statistics  # noqa: F401
import time  # noqa: F401

import jax  # noqa: F401


# --------------------------------------------------------------------------------------
# Part A: predict what XLA's cost analysis will say -- from the shapes alone
# --------------------------------------------------------------------------------------
def dot_cost(m, k, n):
    """Predict ``cost_analysis()`` of the compiled ``x @ w`` for x: f32[m, k], w: f32[k, n]
    (every dimension is at least 2).

    Returns {"flops": number, "bytes": number}, where "bytes" is the analysis' "bytes
    accessed".  A formula in m, k and n: this function must not compile anything.

    TODO
    """
    raise NotImplementedError("TODO: dot_cost")


def elementwise_cost(shape, dtype):
    """Predict ``cost_analysis()`` of the compiled ``jnp.tanh(x * y + 1.0)`` for x and y of
    the same ``shape`` (a tuple of ints) and ``dtype`` ("float32" or "float16").

    Returns {"flops": number, "bytes": number, "transcendentals": number}.  A formula:
    this function must not compile anything.

    TODO
    """
    raise NotImplementedError("TODO: elementwise_cost")


# --------------------------------------------------------------------------------------
# Part B: read the compiled program's own analyses
# --------------------------------------------------------------------------------------
def analyze(fn, *args, donate_argnums=()):
    """Compile ``fn`` for ``args`` (with ``donate_argnums`` donated) and report what XLA says:

    {"flops", "bytes", "transcendentals", "intensity", "argument_bytes", "output_bytes",
     "alias_bytes"}

    flops, bytes ("bytes accessed") and transcendentals come from the compiled program's
    cost analysis (a missing entry means 0); intensity is flops per byte accessed; the
    three sizes come from its memory analysis.  Plain Python numbers.

    TODO
    """
    raise NotImplementedError("TODO: analyze")


# --------------------------------------------------------------------------------------
# Part C: time it honestly
# --------------------------------------------------------------------------------------
def benchmark(fn, *args, repeats=5):
    """Returns (compile_seconds, run_seconds) for ``jax.jit(fn)`` on ``args``.

    compile_seconds: the time to trace, lower and compile ``fn`` for these arguments.
    run_seconds: the time of ONE call of the compiled function, once it is compiled and
    warmed up: the median (or the minimum) of ``repeats`` timed calls.  Wait for each
    result before you stop the clock.

    TODO
    """
    raise NotImplementedError("TODO: benchmark")

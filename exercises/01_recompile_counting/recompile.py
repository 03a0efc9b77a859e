"""Exercise 1: counting recompilations.

Read README.md in this folder first.  Fill in every TODO; keep the names and
signatures.  Check your work with:  grade exercise 1

Part A -- predict_compiles: say how many times jax.jit compiles for a sequence of calls.
Part B -- score: a jitted scoring function that compiles once per (logits shape, mode).
"""

from functools import partial  # noqa: F401  (you will want these)

import jax  # noqa: F401
import jax.numpy as jnp  # noqa: F401

# ---------------------------------------------------------------------------------------
# Part A: predictions
# ---------------------------------------------------------------------------------------
#
# The grader owns a function
#
#     def target(x, scale, mode="sum"): ...        # what it computes does not matter
#     f = jax.jit(target, static_argnames=("mode",))
#
# and makes a FRESH `f` for every sequence of calls, so nothing is cached when a
# sequence starts.  One CALL is described by a dict
#
#     {"args": [V, ...], "kwargs": {"name": V, ...}}      meaning   f(*args, **kwargs)
#
# "args" fill x, scale, mode in that order; "kwargs" name the others (in the order the
# dict lists them).  x and scale are always given; mode may be left out, and then its
# default "sum" is used.  A VALUE V is one of:
#
#     0.5                                     a Python float
#     3                                       a Python int
#     "sum" / "mean" / "max"                  a string (only ever the value of mode)
#     {"array": "float32", "shape": [2, 3]}   a jax.Array of that dtype and shape;
#                                             dtype is "float32", "float16" or "int32";
#                                             shape [] is a 0-d array
#     {"array": "int32", "shape": [4], "numpy": True}
#                                             the same, but a numpy.ndarray
#     {"tuple": [V, ...]}                     a Python tuple of values
#     {"dict": {"a": V, ...}}                 a Python dict of values (str keys)
#
# Array contents are never given: every call gets fresh random contents.
#
# Example: the sequence
#     [{"args": [{"array": "float32", "shape": [3]}, 0.5], "kwargs": {}},
#      {"args": [{"array": "float32", "shape": [3]}, 2.0], "kwargs": {"mode": "max"}}]
# is   f(x3, 0.5)  then  f(x3, 2.0, mode="max").


def predict_compiles(calls):
    """How many XLA compilations of `target` this sequence of calls causes.

    calls: a list of CALL dicts (see above), made in order on one fresh jitted `f`.
    Returns a Python int.

    TODO: work out which properties of a call JAX's cache key depends on (and which it
    ignores), turn each call into a hashable key, and count.  Test your rules against
    real JAX in your own experiments: run calls with JAX_LOG_COMPILES=1 and watch the log.

    Predict, do not measure: this function must not trace or compile anything (no jax.jit
    of a stand-in, no make_jaxpr / eval_shape, no jnp arrays).  The grader counts the traces
    and compilations each call of it causes, and fails the prediction checks when there
    are any.
    """
    raise NotImplementedError("TODO: predict_compiles")


# ---------------------------------------------------------------------------------------
# Part B: a served workload
# ---------------------------------------------------------------------------------------

MODES = ("probs", "logz", "entropy")


def score(logits, temperature, shift, mode):
    """Serve one scoring request.

    logits:      float32 array [B, V] (B rows of V scores); a few shapes occur.
    temperature: a Python float, different on almost every request.
    shift:       a scalar; some callers send a Python float, others a 0-d float32 array.
    mode:        one of MODES (a str); some callers pass it positionally, others as mode=...

    With z = (logits + shift) / temperature and p = softmax(z, axis=-1), return
        "probs":   p                              float32 [B, V]
        "logz":    logsumexp(z, axis=-1)          float32 [B]
        "entropy": -sum(p * log(p), axis=-1)      float32 [B]

    The server runs thousands of requests, so compiling is expensive: a whole workload
    must compile at most once per (logits shape, mode) pair it uses.

    TODO: do the computation in a jitted function (you may add helper functions and
    have `score` call a jitted one).  Decide which arguments must be static and which
    must not, and make sure that the way a request arrives (Python float or array,
    positional or keyword) does not cause extra compilations.
    """
    raise NotImplementedError("TODO: score")

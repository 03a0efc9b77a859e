"""Exercise 5 (while_loop vs scan): reading the learner's ``scan_version`` answers and the
gradient the forward-mode truth implies, shared by the public and the hidden checks.
NumPy only, no JAX (the truth is measured in the clean worker, ``grader/exercises/ex05_loops/probes.py``)."""

from __future__ import annotations

import numpy as np

from grader.feedback import CheckFailed, describe, expect_array


def unpack(out, n, what="scan_version(theta, x, max_steps)"):
    """(z, n_steps) from the learner's answer, or a CheckFailed that says what is off."""
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        advice = "end with `return z, n_steps`, like while_version"
        raise CheckFailed(f"{what} should return a pair (z, n_steps)", measured=describe(out),
                          expected="a tuple of 2: z as f32[n] and n_steps as an integer scalar", hint=advice,
                          diagnosis="scan_version does not return a pair (z, n_steps)", advice=advice)
    try:
        z = expect_array(out[0], shape=(n,), dtype="float32", what=f"z (the first output of {what})")
    except CheckFailed as exc:
        exc.diagnosis = "z, the first output of scan_version, is not a float32 array of x's shape"
        exc.advice = "return the carried z itself: it keeps x's shape and dtype"
        raise
    steps = out[1]
    if not (isinstance(steps, np.ndarray) and steps.shape == () and np.issubdtype(steps.dtype, np.integer)):
        advice = "carry the counter as jnp.int32 and update it with jnp.where, as the state is"
        raise CheckFailed(f"n_steps (the second output of {what}) should be an integer scalar",
                          measured=describe(steps), expected="i32[]", hint=advice,
                          diagnosis="n_steps, the second output of scan_version, is not an integer scalar",
                          advice=advice)
    return z, int(steps)


def weighted_grads(weights, j_theta, j_x):
    """The gradients of sum(weights * z) with respect to theta and x, as float32, from the
    forward-mode Jacobians of while_version (``ex05_loops:forward_derivatives``)."""
    w = np.asarray(weights).astype(np.float64)
    return (np.float32(w @ np.asarray(j_theta, np.float64)),
            (w @ np.asarray(j_x, np.float64)).astype(np.float32))

"""Exercise 5 (while_loop vs scan): reading the learner's ``scan_version`` answers, the
gradient the forward-mode truth implies, and the loop structure of its program, shared by the
public and the hidden checks.
NumPy only, no JAX (the truth is measured in the clean worker, ``grader/exercises/ex05_loops/probes.py``)."""

from __future__ import annotations

import numpy as np

from grader.feedback import (CheckFailed, describe, expect_array, expect_traced_program_computes,
                             expect_traced_program_runs, traced_error)
from grader.jaxcompat import SCAN_PRIMITIVE, WHILE_PRIMITIVE
from grader.testing import probe_both
from grader.traced_work import expect_no_host_callback


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


def structure(submission, truth, theta, x, max_steps, reference=None):
    """The learner's scan_version's structure, and the reference solution's for the same input
    (None where it is not available).  Both come from one trace under the grader's jit
    (``ex05_loops:loop_structure``), and the learner's is returned only once that trace's own
    ``(z, n_steps)`` are shown to be the grader's while loop's (``traced_program_matches``):
    the structure judged is that of the program that computes the answer."""
    __tracebackhide__ = True
    found, ref = probe_both(submission, reference, "ex05_loops:loop_structure", "scan_version", theta, x, max_steps)
    truth_out = truth.probe("ex05_loops:while_reference", theta, x, max_steps)
    traced_program_matches(found, truth_out["z"], int(truth_out["n_steps"]), max_steps)
    return found, ref


def traced_program_matches(found: dict, z_ref, steps_ref: int, max_steps: int) -> None:
    """``found``: a ``loop_structure`` answer.  Raises ``CheckFailed`` unless the program that
    was traced ran and gave while_version's ``(z, n_steps)`` (the value checks' tolerance)."""
    __tracebackhide__ = True
    expect_traced_program_runs(traced_error(found), "scan_version", how=" (max_steps static)",
                               expected="a function JAX can trace, compile and run (max_steps a Python int)")
    try:
        z, steps = unpack(found["outputs"], np.asarray(z_ref).size, what="the program the grader traced")
    except CheckFailed:
        z, steps = None, None
    z_ok = z is not None and bool(np.all(np.isfinite(z))) and bool(np.allclose(z, z_ref, rtol=1e-5, atol=1e-6))
    expect_traced_program_computes(
        z_ok and steps == int(steps_ref), "scan_version", "compute while_version's (z, n_steps)",
        how=" (max_steps static)", expected="the same (z, n_steps) as while_version (z within rtol=1e-5, atol=1e-6)",
        measured=f"max_steps={max_steps}: " + ("its outputs are not a pair (z, n_steps)" if z is None else ", ".join(
            w for w, bad in (("z differs", not z_ok), ("n_steps differs", steps != steps_ref)) if bad)))


#: At most this many times the reference solution's jaxpr equations: a scan traces the step
#: once, whatever its length; honest layouts (a cond in the body, a fori_loop, a while-style
#: state in the carry) differ by a few equations, while a Python loop unrolled to a fixed
#: count beside a decoy scan holds one copy of the step per unrolled iteration.
MAX_EQN_RATIO = 5.0


def expect_one_copy_of_the_step(found, ref, max_steps, check):
    if ref is None:  # no reference solution here: the other tests of the check are all there is
        return
    ratio = found["total_eqns"] / max(ref["total_eqns"], 1)
    if ratio > MAX_EQN_RATIO:
        advice = "trace the step once, inside lax.scan(body, carry, None, length=max_steps), and nowhere else"
        raise CheckFailed(
            f"{check}: the program holds many copies of the step",
            measured=f"max_steps={max_steps}: {found['total_eqns']} jaxpr equations; the reference solution's "
                     f"{ref['total_eqns']}",
            expected=f"at most {MAX_EQN_RATIO:g} times the reference solution's equations", hint=advice,
            advice=advice,
            diagnosis="the traced program holds the iteration's step many times over (a Python loop unrolled to a "
                      "fixed count, whatever scan stands beside it): the work is not done by the scan")


NO_WHILE_ADVICE = ("write the loop with lax.scan(body, carry, None, length=max_steps) and freeze the finished state "
                   "with jnp.where; do not call while_version or lax.while_loop (nor fori_loop with a traced bound)")


def expect_no_while(primitives, where):
    """No while loop in the program -- and no host callback: a loop run there is neither a
    scan nor JAX's."""
    expect_no_host_callback(primitives, where=where, why="what runs there is Python, not a scan JAX traces and "
                                                         "differentiates, so it earns nothing here",
                            advice="do the iteration in JAX: lax.scan(body, carry, None, length=max_steps), with no "
                                   "host callback")
    if primitives.get(WHILE_PRIMITIVE, 0):
        raise CheckFailed(
            f"{where} runs a while loop",
            measured=f"{primitives[WHILE_PRIMITIVE]} `{WHILE_PRIMITIVE}` equation(s)",
            expected=f"no `{WHILE_PRIMITIVE}`", hint=NO_WHILE_ADVICE, advice=NO_WHILE_ADVICE,
            diagnosis=f"{where} runs a while loop (lax.while_loop, a fori_loop with a traced bound, or a call of "
                      f"while_version): what it computes comes from the while loop this exercise replaces, so it "
                      f"earns nothing here")


def expect_scan_of_max_steps(found, max_steps: int) -> None:
    """The program (a ``loop_structure`` answer) does the step's work in scans of length
    ``max_steps``: at least one scan whose body holds the step (its ``tanh``), and none of
    another length (a scan of max_steps that does nothing beside one that iterates a length
    of its own is not the scan asked for)."""
    __tracebackhide__ = True
    working = found.get("work_scan_lengths", [])
    if working and all(n == max_steps for n in working):
        return
    if max_steps in found["scan_lengths"] and working:  # the work is in a scan of another length
        advice = ("iterate the step itself in lax.scan(body, carry, None, length=max_steps): no scan of another "
                  "length, and no scan of max_steps that only stands beside the one doing the work")
        raise CheckFailed(
            "the step is iterated by a scan whose length is not max_steps",
            measured=f"max_steps={max_steps}: the scans holding the step have lengths {sorted(set(working))[:10]}",
            expected=f"every `{SCAN_PRIMITIVE}` that holds the step has length == max_steps", hint=advice,
            advice=advice,
            diagnosis="the scan of length max_steps in scan_version's jaxpr does not hold the step: the step is "
                      "iterated by a scan of a length of its own")
    if max_steps in found["scan_lengths"]:  # a scan of the right length, but none does the step's work
        advice = "put the step, z = tanh(theta * z + x), inside the body of lax.scan(..., length=max_steps)"
        raise CheckFailed(
            "no scan in scan_version's jaxpr holds the step",
            measured=f"max_steps={max_steps}: scans of lengths {found['scan_lengths'][:10]}, none holding tanh",
            expected=f"a `{SCAN_PRIMITIVE}` of length max_steps whose body computes the step", hint=advice,
            advice=advice,
            diagnosis="scan_version's jaxpr holds a scan of length max_steps, but its body does not compute the "
                      "step: the iteration happens somewhere else")
    if max_steps not in found["scan_lengths"]:
        lengths = found["scan_lengths"]
        advice = ("scan over exactly max_steps steps: lax.scan(body, carry, None, length=max_steps) (or "
                  "fori_loop(0, max_steps, ...) with Python-int bounds)")
        raise CheckFailed(
            "the jaxpr of scan_version holds no scan of length max_steps",
            measured=f"max_steps={max_steps}: scan lengths {lengths[:10]}" if lengths else "no scan",
            expected=f"a `{SCAN_PRIMITIVE}` with length == max_steps", hint=advice, advice=advice,
            diagnosis="the jaxpr of scan_version holds no scan whose length is max_steps" +
                      (" (it scans a length of its own)" if lengths else " (it holds no scan at all)"))


def expect_no_unrolling(sizes: dict) -> None:
    """``sizes``: max_steps -> jaxpr equations; the program must not grow with max_steps."""
    __tracebackhide__ = True
    small, large = min(sizes), max(sizes)
    if sizes[large] > sizes[small]:
        advice = "trace the loop body once: lax.scan(body, carry, None, length=max_steps)"
        raise CheckFailed(
            "the program grows with max_steps: the iterations are unrolled in Python",
            measured=f"{sizes[small]} jaxpr equations with max_steps={small}, {sizes[large]} with max_steps={large}",
            expected="the same number of equations for every max_steps", hint=advice, advice=advice,
            diagnosis="the traced program grows with max_steps: a Python loop over the steps is unrolled into one "
                      "copy of the body per step",
        )

"""Public checks for exercise 5 (run by `grade exercise 5`; they carry no points).

The hidden checks test the same properties on inputs drawn at grading time, and also
look at the jaxpr of `scan_version` (a `scan`, no `while`, and no growth with max_steps).
"""


import numpy as np

from grader.exercises.ex05_loops.judges import expect_no_unrolling, expect_no_while, expect_one_copy_of_the_step, \
    expect_scan_of_max_steps, structure, unpack, weighted_grads
from grader.feedback import CheckFailed, expect_close

# The fixed inputs of these public checks.
THETA = np.asarray(0.6, dtype=np.float32)
X = np.array([0.5, -1.0, 0.2, 1.5], dtype=np.float32)
WEIGHTS = np.array([1.0, -2.0, 0.5, 3.0], dtype=np.float32)
MAX_STEPS = 24
NEGATIVE_THETA = np.asarray(-0.7, dtype=np.float32)

# --- trusted copy of the stub's iteration (the check does not trust the learner's copy) ---


def test_matches_while_version_small(submission, truth):
    for theta in (THETA, NEGATIVE_THETA):  # with a negative theta, some entries of z move down on the way
        ref = truth.probe("ex05_loops:while_reference", theta, X, MAX_STEPS)  # the grader's own while loop
        z_ref, steps_ref = ref["z"], ref["n_steps"]
        z, steps = unpack(submission.call("scan_version", theta, X, MAX_STEPS), X.size)
        if steps != int(steps_ref):
            raise CheckFailed(
                "n_steps differs from while_version's",
                measured=f"n_steps = {steps} for theta={float(theta):g}, x={X.tolist()}, max_steps={MAX_STEPS}",
                expected=f"n_steps = {int(steps_ref)}",
                hint="count an update only while the loop is not done yet; the update whose change falls below TOL "
                     "still counts, every later one does not; the change is the largest ABSOLUTE change of an entry",
            )
        expect_close(z, np.asarray(z_ref), rtol=1e-5, atol=1e-6, reveal=True,
                     what=f"z from scan_version({float(theta):g}, x, {MAX_STEPS})",
                     hint="after the stopping condition holds, the state must stop changing: "
                          "z = jnp.where(done, z, z_new)")


def test_grad_works_small(submission, truth):
    unpack(submission.call("scan_version", THETA, X, MAX_STEPS), X.size)
    got = submission.probe("ex05_loops:grad_of_weighted_output", "scan_version", THETA, X, WEIGHTS, MAX_STEPS)
    if "error" in got:
        raise CheckFailed(
            "jax.grad of scan_version raised an error",
            measured=got["error"],
            expected="a gradient",
            hint="reverse mode cannot go through lax.while_loop (nor lax.fori_loop with traced bounds); "
                 "use lax.scan with length=max_steps",
        )
    # Forward mode goes through lax.while_loop; reverse mode (jax.grad) does not.
    fwd = truth.probe("ex05_loops:forward_derivatives", THETA, X, MAX_STEPS)
    ref_theta, ref_x = weighted_grads(WEIGHTS, fwd["j_theta"], fwd["j_x"])
    expect_close(np.asarray(got["grad_theta"]), ref_theta,
                 rtol=1e-4, atol=1e-5, reveal=True,
                 what="jax.grad of sum(w * z) with respect to theta",
                 hint="make the values match first; then compare with jax.jacfwd of while_version, and do not "
                      "lax.stop_gradient the state (the frozen z still carries the earlier steps' gradient)")
    expect_close(np.asarray(got["grad_x"]), ref_x,
                 rtol=1e-4, atol=1e-5, reveal=True,
                 what="jax.grad of sum(w * z) with respect to x",
                 hint="make the values match first; then compare with jax.jacfwd of while_version, and do not "
                      "lax.stop_gradient the state (the frozen z still carries the earlier steps' gradient)")


def test_loop_is_a_scan_small(submission, reference, truth):
    # structure and values from one trace: the program judged must compute while_version's result
    found = {m: structure(submission, truth, THETA, X, m, reference) for m in (7, MAX_STEPS)}
    for m, (learner, ref) in found.items():
        expect_no_while(learner["primitives"], "scan_version")
        expect_scan_of_max_steps(learner, m)
    expect_no_unrolling({m: learner["total_eqns"] for m, (learner, _) in found.items()})
    for m, (learner, ref) in found.items():
        expect_one_copy_of_the_step(learner, ref, m, "loop_is_a_scan_small")

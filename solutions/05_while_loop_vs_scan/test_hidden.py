"""Hidden checks for exercise 5: inputs, weights and step limits drawn at grading time.

Truth comes from a trusted copy of the stub's `while_version` run in this process:
its outputs, and its forward-mode derivatives (`jax.jacfwd`, which goes through
`lax.while_loop`).  The learner's reverse-mode gradient is measured in the sandbox by
the `ex05_loops:grad_of_weighted_output` probe.

The two structural checks (`uses_scan_not_while`, `no_python_unrolling`) only score a
`scan_version` whose outputs match `while_version` on an input drawn for them: a
do-nothing scan must not earn points.

`lax.fori_loop` with Python-int bounds is accepted: JAX builds it from `scan`, so its
jaxpr shows a scan and `jax.grad` works.  With a traced bound it becomes a `while`, and
both `grad_works_and_matches_forward` and `uses_scan_not_while` fail.
"""

import numpy as np

from grader.checks.ex05_loops import unpack, weighted_grads
from grader.feedback import CheckFailed, expect_array, expect_close
from grader.jaxcompat import SCAN_PRIMITIVE, WHILE_PRIMITIVE

MAX_STEPS = 24  # above what the drawn inputs need (at most 18 steps; they are redrawn otherwise).
# Kept small on purpose: a Python-unrolled submission must still grade in seconds.
GRAD_SIZE = 4  # the public checks' size: the (costly) gradient compile is shared with them


# The trusted while loop and its forward-mode derivatives run in the clean worker
# (grader/probes/ex05_loops.py), a fresh JAX process beside the learner's sandbox.
def run_while(truth, theta, x, max_steps):
    out = truth.probe("ex05_loops:while_reference", theta, x, max_steps)
    return out["z"], out["n_steps"]


def forward_derivatives(truth, theta, x):
    out = truth.probe("ex05_loops:forward_derivatives", theta, x, MAX_STEPS)
    return out["j_theta"], out["j_x"]


def size_of(seed) -> int:
    """The vector size of matches_while_version for this run (3..8): one shape, one compile."""
    return 3 + int(seed) % 6


def draw_input(rng, n):
    theta = np.asarray(rng.choice([-1.0, 1.0]) * rng.uniform(0.2, 0.75), dtype=np.float32)
    x = (rng.normal(size=n) * rng.uniform(0.3, 1.2)).astype(np.float32)
    return theta, x


def draw_converging(truth, rng, n, min_steps=3):
    """An input whose while loop stops on its own, well before MAX_STEPS (so later steps are masked)."""
    for _ in range(100):
        theta, x = draw_input(rng, n)
        steps = run_while(truth, theta, x, MAX_STEPS)[1]
        if min_steps <= steps <= MAX_STEPS * 3 // 4:
            return theta, x
    raise RuntimeError("could not draw a converging input")  # a grader bug, not the learner's


def draw_capped(truth, rng, n):
    """An input and a small max_steps that the while loop reaches before converging."""
    for _ in range(100):
        theta, x = draw_input(rng, n)
        max_steps = int(rng.integers(2, 6))
        if run_while(truth, theta, x, MAX_STEPS)[1] > max_steps + 1:
            return theta, x, max_steps
    raise RuntimeError("could not draw a capped input")


def agrees(submission, truth, theta, x, max_steps) -> tuple[bool, bool, int, int]:
    """(steps agree, z agrees, learner's steps, while's steps) on one input."""
    z, steps = unpack(submission.call("scan_version", theta, x, max_steps), x.size)
    z_ref, steps_ref = run_while(truth, theta, x, max_steps)
    z_ok = bool(np.all(np.isfinite(z))) and bool(np.allclose(z, z_ref, rtol=1e-5, atol=1e-6))
    return steps == steps_ref, z_ok, steps, steps_ref


def test_matches_while_version(submission, truth, rng, seed):
    n = size_of(seed)
    cases = [(*draw_converging(truth, rng, n), MAX_STEPS) for _ in range(3)] + [draw_capped(truth, rng, n)]
    problems = []
    for i, (theta, x, max_steps) in enumerate(cases):
        steps_ok, z_ok, steps, steps_ref = agrees(submission, truth, theta, x, max_steps)
        capped = i == len(cases) - 1
        where = ("on the input where max_steps runs out before the loop converges" if capped
                 else f"on converging input {i + 1} of 3")
        if not steps_ok:
            if not capped and steps == max_steps:
                why = "n_steps equals max_steps: the counter keeps going after the stopping condition holds"
            elif steps > steps_ref:
                why = "n_steps is larger than while_version's"
            else:
                why = "n_steps is smaller than while_version's"
            problems.append(f"{where}: {why}")
        if not z_ok:
            problems.append(f"{where}: z differs from while_version's")
    if problems:
        if all(p.startswith("on the input where max_steps") for p in problems):
            hint = ("the result is wrong only when max_steps is too small to converge: scan exactly max_steps "
                    "steps (length=max_steps), not a length of your own")
        elif any("larger" in p or "keeps going" in p for p in problems):
            hint = ("freeze the state once done: z = jnp.where(done, z, z_new), and the counter likewise; "
                    "the update that brings the change below TOL still counts, later ones do not")
        elif all("z differs" in p for p in problems):
            hint = ("n_steps is right but z is not: z must stop changing once done (z = jnp.where(done, z, "
                    "z_new)); updating z on every scan step overshoots while_version's answer")
        else:
            hint = ("run exactly max_steps scan steps (length=max_steps, not a constant of your own), stop on "
                    "max|z_new - z| < TOL as while_version does, and apply and count the update that first "
                    "falls below TOL")
        raise CheckFailed(
            "scan_version does not give while_version's result on inputs drawn at grading time",
            measured="\n".join(problems),
            expected="the same z (within rtol=1e-5, atol=1e-6) and the same n_steps as while_version, "
                     "for inputs that converge and for a max_steps too small to converge",
            hint=hint,
        )


def test_grad_works_and_matches_forward(submission, truth, rng):
    for _ in range(2):
        theta, x = draw_converging(truth, rng, GRAD_SIZE, min_steps=5)
        weights = rng.normal(size=x.size).astype(np.float32)
        unpack(submission.call("scan_version", theta, x, MAX_STEPS), x.size)
        got = submission.probe("ex05_loops:grad_of_weighted_output", "scan_version", theta, x, weights, MAX_STEPS)
        if "error" in got:
            raise CheckFailed(
                "jax.grad of scan_version raised an error",
                measured=got["error"],
                expected="a gradient with respect to theta and x",
                hint="reverse mode cannot go through lax.while_loop (nor lax.fori_loop whose bounds are traced "
                     "values); use lax.scan with length=max_steps and freeze the finished state with jnp.where",
            )
        ref_theta, ref_x = weighted_grads(weights, *forward_derivatives(truth, theta, x))
        hint = ("jax.grad of your function should equal jax.jacfwd of while_version: do not lax.stop_gradient "
                "the state (the frozen state still carries the gradient of the steps before it), and make the "
                "result itself match while_version first")
        g_theta = expect_array(got["grad_theta"], shape=(), what="the gradient with respect to theta")
        g_x = expect_array(got["grad_x"], shape=x.shape, what="the gradient with respect to x")
        expect_close(g_theta, ref_theta, rtol=1e-4, atol=1e-5,
                     what="jax.grad of sum(w * z) with respect to theta", hint=hint)
        expect_close(g_x, ref_x, rtol=1e-4, atol=1e-5,
                     what="jax.grad of sum(w * z) with respect to x", hint=hint)


def require_correct(submission, truth, rng, check: str):
    """Structural checks score only a scan_version that computes the right thing."""
    theta, x = draw_converging(truth, rng, GRAD_SIZE)
    steps_ok, z_ok, _, _ = agrees(submission, truth, theta, x, MAX_STEPS)
    if not (steps_ok and z_ok):
        raise CheckFailed(
            f"`{check}` only scores a scan_version whose results match while_version",
            measured="on an input drawn for this check, (z, n_steps) differs from while_version's",
            expected="the same (z, n_steps) as while_version",
            hint="make `matches_while_version` pass first",
        )
    return theta, x


def test_uses_scan_not_while(submission, truth, rng):
    theta, x = require_correct(submission, truth, rng, "uses_scan_not_while")
    summary = submission.probe("generic:jaxpr_of", "scan_version", [theta, x, 20], {}, [2])
    prims = summary["primitives"]
    if prims.get(WHILE_PRIMITIVE, 0):
        raise CheckFailed(
            "the jaxpr of scan_version contains a while loop",
            measured=f"{prims[WHILE_PRIMITIVE]} `{WHILE_PRIMITIVE}` equation(s) in jax.make_jaxpr(scan_version)",
            expected=f"no `{WHILE_PRIMITIVE}`; one `{SCAN_PRIMITIVE}`",
            hint="lax.while_loop, and lax.fori_loop with a traced bound, become `while`, which jax.grad refuses; "
                 "use lax.scan(body, carry, None, length=max_steps) with max_steps a Python int",
        )
    if not prims.get(SCAN_PRIMITIVE, 0):
        raise CheckFailed(
            "the jaxpr of scan_version contains no scan",
            measured=f"no `{SCAN_PRIMITIVE}` among {summary['total_eqns']} equations",
            expected=f"a `{SCAN_PRIMITIVE}` that runs the iterations",
            hint="a Python for-loop is unrolled while tracing; write the loop with lax.scan",
        )


def test_no_python_unrolling(submission, truth, rng):
    theta, x = require_correct(submission, truth, rng, "no_python_unrolling")
    sizes = {m: submission.probe("generic:jaxpr_of", "scan_version", [theta, x, m], {}, [2])["total_eqns"]
             for m in (10, 100)}
    if sizes[100] > sizes[10]:
        raise CheckFailed(
            "the program grows with max_steps: the iterations are unrolled in Python",
            measured=f"{sizes[10]} jaxpr equations with max_steps=10, {sizes[100]} with max_steps=100",
            expected="the same number of equations for every max_steps",
            hint="trace the loop body once: lax.scan(body, carry, None, length=max_steps)",
        )

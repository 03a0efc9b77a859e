"""Hidden checks for exercise 5: inputs, weights and step limits drawn at grading time.

Truth comes from a trusted copy of the stub's `while_version` run in the clean worker
(grader/exercises/ex05_loops/probes.py): its outputs, and its forward-mode derivatives (`jax.jacfwd`,
which goes through `lax.while_loop`).  The learner's reverse-mode gradient is measured in
the sandbox by the `ex05_loops:grad_of_weighted_output` probe.

Inputs are drawn in NumPy with a float32 copy of the iteration, so every draw is known
(and replayable by tests/test_coverage.py) before anything runs; `COVERAGE` declares what
each draw holds at every seed: inputs that converge early (one where an entry moving down is the
last to settle, so a change measured without abs stops too soon), inputs that need more than 32
steps under a max_steps above 32, and max_steps that run out (small, and above 32).  A scan
of a fixed length (32, say) that freezes at max_steps therefore fails, and so does a scan
whose length is not max_steps (`uses_scan_not_while` reads the scan's `length`).

`scan_version` must not compute through a while loop: the value check fails a jaxpr that
holds a `while` (a call of while_version, lax.while_loop, a fori_loop with a traced bound),
and the gradient check fails a gradient computation that holds one (a custom_vjp around
the while loop, whose rules are traced into the gradient's jaxpr).  `lax.fori_loop` with
Python-int bounds is accepted: JAX builds it from `scan` of length max_steps.

The two structural checks (`uses_scan_not_while`, `no_python_unrolling`) only score a
`scan_version` whose outputs match `while_version` on an input drawn for them.  Every jaxpr
read here comes from one trace under the grader's jit whose own outputs must be
`while_version`'s (`judges.structure`): a function that shows tracers a good scan and computes
with something else on concrete arrays is judged by the program it traced.  A failed
check tells the learner what is true of the failure (``diagnosis``/``advice``), never a
drawn value.
"""

import numpy as np

from grader.coverage import Coverage, ensure
from grader.exercises.ex05_loops.judges import expect_no_unrolling, expect_no_while, expect_one_copy_of_the_step, \
    expect_scan_of_max_steps, structure, unpack, weighted_grads
from grader.feedback import CheckFailed

TOL = 1e-3  # the stub's tolerance
GRAD_STEPS = 24  # max_steps of the gradient check (inputs converge well before it)
GRAD_SIZE = 4  # the public checks' size
FIXED = 32  # a scan of this fixed length must not pass: draws need more steps than this


# --- drawing inputs (NumPy only: the draw is known before anything runs) ------------------

def np_while(theta, x, max_steps, signed=False):
    """A float32 NumPy copy of while_version: (z, n_steps).  Only for shaping the draws; the
    truth always comes from the grader's JAX while loop.  ``signed``: the mistake of measuring
    the change without abs (an entry still moving down does not hold the loop)."""
    z, change, k, theta = np.zeros_like(x), np.inf, 0, np.float32(theta)
    while k < max_steps and change >= TOL:
        z_new = np.tanh(theta * z + x).astype(np.float32)
        step = z_new - z
        change, z, k = float(np.max(step) if signed else np.max(np.abs(step))), z_new, k + 1
    return z, k


def moves_down_last(theta, x) -> bool:
    """Whether an entry still moving down by TOL or more holds the loop after every entry
    moving up has settled: a change measured without abs stops at another step."""
    return np_while(theta, x, 1000, signed=True)[1] != np_while(theta, x, 1000)[1]


def draw_input(rng, n, slow=False):
    if slow:  # theta near +-1 and a small x: the iteration contracts slowly
        theta = rng.choice([-1.0, 1.0]) * rng.uniform(0.85, 0.97)
        x = rng.normal(size=n) * rng.uniform(0.05, 0.2)
    else:
        theta = rng.choice([-1.0, 1.0]) * rng.uniform(0.2, 0.75)
        x = rng.normal(size=n) * rng.uniform(0.3, 1.2)
    return np.asarray(theta, np.float32), x.astype(np.float32)


def draw(rng, n, kind):
    """(theta, x, max_steps) of one kind, found by rejection with margins of a few steps."""
    for _ in range(500):
        if kind == "early":  # converges well before max_steps: the later steps are masked
            theta, x = draw_input(rng, n)
            max_steps = int(rng.integers(24, 41))
            if 3 <= np_while(theta, x, 1000)[1] <= max_steps // 2:
                return theta, x, max_steps
        elif kind == "early_down":  # converges early, and an entry moving down is the last to settle
            theta, x = draw_input(rng, n)
            max_steps = int(rng.integers(24, 41))
            if 3 <= np_while(theta, x, 1000)[1] <= max_steps // 2 and moves_down_last(theta, x):
                return theta, x, max_steps
        elif kind == "long":  # needs more than FIXED steps, and max_steps is larger still
            theta, x = draw_input(rng, n, slow=True)
            steps = np_while(theta, x, 1000)[1]
            if FIXED + 4 <= steps <= 56:
                return theta, x, steps + int(rng.integers(6, 20))
        elif kind == "capped_small":  # max_steps runs out long before convergence
            theta, x = draw_input(rng, n)
            max_steps = int(rng.integers(2, 6))
            if np_while(theta, x, 1000)[1] >= max_steps + 3:
                return theta, x, max_steps
        elif kind == "capped_long":  # max_steps above FIXED runs out before convergence
            theta, x = draw_input(rng, n, slow=True)
            max_steps = int(rng.integers(FIXED + 1, FIXED + 13))
            if np_while(theta, x, 1000)[1] >= max_steps + 4:
                return theta, x, max_steps
        else:
            raise ValueError(kind)
    raise RuntimeError(f"could not draw a {kind} input")  # a grader bug, never the learner's


MATCH_KINDS = ("early", "early_down", "long", "capped_small", "capped_long")
WHERE = {"early": "on an input that converges well before max_steps",
         "early_down": "on an input that converges well before max_steps, where an entry moving down is the last "
                       "to settle",
         "long": "on an input that needs more than 32 steps (max_steps larger still)",
         "capped_small": "on an input where a small max_steps runs out before convergence",
         "capped_long": "on an input where a max_steps above 32 runs out before convergence"}


def size_of(seed) -> int:
    """The vector size of matches_while_version for this run (3..8): one shape."""
    return 3 + int(seed) % 6


def draw_match_cases(rng, n):
    return [(kind, *draw(rng, n, kind)) for kind in MATCH_KINDS]


def case_labels(cases):
    """What the cases hold, recomputed from the NumPy iteration (not taken from their names)."""
    out = set()
    for _, theta, x, max_steps in cases:
        steps = np_while(theta, x, 1000)[1]
        if steps <= max_steps // 2:
            out.add("converges before half of max_steps")
            if moves_down_last(theta, x):
                out.add("converges early, an entry moving down settling last")
        if steps >= FIXED + 4 and max_steps >= steps + 4:
            out.add("converges after more than 32 steps, before max_steps")
        if max_steps <= 5 and steps >= max_steps + 3:
            out.add("a small max_steps runs out")
        if max_steps > FIXED and steps >= max_steps + 4:
            out.add("a max_steps above 32 runs out")
    return out


MATCH_REQUIRED = {"converges before half of max_steps", "converges early, an entry moving down settling last",
                  "converges after more than 32 steps, before max_steps",
                  "a small max_steps runs out", "a max_steps above 32 runs out"}


def draw_grad_cases(rng):
    out = []
    for _ in range(2):
        for _ in range(500):
            theta, x = draw_input(rng, GRAD_SIZE)
            if 5 <= np_while(theta, x, 1000)[1] <= GRAD_STEPS * 3 // 4:
                break
        out.append((theta, x, rng.normal(size=GRAD_SIZE).astype(np.float32)))
    return out


def grad_labels(rng):
    cases = draw_grad_cases(rng)
    steps = [np_while(theta, x, 1000)[1] for theta, x, _ in cases]
    return {"converges before max_steps, after at least 5 steps"} if all(5 <= s <= GRAD_STEPS * 3 // 4
                                                                          for s in steps) else set()


def draw_structure_input(rng):
    return draw(rng, GRAD_SIZE, "early")


COVERAGE = {
    "matches_while_version": Coverage(
        required=MATCH_REQUIRED, test="test_matches_while_version",
        # the vector size comes from the seed; the kinds of input do not depend on it
        labels=lambda rng: case_labels(draw_match_cases(rng, 5))),
    "grad_works_and_matches_forward": Coverage(
        required={"converges before max_steps, after at least 5 steps"}, labels=grad_labels,
        test="test_grad_works_and_matches_forward"),
}


# --- the truth, and what the learner's function does -----------------------------------------

def run_while(truth, theta, x, max_steps):
    out = truth.probe("ex05_loops:while_reference", theta, x, max_steps)
    return out["z"], out["n_steps"]


def forward_derivatives(truth, theta, x):
    out = truth.probe("ex05_loops:forward_derivatives", theta, x, GRAD_STEPS)
    return out["j_theta"], out["j_x"]


def agrees(submission, truth, theta, x, max_steps) -> tuple[bool, bool, int, int]:
    """(steps agree, z agrees, learner's steps, while's steps) on one input."""
    z, steps = unpack(submission.call("scan_version", theta, x, max_steps), x.size)
    z_ref, steps_ref = run_while(truth, theta, x, max_steps)
    z_ok = bool(np.all(np.isfinite(z))) and bool(np.allclose(z, z_ref, rtol=1e-5, atol=1e-6))
    return steps == steps_ref, z_ok, steps, steps_ref


def require_correct(submission, truth, rng, check: str):
    """Structural checks score only a scan_version that computes the right thing."""
    theta, x, max_steps = draw_structure_input(rng)
    steps_ok, z_ok, _, _ = agrees(submission, truth, theta, x, max_steps)
    if not (steps_ok and z_ok):
        raise CheckFailed(
            f"`{check}` only scores a scan_version whose results match while_version",
            measured="on an input drawn for this check, (z, n_steps) differs from while_version's",
            expected="the same (z, n_steps) as while_version", hint="make `matches_while_version` pass first",
            diagnosis=f"`{check}` only scores a scan_version whose results match while_version, and they do not "
                      f"on the input drawn for this check", advice="make `matches_while_version` pass first")
    return theta, x


# --- the checks --------------------------------------------------------------------------------

def test_matches_while_version(submission, truth, rng, seed):
    cases = draw_match_cases(rng, size_of(seed))
    ensure("matches_while_version", MATCH_REQUIRED, case_labels(cases))
    problems, kinds = [], {}
    for kind, theta, x, max_steps in cases:
        steps_ok, z_ok, steps, steps_ref = agrees(submission, truth, theta, x, max_steps)
        where = WHERE[kind]
        if not steps_ok:
            if kind in ("early", "early_down", "long") and steps == max_steps:
                why = "n_steps equals max_steps: the counter keeps going after the stopping condition holds"
            elif steps > steps_ref:
                why = "n_steps is larger than while_version's"
            else:
                why = "n_steps is smaller than while_version's"
            problems.append(f"{where}: {why}")
            kinds.setdefault(kind, set()).add("steps")
        if not z_ok:
            problems.append(f"{where}: z differs from while_version's")
            kinds.setdefault(kind, set()).add("z")
    if not problems:
        # the values first: a wrong answer is told what is wrong with it; a right one must come
        # from a scan, read off the one trace whose (z, n_steps) are checked again here
        _, theta, x, max_steps = cases[0]
        expect_no_while(structure(submission, truth, theta, x, max_steps)[0]["primitives"], "scan_version")
        return
    only = set(kinds)
    if only <= {"long", "capped_long"}:
        advice = ("the result is wrong only when more than 32 steps are needed or allowed: run exactly max_steps "
                  "scan steps (length=max_steps), not a length of your own")
    elif only == {"early_down"}:
        advice = ("the result is wrong only when an entry moving down is the last to settle: the change is the "
                  "largest ABSOLUTE change of an entry, jnp.max(jnp.abs(z_new - z)), as in while_version")
    elif only <= {"capped_small", "capped_long"}:
        advice = ("the result is wrong only when max_steps runs out before convergence: scan exactly max_steps "
                  "steps (length=max_steps), and return the state reached then")
    elif any("larger" in p or "keeps going" in p for p in problems):
        advice = ("freeze the state once done: z = jnp.where(done, z, z_new), and the counter likewise; "
                  "the update that brings the change below TOL still counts, later ones do not")
    elif all(k == {"z"} for k in kinds.values()):
        advice = ("n_steps is right but z is not: z must stop changing once done (z = jnp.where(done, z, z_new)); "
                  "updating z on every scan step goes past while_version's answer")
    else:
        advice = ("run exactly max_steps scan steps (length=max_steps), stop on max|z_new - z| < TOL as "
                  "while_version does, and apply and count the update that first falls below TOL")
    diagnosis = "scan_version differs from while_version " + "; ".join(
        f"{WHERE[k]} ({' and '.join(sorted({'steps': 'n_steps', 'z': 'z'}[w] for w in kinds[k]))})"
        for k in dict.fromkeys(k for k, _, _, _ in cases) if k in kinds)
    raise CheckFailed(
        "scan_version does not give while_version's result on inputs drawn at grading time",
        measured="\n".join(problems),
        expected="the same z (within rtol=1e-5, atol=1e-6) and the same n_steps as while_version, for inputs that "
                 "converge early, late (after more than 32 steps), and for max_steps too small to converge",
        hint=advice, diagnosis=diagnosis, advice=advice,
    )


def test_grad_works_and_matches_forward(submission, truth, rng):
    cases = draw_grad_cases(rng)
    ensure("grad_works_and_matches_forward", COVERAGE["grad_works_and_matches_forward"].required,
           {"converges before max_steps, after at least 5 steps"}
           if all(5 <= np_while(t, x, 1000)[1] <= GRAD_STEPS * 3 // 4 for t, x, _ in cases) else set())
    for theta, x, weights in cases:
        unpack(submission.call("scan_version", theta, x, GRAD_STEPS), x.size)
        got = submission.probe("ex05_loops:grad_of_weighted_output", "scan_version", theta, x, weights, GRAD_STEPS)
        if "error" in got:
            advice = ("reverse mode cannot go through lax.while_loop (nor lax.fori_loop whose bounds are traced "
                      "values); use lax.scan with length=max_steps and freeze the finished state with jnp.where")
            raise CheckFailed("jax.grad of scan_version raised an error", measured=got["error"],
                              expected="a gradient with respect to theta and x", hint=advice, advice=advice,
                              diagnosis="jax.grad of scan_version raised an error (reverse mode cannot go through "
                                        "a while loop)")
        expect_no_while(got.get("primitives", {}), "the gradient computation of scan_version (jax.grad, custom "
                                                   "rules included)")
        ref_theta, ref_x = weighted_grads(weights, *forward_derivatives(truth, theta, x))
        advice = ("jax.grad of your function should equal jax.jacfwd of while_version: do not lax.stop_gradient the "
                  "state (the frozen state still carries the gradient of the steps before it), and make the result "
                  "itself match while_version first")
        wrong = []
        for name, value, ref, shape in (("theta", got["grad_theta"], ref_theta, ()),
                                        ("x", got["grad_x"], ref_x, x.shape)):
            value = np.asarray(value) if isinstance(value, np.ndarray) else None
            if value is None or value.shape != shape or not np.all(np.isfinite(value)) or \
                    not np.allclose(value, ref, rtol=1e-4, atol=1e-5):
                zero = value is not None and value.shape == shape and np.allclose(value, 0.0)
                wrong.append(f"{name} ({'all zero' if zero else 'wrong'})")
        if wrong:
            zero = all("all zero" in w for w in wrong)
            raise CheckFailed(
                "jax.grad of sum(w * z) does not match forward-mode derivatives of while_version",
                measured="gradients off: " + ", ".join(wrong), expected="agreement within rtol=1e-4, atol=1e-5",
                hint=advice, advice=advice,
                diagnosis="jax.grad of scan_version differs from the forward-mode derivatives of while_version with "
                          "respect to " + " and ".join(wrong) + (": no gradient flows through the state (is it "
                                                                 "stopped with lax.stop_gradient?)" if zero else ""))


def test_uses_scan_not_while(submission, reference, truth, rng):
    theta, x = require_correct(submission, truth, rng, "uses_scan_not_while")
    for max_steps in (10, 37):
        found, ref = structure(submission, truth, theta, x, max_steps, reference)
        expect_no_while(found["primitives"], "scan_version")
        expect_one_copy_of_the_step(found, ref, max_steps, "uses_scan_not_while")
        expect_scan_of_max_steps(found, max_steps)


def test_no_python_unrolling(submission, reference, truth, rng):
    theta, x = require_correct(submission, truth, rng, "no_python_unrolling")
    found = {m: structure(submission, truth, theta, x, m, reference) for m in (10, 100)}
    expect_no_unrolling({m: learner["total_eqns"] for m, (learner, _) in found.items()})
    for m, (learner, ref) in found.items():
        expect_one_copy_of_the_step(learner, ref, m, "no_python_unrolling")

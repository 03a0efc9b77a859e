"""Exercise 3 (per-example gradient norms): whether the program loops over the batch, shared by
the public check (a small fixed model) and the hidden one (a drawn model).  Plain data only.

The learner's ``per_example_grad_norms`` is traced at two batch sizes, each time under the
grader's own ``jax.jit`` with the values read from that same trace (``generic:jaxpr_and_values``,
``traced_summary``): the program whose structure is judged must compute the norms, so a
function that shows tracers a small program and concrete arrays a loop earns nothing here.
Then:
a JAX loop shows as a ``scan`` or ``while`` equation, a Python loop as a program that grows
with the batch, and a Python loop over a batch padded to a fixed size as a program many times
the reference solution's (only where the reference is at hand: the course's grading).
"""

from __future__ import annotations

from grader.feedback import CheckFailed, expect_traced_program_computes, expect_traced_program_runs, traced_error
from grader.jaxcompat import SCAN_PRIMITIVE, WHILE_PRIMITIVE
from grader.traced_work import expect_no_host_callback

#: The learner's jaxpr may hold at most this many times the reference solution's equations:
#: honest vmapped versions differ by tens of percent; a Python loop over a batch padded to a
#: fixed size (to pass "does not grow") holds one backward pass per padded example, 16 or
#: more since batches of 16 must be right.
MAX_EQN_RATIO = 5.0


#: How close the traced program's norms must be to the reference's (as the value checks ask).
TRACED_RTOL, TRACED_ATOL = 2e-4, 1e-5


def traced_summary(answer: dict, expected, *, what: str = "per_example_grad_norms") -> dict:
    """The jaxpr summary of a ``generic:jaxpr_and_values`` (or ``ex03_grad_norms:params_copied``)
    answer, once the same trace's outputs are shown to be the per-example norms ``expected``.
    Raises ``CheckFailed`` when tracing or running that program failed or its numbers differ:
    the structure checks judge only a program that computes what the value checks checked."""
    __tracebackhide__ = True
    import numpy as np

    expect_traced_program_runs(traced_error(answer), what)
    out = np.asarray(answer.get("outputs"))
    expected = np.asarray(expected)
    same_shape = out.shape == expected.shape
    expect_traced_program_computes(
        same_shape and np.allclose(out, expected, rtol=TRACED_RTOL, atol=TRACED_ATOL), what,
        "compute the per-example gradient norms", expected=f"the norms, within rtol={TRACED_RTOL:g}",
        measured=(f"largest difference from the reference norms: {float(np.max(np.abs(out - expected))):.3g}"
                  if same_shape else f"shape {out.shape}, expected {expected.shape}"))
    return answer["jaxpr"]


def expect_no_batch_loop(summaries: dict, references: dict | None) -> None:
    """``summaries`` / ``references``: batch size -> ``jaxpr_of`` summary of the learner's /
    the reference solution's program (``references`` None, or holding None, without a
    reference).  Raises ``CheckFailed`` naming the kind of loop, never an input."""
    __tracebackhide__ = True
    small, large = min(summaries), max(summaries)
    expect_no_host_callback(summaries[large]["primitives"], where="per_example_grad_norms",
                            advice="compute the gradients in JAX, mapped over the batch with jax.vmap: no host callback",
                            why="whatever loops over the examples there is Python, invisible to JAX and not vectorised")
    loops = {p: n for p, n in summaries[large]["primitives"].items() if p in (SCAN_PRIMITIVE, WHILE_PRIMITIVE) and n}
    if loops:
        advice = ("map over the batch with jax.vmap, which builds one batched program: lax.map, lax.scan, "
                  "fori_loop and while_loop run the examples one after another")
        raise CheckFailed(
            "the program loops over the batch with a JAX loop",
            measured=", ".join(f"{n} `{p}` equation(s)" for p, n in loops.items()),
            expected="no scan or while: a vectorised program", hint=advice, advice=advice,
            diagnosis="the program holds a JAX loop (scan or while: lax.map, lax.scan, fori_loop or while_loop), "
                      "which processes the examples one after another instead of vectorising them")
    sizes = {b: summary["total_eqns"] for b, summary in summaries.items()}
    if sizes[large] > sizes[small]:
        advice = "let jax.vmap map over the batch instead of a Python for-loop or comprehension"
        raise CheckFailed(
            "the program grows with the batch size: the batch is looped over in Python",
            measured=f"{sizes[small]} jaxpr equations for a batch of {small}, {sizes[large]} for a batch of {large}",
            expected="the same number of equations for every batch size", hint=advice, advice=advice,
            diagnosis="the traced program grows with the batch size: a Python loop over the examples is unrolled "
                      "into one copy of the backward pass per example",
        )
    if not references or any(references.get(b) is None for b in summaries):
        return  # no reference solution here: the size test above is all there is
    ratio = max(summaries[b]["total_eqns"] / max(references[b]["total_eqns"], 1) for b in summaries)
    if ratio > MAX_EQN_RATIO:
        advice = "let jax.vmap map over the batch instead of a Python loop, even one over a fixed, padded size"
        raise CheckFailed(
            "the program repeats the per-example computation many times, whatever the batch size",
            measured="; ".join(f"batch {b}: {summaries[b]['total_eqns']} equations (the reference solution: "
                               f"{references[b]['total_eqns']})" for b in summaries),
            expected=f"at most {MAX_EQN_RATIO:g} times the reference solution's equations", hint=advice,
            advice=advice,
            diagnosis="the traced program holds many copies of the backward pass at every batch size: a Python loop "
                      "over a padded batch, where jax.vmap builds one batched copy")


def expect_params_not_mapped(found: dict, expected=None) -> None:
    """``found``: an ``ex03_grad_norms:params_copied`` answer.  The parameters are shared by
    every example: a program that copies them once per example (to map them with
    ``in_axes=0``) gives the same numbers with B times the parameter memory.  With
    ``expected`` (the norms), the traced program's own outputs must be them
    (``traced_summary``) before its copies are counted."""
    __tracebackhide__ = True
    if expected is not None:
        traced_summary({**found, "jaxpr": None} if isinstance(found, dict) else found, expected)
    copies = int(found.get("copies", 0)) if isinstance(found, dict) else 0
    if copies:
        advice = ("pass the parameters to jax.vmap unmapped, in_axes=(None, 0, 0): every example uses the same "
                  "weights, so there is nothing to copy")
        raise CheckFailed(
            "the parameters are copied once per example and mapped over",
            measured=f"{copies} parameter leaf/leaves broadcast to a new leading batch axis",
            expected="no copy of any parameter: vmap with in_axes=(None, 0, 0)", hint=advice, advice=advice,
            diagnosis="the program broadcasts parameter leaves to one copy per example and maps over them: the "
                      "parameters are shared by all examples and must not be mapped (in_axes=(None, 0, 0))")


def expect_compiles_per_shape(compiles, n_shapes: int, *, hint: str, advice: str = "") -> None:
    """Exactly one compilation per input shape (``grader.testing.expect_compiles``); when there
    are more and none of them is ``per_example_grad_norms`` itself, the feedback says what they
    are: operations compiled one by one, as they are without ``@jax.jit``."""
    __tracebackhide__ = True
    from grader.testing import expect_compiles

    try:
        expect_compiles(compiles, at_least=n_shapes, at_most=n_shapes, what="per_example_grad_norms", hint=hint,
                        advice=advice)
    except CheckFailed as exc:
        names = compiles.names()
        if compiles.counted > n_shapes and names and "per_example_grad_norms" not in names:
            shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
            exc.diagnosis = (f"{compiles.counted} compilations for {n_shapes} input shape(s), and none of them is "
                             f"per_example_grad_norms itself: they are {shown}, operations compiled one by one, as "
                             f"they are when the function runs without @jax.jit")
            exc.message = exc.diagnosis
            exc.advice = exc.hint = "keep @jax.jit on per_example_grad_norms and do all the work inside it"
        raise


NORMS_NEEDS = {"the model's tanh": ("tanh",)}
NORMS_IN_JAX_ADVICE = ("compute the per-example gradients and their norms with JAX (jax.vmap of jax.grad) inside the "
                       "jitted function; NumPy on the parameters or the batch runs on the host, and a jitted function "
                       "that does none of the work only makes the compile count look right")


def expect_norms_in_jax(submission, compiles, params, xs, ys) -> None:
    """The count floor of the compile checks: ``per_example_grad_norms`` traces with every
    argument a tracer (``traced:work``) and holds the model's ``tanh``, with no host callback;
    and so do the programs compiled during the counted calls (``compiles``, their
    ``Compiles``; ``expect_compiled_work``).  Norms computed in NumPy beside a do-nothing jit
    compile once per shape too."""
    __tracebackhide__ = True
    from grader.traced_work import expect_work_in_jax

    found = submission.probe("traced:work", "per_example_grad_norms", [params, xs, ys])
    expect_work_in_jax(found, compiles, what="per_example_grad_norms", needs=NORMS_NEEDS, advice=NORMS_IN_JAX_ADVICE)

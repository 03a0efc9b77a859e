"""The count floor: a compile check also asks whether the graded function's work is JAX's.

"At least one compilation, at most the reference solution's" is true of a function that
computes everything in NumPy and jits something trivial once per signature.  What tells the
two apart is the program itself, judged twice:

* ``expect_jax_work``: the ``traced:work`` probe (``grader/probes/traced.py``) traces the
  graded function with ``jax.make_jaxpr``; it must trace (NumPy or ``float()`` on a traced
  array raises), hold the computation's essential primitives (softmax needs an ``exp``, the
  model a ``tanh``) and no host callback.  This gives the clearer message when the function
  does not trace at all -- but it is a call of its own, and a function that tells a tracer
  from an array (``isinstance(x, jax.core.Tracer)``) shows it the real program while the
  counted calls compute in NumPy beside a do-nothing jit.
* ``expect_compiled_work``: the same demands on the programs compiled DURING THE COUNTED
  REQUEST itself -- the primitives the worker's ``CompileRecorder`` read from the jaxprs
  lowered and compiled in that request (``Compiles.primitives``).  A do-nothing jit holds
  none of the work, whatever the function shows a separate trace.  A program whose jaxpr
  was gone before the request ended (a ``jax.jit`` made and dropped inside the call) shows
  nothing, so it cannot pass for the work.  The checks that judge it draw inputs whose
  signatures no earlier request (a warm-up included) compiled, so an honest function's
  program is compiled, and read, in the counted request.  Eager ``jnp`` operations compile
  a one-primitive program each and count too (decided: the recorder's attribution that
  would tell them apart is not evidence): NumPy beside an eager ``jnp.tanh`` passes this
  floor, as any decoy holding the primitive would; the floor asks that JAX compiled the
  work's essential operations while the function was measured, and the value checks (and
  ``traced_run``'s one trace, where an exercise uses it) do the rest.

Shared by the public and the hidden checks; the feedback names no input.
"""

from __future__ import annotations

from grader.feedback import CheckFailed

#: Equations that hand the work to Python on the host (``jax.pure_callback``,
#: ``jax.experimental.io_callback``): a program that holds one may compute anything there.
#: ``jax.debug.print`` / ``debug_callback`` only print, and are allowed.
HOST_CALLBACK_PRIMITIVES = ("pure_callback", "io_callback")
#: A part of ``needs`` made only of these is a choice or a loop, not arithmetic: missing, it was
#: made another way (``jnp.where``, a Python ``if``), not necessarily outside JAX.
CONTROL_FLOW_PRIMITIVES = frozenset({"cond", "while", "scan"})

_WHY_NOT_TRACED = {
    "TracerArrayConversionError": "it turns a traced array into a NumPy array (np.asarray, np.exp, ... on a JAX "
                                  "value)",
    "ConcretizationTypeError": "it needs a concrete value where JAX only has a traced one (float(), int(), or a "
                               "Python if/for on an array)",
    "TracerBoolConversionError": "it uses a traced array as a Python bool (an `if` on an array)",
    "TracerIntegerConversionError": "it uses a traced array as a Python int",
}


def expect_no_host_callback(primitives: dict, *, where: str, advice: str,
                            why: str = "the work done there is not JAX's, so it is not compiled and not what this "
                                       "exercise asks for") -> None:
    """``primitives`` (a program's primitive counts) holds no host callback: Python run on the
    host from inside the program (a loop over a batch, a whole computation) is invisible to
    every structural check.  Raises ``CheckFailed`` saying ``where`` and ``why``."""
    __tracebackhide__ = True
    callbacks = sorted(p for p in HOST_CALLBACK_PRIMITIVES if primitives.get(p))
    if callbacks:
        raise CheckFailed(
            f"{where} hands its work to Python on the host",
            measured=", ".join(f"{primitives[p]} `{p}` equation(s)" for p in callbacks),
            expected="no host callback", hint=advice, advice=advice,
            diagnosis=f"the program of {where} holds a host callback ({', '.join(callbacks)}): {why}")


def expect_jax_work(found, *, what: str, needs: dict[str, tuple[str, ...]], advice: str) -> None:
    """``found`` is a ``traced:work`` answer for ``what`` (e.g. "score"); ``needs`` maps a
    word for each essential part of the computation ("softmax's exp") to the primitives any
    of which shows it.  Raises ``CheckFailed`` (diagnosis and advice name no input)."""
    __tracebackhide__ = True
    if not isinstance(found, dict):
        raise CheckFailed(f"{what} could not be traced", measured=repr(found)[:200], expected="a jaxpr",
                          hint=advice, diagnosis=f"{what} could not be traced with jax.make_jaxpr", advice=advice)
    if "error" in found:
        error = str(found["error"])
        kind = error.split(":", 1)[0]
        why = _WHY_NOT_TRACED.get(kind, "it raised while JAX traced it")
        raise CheckFailed(
            f"{what} does not trace under JAX: {why}", measured=error[:500],
            expected=f"jax.make_jaxpr of {what} gives a program that does the work",
            hint=advice, advice=advice,
            diagnosis=f"{what} does not do its work in JAX: traced with jax.make_jaxpr it fails, because {why}. "
                      f"A compilation count alone cannot tell this from a jitted program, so it is checked")
    primitives = found.get("primitives", {}) if isinstance(found.get("primitives"), dict) else {}
    expect_no_host_callback(primitives, where=what, advice=advice)
    missing = [part for part, names in needs.items() if not any(primitives.get(n) for n in names)]
    if missing:
        choice = all(set(needs[part]) <= CONTROL_FLOW_PRIMITIVES for part in missing)
        why = ("the choice is not made by JAX's control flow (jnp.where or a select computes every branch; a Python "
               "if or int() on a value decides on the host)" if choice else
               "that part of the work happens outside JAX (NumPy on concrete values, or a result computed ahead of "
               "time)")
        raise CheckFailed(
            f"the program of {what} lacks {', '.join(missing)}",
            measured=f"primitives traced: {', '.join(sorted(primitives)[:40]) or 'none'}",
            expected="; ".join(f"{part}: one of {', '.join(names)}" for part, names in needs.items()),
            hint=advice, advice=advice,
            diagnosis=f"the program JAX traces for {what} does not hold {' or '.join(missing)}: {why}, so compiling "
                      f"it is not what the compile count rewards")


def expect_compiled_work(compiles, *, what: str, needs: dict[str, tuple[str, ...]], advice: str) -> None:
    """``compiles`` is the ``grader.testing.Compiles`` of the counted request for ``what``;
    the programs lowered and compiled during it must hold, between them, one primitive of
    each part of ``needs`` and no host callback.  Raises ``CheckFailed`` (diagnosis and
    advice name no input).  Judge it after the count: with no compilation at all the count
    check has the better message."""
    __tracebackhide__ = True
    primitives = compiles.primitives if isinstance(compiles.primitives, dict) else {}
    read, unread = compiles.programs_read, compiles.programs_unread
    seen = (f"{read} program(s) compiled while measured; primitives in them: "
            f"{', '.join(sorted(primitives)[:40]) or 'none'}"
            + (f"; {unread} more could not be read" if unread else ""))
    callbacks = sorted(p for p in HOST_CALLBACK_PRIMITIVES if primitives.get(p))
    if callbacks:
        raise CheckFailed(
            f"the programs {what} compiled while it was measured hand work to Python on the host",
            measured=seen, expected="no host callback", hint=advice, advice=advice,
            diagnosis=f"the programs your function compiled while it was measured hold a host callback "
                      f"({', '.join(callbacks)}): the work done there is not JAX's, so it is not compiled and not "
                      f"what this exercise asks for")
    missing = [" or ".join(names) for part, names in needs.items() if not any(primitives.get(n) for n in names)]
    if not missing:
        _expect_the_work_itself(compiles, what=what, advice=advice, seen=seen)
        return
    held = " and no ".join(missing)
    why = ("the work must be inside the jitted program, not computed on the host beside it")
    if read == 0 and (unread or compiles.total):
        why += ("; no program it compiled could be read, as happens when a jitted function is dropped before the "
                "calls end: jit your function once (e.g. @jax.jit at module level), not anew on every call")
    raise CheckFailed(
        f"the programs {what} compiled while it was measured hold no {held}", measured=seen,
        expected="; ".join(f"{part}: one of {', '.join(names)}" for part, names in needs.items()),
        hint=advice, advice=advice,
        diagnosis=f"the programs your function compiled while it was measured hold no {held}: {why}. A compile "
                  f"count is judged only for programs that do the work")


#: The programs compiled while a function was measured must compute at least this share of
#: the elements the reference solution's compute for the same request (``Compiles.work``):
#: honest layouts differ by tens of percent; a token program beside host work (``tanh`` of one
#: number, to show the primitive) computes almost nothing.
MIN_WORK_SHARE = 0.25


def _expect_the_work_itself(compiles, *, what: str, advice: str, seen: str) -> None:
    """The programs hold the work's primitives; they must also do its amount: at least
    ``MIN_WORK_SHARE`` of the elements the reference solution's programs compute for the same
    request (only where the reference ran it: the course's grading)."""
    __tracebackhide__ = True
    ref = compiles.reference_work
    if not ref or compiles.work >= MIN_WORK_SHARE * ref:
        return
    raise CheckFailed(
        f"the programs {what} compiled while it was measured do a small part of the work",
        measured=f"{seen}; they compute {compiles.work} elements, the reference solution's programs {ref} for the "
                 f"same calls",
        expected=f"at least {MIN_WORK_SHARE:.0%} of the reference solution's elements", hint=advice, advice=advice,
        diagnosis=f"the programs your function compiled while it was measured compute {compiles.work / ref:.1%} of "
                  f"what the reference solution's compute for the same calls: the work is done elsewhere (on the "
                  f"host, beside a jitted function that only looks the part), and a compile count is judged only "
                  f"for programs that do the work")


def expect_work_in_jax(found, compiles, *, what: str, needs: dict[str, tuple[str, ...]], advice: str) -> None:
    """The whole count floor: ``expect_jax_work`` on the ``traced:work`` answer ``found`` (the
    clearer message when the function does not trace at all), then ``expect_compiled_work`` on
    the counted request's ``compiles`` (the programs that request really compiled)."""
    __tracebackhide__ = True
    expect_jax_work(found, what=what, needs=needs, advice=advice)
    expect_compiled_work(compiles, what=what, needs=needs, advice=advice)

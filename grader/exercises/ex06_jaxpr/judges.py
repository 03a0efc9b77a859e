"""Exercise 6 (reading a jaxpr): tracing a function from its source and reading what the
learner's ``count_primitives`` answered, shared by the public and the hidden checks.

This module imports JAX: both check files of exercise 6 already do (the truth is traced
here, in the trusted process, with the installed JAX)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax
from jax.extend.core import ClosedJaxpr

from grader import ir
from grader.feedback import CheckFailed
from grader.jaxcompat import jaxprs_in_params


def trace(source, name, specs):
    """``jax.make_jaxpr`` of the function ``name`` that ``source`` defines (with ``jax``,
    ``jnp`` and ``lax`` in scope), on arguments of the given [shape, dtype] ``specs``."""
    namespace = {"jax": jax, "jnp": jnp, "lax": lax}
    exec(compile(source, f"<{name}>", "exec"), namespace)
    return jax.make_jaxpr(namespace[name])(*[jax.ShapeDtypeStruct(tuple(s), d) for s, d in specs])


def first_holder(jaxpr):
    """The first equation of ``jaxpr`` that holds a sub-jaxpr (a call, scan, cond...)."""
    return next(e for e in jaxpr.eqns if any(True for _ in jaxprs_in_params(e.params)))


def expect_x64_off(got):
    """``got`` (from ``ex06_jaxpr:count_in_source``) was counted with jax_enable_x64 off, as the truth is."""
    if got.get("x64"):
        advice = "remove jax.config.update('jax_enable_x64', True) from your file"
        raise CheckFailed("your file turns on jax_enable_x64, which changes the jaxprs being counted",
                          measured="jax_enable_x64 = True", expected="the default, False", hint=advice,
                          diagnosis="your file turns on jax_enable_x64, which changes the jaxprs being counted",
                          advice=advice)


# --------------------------------------------------------------------------------------
# Judging counts, with a diagnosis of the usual mistakes: the learner's counts are compared
# with those of known wrong walks over the same jaxpr (computed here, never shown raw)
# --------------------------------------------------------------------------------------

def _every_sub(params):
    return jaxprs_in_params(params)


def _closed_subs_only(params):  # a walk that ignores bare Jaxprs (what checkpoint holds)
    for value in params.values():
        for item in value if isinstance(value, tuple) else (value,):
            if isinstance(item, ClosedJaxpr):
                yield item.jaxpr


def _jaxpr_param_only(params):  # a walk that only looks at a param called "jaxpr"
    sub = params.get("jaxpr")
    if sub is not None:
        yield getattr(sub, "jaxpr", sub)


def _two_branches(params):  # a walk that takes a tuple of jaxprs for a cond's (true, false) pair
    for value in params.values():
        for item in value[:2] if isinstance(value, tuple) else (value,):
            if hasattr(item, "eqns") or hasattr(item, "jaxpr"):
                yield getattr(item, "jaxpr", item)


def _walk(closed, *, subs=_every_sub, count_holders=True, dedupe=False):
    counts, seen, stack = {}, set(), [closed.jaxpr]
    while stack:
        j = stack.pop()
        if dedupe:
            if id(j) in seen:
                continue
            seen.add(id(j))
        for eqn in j.eqns:
            inner = list(subs(eqn.params)) if subs is not None else []
            if count_holders or not any(True for _ in jaxprs_in_params(eqn.params)):
                name = ir.primitive_name(eqn.primitive)
                counts[name] = counts.get(name, 0) + 1
            stack.extend(inner)
    return counts


MISTAKES = (
    (dict(subs=None), "you count only the top-level equations: descend into every sub-jaxpr held in eqn.params, "
                      "recursively"),
    (dict(count_holders=False), "you count what is inside sub-jaxprs but not the equation holding them: a jit, scan, "
                                "cond, ... equation counts once itself"),
    (dict(dedupe=True), "you skip sub-jaxprs you have seen before: a helper used in two places (or as both branches "
                        "of a cond) counts in each place"),
    (dict(subs=_jaxpr_param_only), "you only look inside a param named 'jaxpr': cond keeps its sub-jaxprs in "
                                   "'branches' (a tuple), and while_loop and custom_jvp/custom_vjp use other names; "
                                   "look at every param value"),
    (dict(subs=_closed_subs_only), "you only descend into ClosedJaxpr values: jax.checkpoint (remat2) holds a bare "
                                   "Jaxpr"),
    (dict(subs=_two_branches), "you look at only the first two jaxprs of a tuple: a cond made by lax.switch has one "
                               "branch per case, so walk every item of the branches tuple"),
)


def diagnose(counts, closed):
    """The known wrong walks whose counts the learner's equal (on this function)."""
    truth = ir.primitive_counts(closed)
    return [text for kwargs, text in MISTAKES if counts == (wrong := _walk(closed, **kwargs)) and wrong != truth]


GENERIC_ADVICE = ("print the jaxpr of a function built like this and count by hand: every equation at every depth "
                  "once, the higher-order equation itself included, and every place a sub-jaxpr appears")


def expect_mapping(got):
    """``got`` (from ``ex06_jaxpr:count_in_source``) holds a dict of str -> int, counted with x64 off."""
    expect_x64_off(got)
    if got["counts"] is None:
        advice = "return a plain dict (or collections.Counter) keyed by eqn.primitive.name, a str"
        raise CheckFailed("count_primitives should return a dict with str keys",
                          measured=f"a {got['type']}" + (f" with keys of type {got['key_types']}"
                                                         if got["key_types"] else ""),
                          expected="a dict {primitive name: count}", hint=advice, advice=advice,
                          diagnosis="count_primitives does not return a mapping with str keys")
    bad = sorted(k for k, v in got["counts"].items() if type(v) is not int)
    if bad:
        advice = "count with a dict or collections.Counter; avoid NumPy integers"
        raise CheckFailed("count_primitives: every count should be a Python int",
                          measured=f"{len(bad)} value(s) that are not ints", expected="int values",
                          hint=advice, advice=advice, diagnosis="some counts are not Python ints")
    return got["counts"]


def count_problem(counts, closed):
    """None when ``counts`` are exact; else (direction, mistake) in words that name no count."""
    truth = ir.primitive_counts(closed)
    if counts == truth:
        return None
    total, right_total = sum(counts.values()), sum(truth.values())
    direction = ("too few equations in all" if total < right_total else "too many equations in all"
                 if total > right_total else "the right total but wrong counts per primitive")
    return direction, diagnose(counts, closed)


def fail_counts(where, problems, total):
    """``problems``: [(what, direction, mistakes)] of ``total`` functions -> a CheckFailed naming
    constructs and mistakes only (never a function's source or counts)."""
    directions = {direction for _, direction, _ in problems}
    if len(problems) == total and len(directions) == 1:
        listing = f"on every one of them ({directions.pop()})"
    else:
        listing = "; ".join(f"{what} ({direction})" for what, direction, _ in problems)
    sets = [set(m) for _, _, m in problems]
    common = set.intersection(*sets) if all(sets) else set()
    mistakes = [text for _, text in MISTAKES if text in (common or set().union(*sets))]
    diagnosis = f"count_primitives is wrong {where}: {listing}"
    if mistakes:
        diagnosis += (". Your counts look like " + ("this mistake: " if len(mistakes) == 1 else
                                                    "one of these mistakes: ") + " -- OR -- ".join(mistakes))
    advice = " -- OR -- ".join(mistakes) or GENERIC_ADVICE
    raise CheckFailed(diagnosis, measured="\n".join(f"{w}: {d}" for w, d, _ in problems),
                      expected="one count per equation at every nesting depth, for every primitive that occurs",
                      hint=advice, diagnosis=diagnosis, advice=advice)



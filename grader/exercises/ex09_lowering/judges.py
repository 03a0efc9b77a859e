"""Exercise 9 (lowering and export): judging ``ir_stats``, the exported GELU and the reading
answers, shared by the public and the hidden checks.

No JAX here: the truth is measured in the clean worker (``grader/exercises/ex09_lowering/probes.py``,
from the modules' structure, see ``grader.xla_structure``) and arrives as plain data.
"""

from __future__ import annotations

import math
import weakref

import numpy as np

from grader.feedback import CheckFailed

#: The stub's ``gelu`` (the reading questions are about it); the truth probe traces this copy.
GELU_SOURCE = '''
def gelu(x):
    return x * 0.5 * (1.0 + jax.lax.erf(x / jnp.sqrt(2.0)))
'''
STATS_KEYS = ("jaxpr_eqns", "stablehlo_ops", "hlo_opcodes", "optimized_entry_opcodes")
STAGES = ("stablehlo", "hlo", "optimized_hlo")
DIALECTS = ("stablehlo", "chlo")

# What each key means, said the same way in every message.
MEANING = {
    "jaxpr_eqns": "the number of equations of the OUTER jaxpr of jax.make_jaxpr(fn)(*args)",
    "stablehlo_ops": "every stablehlo.* and chlo.* operation of the lowered module, at every depth, "
                     "counted once where it is written",
    "hlo_opcodes": "every instruction of every computation of lowered.as_text('hlo'), by opcode",
    "optimized_entry_opcodes": "every instruction of the ENTRY computation of lowered.compile().as_text(), "
                               "by opcode",
}


def reference_gelu(x: np.ndarray) -> np.ndarray:
    """Exact GELU in float64: x * Phi(x), with math.erf."""
    x64 = np.asarray(x, np.float64)
    return x64 * 0.5 * (1.0 + np.vectorize(math.erf)(x64 / math.sqrt(2.0)))


# ------------------------------------------------------------------------------------------
# ir_stats
# ------------------------------------------------------------------------------------------

def stats_of(got: dict, key: str, what: str) -> object:
    """The learner's value for ``key`` from an ``ex09_lowering:stats_in_source`` answer, or a
    CheckFailed saying what is wrong with the form of what ir_stats returned."""
    if got["stats"] is None:
        raise CheckFailed(f"ir_stats should return a dict ({what})", measured=f"a {got['type']}",
                          expected=f"a dict with the keys {list(STATS_KEYS)}",
                          hint="return {'jaxpr_eqns': int, 'stablehlo_ops': {...}, 'hlo_opcodes': {...}, "
                               "'optimized_entry_opcodes': {...}}",
                          diagnosis="ir_stats did not return a dict", advice="return a dict with the four keys")
    if key not in got["stats"]:
        problems = "; ".join(p for p in got["problems"] if key in p) or f"no key {key!r}"
        raise CheckFailed(f"ir_stats has no usable {key!r} ({what})", measured=problems,
                          expected="an int" if key == "jaxpr_eqns" else "a dict {name (str): count (int)}",
                          hint="counts are Python ints (len(...), Counter values); avoid NumPy integers",
                          diagnosis=f"the value of {key!r} is missing or has the wrong type: {problems}",
                          advice="return Python ints, and plain dicts (or Counters) with str keys")
    return got["stats"][key]


def _diff(mine: dict, truth: dict) -> list[str]:
    return sorted(k for k in set(mine) | set(truth) if mine.get(k, 0) != truth.get(k, 0))


def _explain(key: str, mine, truth: dict) -> str:
    """What went wrong, naming the mistake when the counts are those of a usual one."""
    right, mistakes = truth[key], truth["mistakes"]
    if key == "jaxpr_eqns":
        if mine == mistakes["jaxpr_every_depth"] != right:
            return ("you counted the equations inside sub-jaxprs too; count only the outer jaxpr's equations "
                    "(an equation holding a jit, cond or loop counts as one)")
        return f"you counted {'too many' if mine > right else 'too few'} equations"
    if key == "hlo_opcodes" and mine == mistakes["hlo_entry_only"] != right:
        return ("you counted only the ENTRY computation; this count covers every computation of the module "
                "(called functions, reduction bodies, loop bodies, branches)")
    if key == "hlo_opcodes" and mine == mistakes.get("hlo_to_root") != right:
        return ("you stopped reading a computation at its ROOT line; instructions can follow it (a jax.debug.print "
                "of the last value computed, and what it prints, come after ROOT): read each computation to its "
                "closing `}`")
    if key == "optimized_entry_opcodes":
        if mine == mistakes["optimized_whole_module"] != right:
            return "you counted every computation of the optimized module; this count is of ENTRY alone"
        if mine == mistakes["optimized_entry_but_fused"] != right:
            return ("you counted what the fusions hold; in ENTRY a fusion is one instruction, opcode 'fusion'")
        if mine == mistakes.get("optimized_entry_to_root") != right:
            return ("you stopped reading ENTRY at its ROOT line; an instruction with a side effect (the custom-call "
                    "of a jax.debug.print) can come after it: read ENTRY to its closing `}`")
    names = _diff(mine, right)
    text = f"wrong count for {len(names)} name(s): {', '.join(names[:8])}{' ...' if len(names) > 8 else ''}"
    if key == "stablehlo_ops":
        foreign = [n for n in mine if n.split(".", 1)[0].strip('"') not in DIALECTS]
        quoted = [n for n in mine if '"' in n or "%" in n or " " in n]
        if quoted:
            text += "; some of your names are not bare op names (strip quotes and anything around the name)"
        elif foreign:
            text += "; count only stablehlo.* and chlo.* operations (func.call, func.return and the like are not)"
        elif mine.get("stablehlo.return", 0) < right.get("stablehlo.return", 0):
            text += ("; operations inside regions count too: a case's branches, a while's condition and body, and "
                     "a short-form reduction (`stablehlo.reduce(...) applies stablehlo.add across ...`), whose body "
                     "of two operations, the applied op and a stablehlo.return, the printed line hides")
    return text


def judge_stats(got: dict, truth: dict, key: str, what: str) -> None:
    mine = stats_of(got, key, what)
    right = truth[key]
    if mine == right:
        return
    diagnosis = _explain(key, mine, truth)
    raise CheckFailed(
        f"ir_stats(...)[{key!r}] is wrong for {what}",
        measured=f"yours: {mine!r}"[:1500], expected=f"{right!r}"[:1500],
        hint=f"{key} is {MEANING[key]}",
        diagnosis=diagnosis,
        advice=f"{key} is {MEANING[key]}; print the text for a function built like this one and count by hand",
    )


# ------------------------------------------------------------------------------------------
# export_gelu
# ------------------------------------------------------------------------------------------

def run_learner_export(submission, truth, features: int, batches: list) -> dict:
    """The learner's export, serialized in their sandbox and run in the clean worker."""
    made = submission.probe("ex09_lowering:export_bytes", features)
    if not made.get("is_exported") or "blob" not in made:
        return made
    return truth.probe("ex09_lowering:run_serialized", made["blob"], batches)


def expect_exported(got: dict) -> None:
    if not got["is_exported"]:
        raise CheckFailed("export_gelu(features) should return a jax.export.Exported", measured=f"a {got['type']}",
                          expected="what jax.export.export(jax.jit(gelu))(spec) returns",
                          hint="return the Exported object itself, not its serialized bytes or a function",
                          diagnosis="export_gelu did not return a jax.export.Exported",
                          advice="return jax.export.export(jax.jit(gelu))(jax.ShapeDtypeStruct((b, features), "
                                 "jnp.float32)) with b from jax.export.symbolic_shape")
    if "error" in got:
        raise CheckFailed("the Exported could not be serialized and loaded again", measured=got["error"],
                          expected="exported.serialize() and jax.export.deserialize(...) work",
                          hint="export gelu itself, jitted: no host callbacks or Python state in it",
                          diagnosis="the grader runs your export from its serialized bytes, and those did not load",
                          advice="export jax.jit(gelu) on a jax.ShapeDtypeStruct; do not change the object afterwards")


def judge_export_numbers(got: dict, batches: list, features_named: bool) -> None:
    """Every call of the exported function ran and equals the exact GELU."""
    expect_exported(got)
    for x, res in zip(batches, got["results"]):
        if not res["ok"]:
            shape_error = "Shape mismatch" in res["error"] or "polymorphic" in res["error"]
            raise CheckFailed(
                "calling the exported function failed" + (f" on a batch of {x.shape[0]}" if features_named else ""),
                measured=res["error"], expected="it runs for every batch size",
                hint="export with a symbolic batch dimension: b, = jax.export.symbolic_shape('b'); "
                     "then jax.ShapeDtypeStruct((b, features), jnp.float32)",
                diagnosis=("the exported function refused an input shape: its batch dimension (or its feature "
                           "dimension) is not what the call needs" if shape_error else
                           "the exported function raised when it was called"),
                advice="export once with a symbolic batch dimension and the given number of features; "
                       "then exported.call(x) runs for every batch size")
        if res["dtype"] != "float32":
            raise CheckFailed("the exported function should return float32", measured=res["dtype"],
                              expected="float32", hint="export on float32 inputs",
                              diagnosis="the exported function does not return float32",
                              advice="export with jax.ShapeDtypeStruct(..., jnp.float32)")
        y, want = res["value"], reference_gelu(x)
        if y.shape != want.shape or not np.allclose(y, want, rtol=1e-5, atol=2e-6):
            worst = float(np.max(np.abs(y - want))) if y.shape == want.shape else float("nan")
            raise CheckFailed(
                "the exported function does not compute the exact GELU",
                measured=f"shape {y.shape}, largest difference {worst:.3g}", expected="x * Phi(x), within 1e-5",
                hint="export the stub's gelu (erf form); jax.nn.gelu defaults to the tanh approximation",
                diagnosis=("the outputs differ from the exact (erf) GELU by more than rounding: the tanh "
                           "approximation, or another function, was exported") if y.shape == want.shape else
                          "the output does not have the shape of the input",
                advice="export gelu as the stub defines it (or jax.nn.gelu(x, approximate=False))")


def judge_export_shapes(got: dict, features: int) -> None:
    """One input, (symbolic, features) float32; the output likewise; CPU; a dynamic dim in the module."""
    expect_exported(got)
    problems = []
    if len(got["in_avals"]) != 1:
        problems.append(f"{len(got['in_avals'])} inputs instead of one")
    else:
        sym, aval = got["in_symbolic"][0], got["in_avals"][0]
        if len(sym) != 2 or not sym[0]:
            problems.append("the batch dimension of the input is not symbolic")
        elif sym[1]:
            problems.append("the feature dimension is symbolic too; only the batch dimension should be")
        elif not aval.endswith(f",{features}]"):
            problems.append("the feature dimension is not the `features` argument")
        if got["in_dtypes"][0] != "float32":
            problems.append("the input is not float32")
    if len(got["out_symbolic"]) != 1 or got["out_symbolic"][0][:1] != [True]:
        problems.append("the output's batch dimension is not symbolic")
    if "cpu" not in got["platforms"]:
        problems.append("it was not exported for the cpu platform")
    if "tensor<?x" not in got["main_args"]:
        problems.append("the exported module's main function does not take a dynamic (?) batch dimension")
    if problems:
        raise CheckFailed(
            "the Exported does not have the shapes the statement asks for",
            measured="; ".join(problems) + f" (in_avals {got['in_avals']}, out_avals {got['out_avals']})",
            expected=f"in_avals [float32[b,{features}]]: one symbolic batch dimension, the features fixed",
            hint="b, = jax.export.symbolic_shape('b'); jax.ShapeDtypeStruct((b, features), jnp.float32)",
            diagnosis="; ".join(p for p in problems),
            advice="export with exactly one symbolic dimension, the batch, and the given feature count")


# ------------------------------------------------------------------------------------------
# Reading answers
# ------------------------------------------------------------------------------------------

QUESTIONS = {
    "gelu_jaxpr_eqns": ("int", "the number of equations of gelu's jaxpr",
                        "print jax.make_jaxpr(gelu)(jnp.ones((4, 8))) and count the lines between `let` and `in`"),
    "gelu_stablehlo_ops": ("int", "the number of stablehlo/chlo operations of gelu's lowered module",
                           "count every operation of jax.jit(gelu).lower(x).as_text() the way ir_stats does, "
                           "constants and broadcasts included"),
    "erf_in_stablehlo": ("str", "the full name of the operation erf lowers to in StableHLO",
                         "find the line of the lowered text that computes erf; its op name has a dialect prefix "
                         "that is not always `stablehlo.`"),
    "stages_with_sqrt": ("list", "the stages whose program still takes a square root",
                         "look for sqrt in the StableHLO, in lowered.as_text('hlo') and in the optimized HLO, "
                         "fused computations included; a constant expression may be folded early"),
    "erf_operand_in_optimized": ("str", "the opcode of the instruction that erf reads in the optimized HLO",
                                 "in compile().as_text(), find erf(...) inside the fused computation and the line "
                                 "that defines its operand: dividing by a constant became something cheaper"),
    "optimized_fusion_kinds": ("list", "the kinds of the fusions in the optimized ENTRY",
                               "read kind=... on each fusion instruction of the ENTRY computation"),
}


_ANSWERS = weakref.WeakKeyDictionary()


def learner_answers(submission):
    """What the learner's answers() returned, asked once per sandbox (it lowers and compiles)."""
    if submission not in _ANSWERS:
        _ANSWERS[submission] = submission.probe("ex09_lowering:answers")["answers"]
    return _ANSWERS[submission]


def normalise(kind: str, value):
    """The learner's answer in canonical form, or None when it has the wrong type."""
    if kind == "str":
        return value.strip() if isinstance(value, str) else None
    if kind == "int":
        return value if type(value) is int else None
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return sorted(v.strip() for v in value)
    return None


def judge_answer(got, truth: dict, key: str) -> None:
    judge_answers(got, truth, (key,))


def judge_answers(got, truth: dict, keys) -> None:
    """Every answer of ``keys`` is there, of its type, and what this JAX produces; one failure
    names EVERY wrong answer (a learner with two wrong answers hears of both at once)."""
    if not isinstance(got, dict):
        raise CheckFailed("answers() should return a dict", measured=type(got).__name__, expected="dict",
                          hint="return {'gelu_jaxpr_eqns': ..., ...} with the keys the stub lists",
                          diagnosis="answers() does not return a dict", advice="return a dict with the keys the stub lists")
    missing = [k for k in keys if k not in got]
    if missing:
        raise CheckFailed(f"answers() has no answer for {', '.join(map(repr, missing))}",
                          measured=f"keys {sorted(got)[:10]}", expected=f"a dict with the keys {list(keys)}",
                          hint="use exactly the keys the stub lists",
                          diagnosis=f"answers() has no key {', '.join(map(repr, missing))}",
                          advice="use exactly the keys the stub lists")
    wrong_type, wrong = [], []
    for key in keys:
        kind, what, hint = QUESTIONS[key]
        answer = normalise(kind, got[key])
        right = sorted(truth[key]) if kind == "list" else truth[key]
        if answer is None:
            wrong_type.append((key, {"str": "a str", "int": "an int", "list": "a list of str"}[kind], hint))
        elif answer != right:
            wrong.append((key, what, hint, right))
    if wrong_type:
        raise CheckFailed("; ".join(f"answers()[{k!r}] should be {e}" for k, e, _ in wrong_type),
                          measured="; ".join(f"{k}: a {type(got[k]).__name__}" for k, _, _ in wrong_type),
                          expected="; ".join(f"{k}: {e}" for k, e, _ in wrong_type),
                          hint=" -- ".join(h for _, _, h in wrong_type),
                          diagnosis="; ".join(f"answers()[{k!r}] should be {e}" for k, e, _ in wrong_type),
                          advice=" -- ".join(h for _, _, h in wrong_type))
    if wrong:
        if len(wrong) == 1:
            (key, what, _, _), = wrong
            message = f"answers()[{key!r}] is not what the installed JAX shows"
            diagnosis = f"answers()[{key!r}] ({what}) disagrees with what this JAX produces"
        else:
            message = (f"{len(wrong)} answers are not what the installed JAX shows: "
                       + ", ".join(repr(k) for k, *_ in wrong))
            diagnosis = (f"{len(wrong)} answers disagree with what this JAX produces: "
                         + "; ".join(f"{k!r} ({what})" for k, what, _, _ in wrong))
        raise CheckFailed(message, measured="; ".join(f"{k}: your answer {got[k]!r}" for k, *_ in wrong),
                          expected="; ".join(f"{k} ({what}): {right!r}" for k, what, _, right in wrong),
                          hint=" -- ".join(f"{k}: {h}" for k, _, h, _ in wrong), diagnosis=diagnosis,
                          advice=" -- ".join(f"{k}: {h}" for k, _, h, _ in wrong))

"""Exercise 10 (reading fusion and simplification): the elementwise opcodes, the compile
pipelines, the rewrite cases and how each is judged, and the judging of what the learner's
``fusions``/``unfused``/``rewrites`` returned; shared by the public and the hidden checks.

No JAX here: modules are compiled, and the truth read from their structure
(``grader.xla_structure``), in the clean worker (``grader/exercises/ex10_fusion/probes.py``), which
gets the data below with each request.
"""

from __future__ import annotations

import weakref
from collections import Counter

from grader.feedback import CheckFailed

#: The opcodes `unfused` counts: XLA's elementwise arithmetic, logic and conversions (the
#: stub hands the learner the same set).  Data movement (copy, broadcast, reshape,
#: transpose, bitcast) and everything that is not one-output-element-per-input-element
#: (reduce, dot, sort, ...) is not in it.
ELEMENTWISE = frozenset({
    "abs", "cbrt", "ceil", "count-leading-zeros", "convert", "cosine", "erf", "exponential",
    "exponential-minus-one", "floor", "imag", "is-finite", "log", "log-plus-one", "logistic", "negate", "not",
    "popcnt", "real", "round-nearest-afz", "round-nearest-even", "rsqrt", "sign", "sine", "sqrt", "tan", "tanh",
    "add", "and", "atan2", "compare", "complex", "divide", "maximum", "minimum", "multiply", "or", "power",
    "remainder", "shift-left", "shift-right-arithmetic", "shift-right-logical", "subtract", "xor",
    "clamp", "select",
})

#: How a module is compiled: `lowered.compile(compiler_options=...)`.  CPU XLA wraps every
#: elementwise op its fusion pass left alone into a one-op kLoop fusion (pass
#: `fusion-wrapper`); turned off, those ops stay bare in ENTRY.  With `fusion` off too,
#: nothing elementwise is fused (dots still go to kCustom fusions).
PIPELINES = {
    "default": {},
    "wrapper_off": {"xla_disable_hlo_passes": "fusion-wrapper"},
    "fusion_off": {"xla_disable_hlo_passes": "fusion,fusion-wrapper"},
}

#: The stub's examples (the grader's copies: name -> (source, arg specs)), and the
#: pipelines the public checks compile each under.  ``example_loop_print`` holds fusions
#: outside ENTRY and, after ENTRY's ROOT line, a fusion (default pipeline) or bare
#: elementwise work (fusion off); ``example_folds_away`` is simplified to a copy and its
#: text has no tables; ``example_argmax`` has a tuple-shaped fusion (a variadic reduce).
EXAMPLES = {
    "example_mlp": ('''
def example_mlp(x, w, b):
    return jax.nn.relu(x @ w + b)
''', [[[32, 64], "float32"], [[64, 128], "float32"], [[128], "float32"]]),
    "example_softmax": ('''
def example_softmax(x):
    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    return e / jnp.sum(e, axis=-1, keepdims=True)
''', [[[8, 16], "float32"]]),
    "example_loop_print": ('''
def example_loop_print(x):
    v = jax.lax.fori_loop(0, 3, lambda i, u: jnp.sin(u) * 2.0 + 1.0, x)
    jax.debug.print("v: {}", jnp.cos(v) * 0.5 + 1.0)
    return v
''', [[[6, 8], "float32"]]),
    "example_folds_away": ('''
def example_folds_away(x):
    return x * 1.0
''', [[[4, 4], "float32"]]),
    "example_argmax": ('''
def example_argmax(x):
    return jnp.argmax(x, axis=-1)
''', [[[8, 16], "float32"]]),
}
EXAMPLE_PIPELINES = {
    "example_mlp": ("default", "wrapper_off", "fusion_off"),
    "example_softmax": ("default", "wrapper_off", "fusion_off"),
    "example_loop_print": ("default", "fusion_off"),
    "example_folds_away": ("default",),
    "example_argmax": ("default",),
}

#: The rewrite cases, as the stub defines them (the truth probe runs this copy).
CASES_SOURCE = '''
def x_plus_zero(x):
    return x + 0.0


def x_times_one(x):
    return x * 1.0


def x_times_zero(x):
    return x * 0


def x_minus_x(x):
    return x - x


def max_of_relu(x):
    return jnp.maximum(jax.nn.relu(x), 0.0)


def transpose_twice(x):
    return x.T.T


def reshape_twice(x):
    return x.reshape(-1).reshape(x.shape[1], x.shape[0])


def broadcast_scalars_add(a, b, like):
    return jnp.broadcast_to(a, like.shape) + jnp.broadcast_to(b, like.shape)


def dot_identity(x):
    return x @ jnp.eye(x.shape[1], dtype=x.dtype)


def slice_of_concat(x):
    return jnp.concatenate([x, 2.0 * x])[: x.shape[0]]


def with_debug_print(x):
    jax.debug.print("x = {}", x)
    return jnp.sin(x) * 2.0
'''

#: key -> (function, arguments, rule).  Arguments: "f32"/"i32" = one 2-D x of that dtype;
#: "scalars" = two f32 scalars and a 2-D f32 `like`.  A rule says when the rewrite counts
#: as applied, read over EVERY computation of the optimized module (fused ones included):
#: ("none", ops): no instruction with one of these opcodes is left;
#: ("at_most_one", ops): at most one instruction with one of these opcodes is left;
#: ("scalar_add", ()): every `add` left has a scalar (0-dimensional) result.
CASES = {
    "x_plus_zero": ("x_plus_zero", "f32", ("none", ("add",))),
    "x_times_one": ("x_times_one", "f32", ("none", ("multiply",))),
    "x_times_zero_f32": ("x_times_zero", "f32", ("none", ("multiply",))),
    "x_times_zero_i32": ("x_times_zero", "i32", ("none", ("multiply",))),
    "x_minus_x_f32": ("x_minus_x", "f32", ("none", ("subtract",))),
    "x_minus_x_i32": ("x_minus_x", "i32", ("none", ("subtract",))),
    "max_of_relu": ("max_of_relu", "f32", ("at_most_one", ("maximum",))),
    "transpose_twice": ("transpose_twice", "f32", ("none", ("transpose",))),
    "reshape_twice": ("reshape_twice", "f32", ("at_most_one", ("reshape", "bitcast"))),
    "broadcast_scalars_add": ("broadcast_scalars_add", "scalars", ("scalar_add", ())),
    "dot_identity": ("dot_identity", "f32", ("none", ("dot",))),
    "slice_of_concat": ("slice_of_concat", "f32", ("none", ("slice", "concatenate"))),
    "debug_print_removed": ("with_debug_print", "f32", ("none", ("custom-call",))),
}


# ------------------------------------------------------------------------------------------
# Asking the clean worker (it compiles; the data comes from here)
# ------------------------------------------------------------------------------------------

def compile_module(truth, source: str, fn_name: str, arg_specs: list, pipeline: str) -> dict:
    """The optimized HLO text of ``fn_name`` compiled under ``pipeline``, and what its
    structure says (see ``grader/exercises/ex10_fusion/probes.py``)."""
    return truth.probe("ex10_fusion:compile_module", source, fn_name, arg_specs, PIPELINES[pipeline],
                       sorted(ELEMENTWISE))


def rewrite_applied(truth, key: str, shape: list) -> bool:
    """Whether the rule of case ``key`` holds once the case is compiled for ``shape``."""
    fn_name, arg_kind, (kind, ops) = CASES[key]
    return truth.probe("ex10_fusion:rewrite_applied", CASES_SOURCE, fn_name, arg_kind, [kind, list(ops)],
                       shape)["applied"]


# ------------------------------------------------------------------------------------------
# fusions / unfused
# ------------------------------------------------------------------------------------------

def _canonical_fusions(value) -> list | None:
    """The learner's list as sorted (name, kind, sorted opcode items), or None if malformed."""
    if not isinstance(value, list):
        return None
    out = []
    for item in value:
        if not isinstance(item, dict) or set(item) != {"name", "kind", "opcodes"}:
            return None
        name, kind, ops = item["name"], item["kind"], item["opcodes"]
        if not isinstance(name, str) or not isinstance(kind, str) or not isinstance(ops, dict):
            return None
        if not all(type(k) is str and type(v) is int for k, v in ops.items()):
            return None
        out.append((name, kind, tuple(sorted(ops.items()))))
    return sorted(out)


def _form_failure(what: str, got, expected: str, hint: str) -> CheckFailed:
    return CheckFailed(f"{what} returned something of the wrong form", measured=repr(got)[:600],
                       expected=expected, hint=hint,
                       diagnosis=f"{what} returned a value of the wrong form: expected {expected}",
                       advice=hint)


FUSIONS_FORM = ("a list of dicts {'name': str, 'kind': str, 'opcodes': {opcode (str): count (int)}}, "
                "one per fusion instruction")


def judge_fusions(got, truth: dict, what: str) -> None:
    """``got``: what the learner's fusions(text) returned; ``truth``: the compile probe's answer."""
    mine = _canonical_fusions(got)
    if mine is None:
        raise _form_failure("fusions(text)", got, FUSIONS_FORM,
                            "names without '%', kinds as printed (kLoop), counts as Python ints")
    right = _canonical_fusions(truth["fusions"])
    if mine == right:
        return
    names_mine, names_right = Counter(n for n, _, _ in mine), Counter(n for n, _, _ in right)
    kinds = {n: k for n, k, _ in right}
    ops = {n: dict(o) for n, _, o in right}
    mine_by_name = {n: (k, dict(o)) for n, k, o in mine}
    problems = []
    if any(n.startswith("%") for n in names_mine):
        problems.append("some names start with '%': give the instruction's name without it")
    missing = sorted((names_right - names_mine).elements())
    extra = sorted((names_mine - names_right).elements())
    if missing:
        outside = [n for n in missing if n in truth.get("outside_entry", ())]
        late = [n for n in missing if n in truth.get("after_root", ())]
        problems.append(f"{len(missing)} fusion instruction(s) missing"
                        + (f", {len(outside)} of them outside ENTRY (in a loop body or a branch)" if outside else "")
                        + (f", {len(late)} of them printed after ENTRY's ROOT line (read ENTRY to its closing "
                           f"`}}`: a side effect and what it reads can come after ROOT)" if late else ""))
    if extra and not any(n.startswith("%") for n in extra):
        problems.append(f"{len(extra)} entr(ies) that are not fusion instructions of the module")
    wrong_kind = sorted(n for n in kinds if n in mine_by_name and mine_by_name[n][0] != kinds[n])
    if wrong_kind:
        problems.append(f"the kind is wrong for {len(wrong_kind)} fusion(s)")
    wrong_ops = sorted(n for n in ops if n in mine_by_name and mine_by_name[n][1] != ops[n])
    if wrong_ops:
        mistake = _ops_mistake(mine_by_name, ops, wrong_ops, truth)
        problems.append(f"the opcodes are wrong for {len(wrong_ops)} fusion(s){mistake}")
    raise CheckFailed(
        f"fusions(text) is wrong for {what}",
        measured=("; ".join(problems) + f" (yours: {got!r})")[:1500], expected=repr(truth["fusions"])[:1500],
        hint="one entry per instruction whose opcode is `fusion`, in any computation; its opcodes are those of "
             "every instruction of the computation named by calls=..., parameters included",
        diagnosis="; ".join(problems) or "the list differs from the module's fusion instructions",
        advice="list every `fusion` instruction of every computation; follow calls= to the computation of that "
               "exact name and count all of its instructions (parameters too), but not computations it calls")


def _ops_mistake(mine_by_name, ops, wrong, truth) -> str:
    """A named mistake when every wrong opcode table is off in the same recognisable way."""
    no_params = all({k: v for k, v in ops[n].items() if k != "parameter"} == mine_by_name[n][1] for n in wrong)
    if no_params:
        return ": parameter instructions are part of the fused computation and count too"
    with_called = truth.get("with_called", {})
    if with_called and all(mine_by_name[n][1] == with_called.get(n) for n in wrong):
        return (": you added the instructions of computations the fused computation calls (a reduce's "
                "to_apply); count only the fused computation's own instructions")
    return ""


def judge_unfused(got, truth: dict, what: str) -> None:
    if not isinstance(got, dict) or not all(type(k) is str and type(v) is int for k, v in got.items()):
        raise _form_failure("unfused(text)", got, "a dict {opcode (str): count (int)}",
                            "return a dict (or Counter) of opcode -> count; {} when nothing is left unfused")
    mine = {k: v for k, v in got.items() if v}
    right = truth["unfused"]
    if mine == right:
        return
    problems = []
    not_elementwise = sorted(k for k in mine if k not in ELEMENTWISE)
    if not_elementwise:
        problems.append(f"you counted opcodes that are not elementwise ({', '.join(not_elementwise[:6])})")
    if mine == truth.get("unfused_to_root"):
        problems.append("you stopped reading ENTRY at its ROOT line: a side effect (a jax.debug.print's "
                        "custom-call) and the elementwise work only it reads can come after ROOT; read ENTRY to "
                        "its closing `}`")
    elif mine in (truth.get("unfused_every_computation"), truth.get("unfused_outside_fusions")):
        problems.append("you counted elementwise instructions of other computations too (fused computations, "
                        "loop bodies, reducers); only ENTRY's own instructions count")
    elif sum(mine.values()) > sum(right.values()):
        problems.append("you counted more elementwise instructions than ENTRY holds outside fusions "
                        "(instructions inside fused computations, or in other computations, do not count)")
    elif sum(mine.values()) < sum(right.values()):
        problems.append("you missed elementwise instructions that sit bare in ENTRY (read every line of ENTRY, "
                        "including lines after the ROOT one)")
    else:
        problems.append("the opcodes are right in number but not in kind")
    raise CheckFailed(
        f"unfused(text) is wrong for {what}",
        measured=("; ".join(problems) + f" (yours: {mine!r})")[:1500], expected=repr(right)[:1500],
        hint="count the instructions of the ENTRY computation whose opcode is in ELEMENTWISE",
        diagnosis="; ".join(problems),
        advice="read only the ENTRY computation; count each instruction whose opcode is in ELEMENTWISE (a fusion "
               "instruction's opcode is `fusion`, so what it fused is not counted)")


# ------------------------------------------------------------------------------------------
# rewrites
# ------------------------------------------------------------------------------------------

_REWRITES = weakref.WeakKeyDictionary()


def learner_rewrites(submission):
    """What the learner's rewrites() returned, asked once per sandbox (it may compile every case)."""
    if submission not in _REWRITES:
        _REWRITES[submission] = submission.probe("ex10_fusion:rewrites")["answers"]
    return _REWRITES[submission]


REWRITE_DISAGREES = "at least one rewrite answer disagrees with the optimized module the installed JAX produces"
REWRITE_ADVICE = ("compile every case on its input at a few shapes, print the optimized HLO (every computation, "
                  "fused ones included) and apply the case's rule from the stub; a course text's list of rewrites "
                  "is not evidence, and float and integer inputs can be treated differently")


def judge_rewrite(got, truth: bool, key: str) -> None:
    """The learner's answer for ``key`` against ``truth``.  The learner-facing text of a wrong
    answer does not name the key: with yes/no answers that would be the answer."""
    if not isinstance(got, dict) or key not in got:
        raise CheckFailed(f"rewrites() has no answer for {key!r}",
                          measured=type(got).__name__ if not isinstance(got, dict) else f"keys {sorted(got)[:14]}",
                          expected=f"a dict with the key {key!r}", hint="use exactly the keys of CASES in the stub",
                          diagnosis=f"rewrites() has no key {key!r}", advice="use exactly the keys the stub lists")
    answer = got[key]
    if type(answer) is not bool:
        raise CheckFailed(f"rewrites()[{key!r}] should be True or False", measured=type(answer).__name__,
                          expected="bool", hint="True when the optimized module shows the rewrite applied",
                          diagnosis=f"rewrites()[{key!r}] is not a bool", advice="answer True or False")
    if answer != truth:
        raise CheckFailed(
            f"rewrites()[{key!r}] disagrees with what XLA does here",
            measured=f"your answer: {answer}", expected=f"{truth} (by the rule the stub gives for this case)",
            hint=f"compile {CASES[key][0]} and read the whole optimized module, fused computations included",
            diagnosis=REWRITE_DISAGREES, advice=REWRITE_ADVICE)

"""Exercise 9's truth: the structure readers (``grader.xla_structure``) against jaxlib's
own bindings and against the reference solution's text parsers, on real modules of several
shapes and dtypes; the stub's copies of what the grader traces; the JAX facts the
statement teaches.  Everything here compiles small functions with the installed JAX."""

from __future__ import annotations

import ast
import importlib.util
import math
from collections import Counter
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from grader import xla_structure as xs
from grader.exercises.ex09_lowering import judges as ex09

REPO = Path(__file__).resolve().parents[1]


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SOLUTION = _load(REPO / "solutions" / "09_lowering_and_export" / "lowering.py", "ex09_solution")
STUB = REPO / "exercises" / "09_lowering_and_export" / "lowering.py"


@jax.jit
def _helper(v):
    return jnp.sin(v) * 2.0


def _many_forms(x, w):
    """Every printed form the exercise's hidden functions meet, in one function."""
    v = jnp.where(x > 0, x, 0.1 * x) @ w
    v = v - jnp.sum(v, axis=-1, keepdims=True)                    # short-form reduce
    v = v + jnp.argmax(v, axis=0, keepdims=True).astype(v.dtype)  # reducer-form reduce
    v = _helper(v) + _helper(v + 1.0)                             # private function, called twice
    v = lax.cond(jnp.max(v) > 0, jnp.sin, jnp.cos, v)             # case with regions
    v = lax.fori_loop(0, 3, lambda i, u: u * 1.5, v)              # while with cond/do regions
    v = jnp.sort(lax.erf(v), axis=-1)                             # chlo op, sort comparator
    return v, jnp.sum(v)


FUNCTIONS = [
    (_many_forms, [((4, 3), jnp.float32), ((3, 5), jnp.float32)]),
    (_many_forms, [((16, 32), jnp.float32), ((32, 32), jnp.float32)]),
    (_many_forms, [((8, 8), jnp.bfloat16), ((8, 8), jnp.bfloat16)]),
    (lambda x: (jnp.tanh(x) * 2.0 + 1.0, x.astype(jnp.int32) // 3), [((7,), jnp.float32)]),
    (SOLUTION.gelu, [((4, 8), jnp.float32)]),
]


def _lowered(fn, specs):
    return jax.jit(fn).lower(*[jax.ShapeDtypeStruct(s, d) for s, d in specs])


# HloOpcode enum names whose text spelling is not their kebab-case form.
ENUM_SPELLING = {"sin": "sine", "cos": "cosine", "exp": "exponential", "expm1": "exponential-minus-one",
                 "log1p": "log-plus-one", "population-count": "popcnt", "clz": "count-leading-zeros",
                 "optimization-barrier": "opt-barrier"}


def _bindings(hlo_module) -> Counter:
    """(computation, instruction, opcode) from jaxlib's HloModule bindings; the opcode enum
    (HloOpcode.kGetTupleElement) spelled as the proto spells it (get-tuple-element)."""
    out = Counter()
    for comp in hlo_module.computations():
        for inst in comp.instructions():
            camel = str(inst.opcode).split(".")[-1][1:]
            kebab = "".join("-" + c.lower() if c.isupper() else c for c in camel).lstrip("-")
            out[(comp.name, inst.name, ENUM_SPELLING.get(kebab, kebab))] += 1
    return out


def _mine(module: xs.Module) -> Counter:
    return Counter((c.name, i.name, i.opcode) for c in module.computations for i in c.instructions)


@pytest.mark.parametrize("case", range(len(FUNCTIONS)))
def test_proto_reader_agrees_with_jaxlib_bindings(case):
    fn, specs = FUNCTIONS[case]
    lowered = _lowered(fn, specs)
    compiled = lowered.compile()
    assert _mine(xs.hlo_module(lowered)) == _bindings(lowered.compiler_ir("hlo").get_hlo_module())
    optimized = xs.optimized_module(compiled)
    assert _mine(optimized) == _bindings(compiled.runtime_executable().hlo_modules()[0])
    assert optimized.entry().name in compiled.as_text().split("ENTRY", 1)[1].split("(", 1)[0]


@pytest.mark.parametrize("case", range(len(FUNCTIONS)))
def test_structure_and_reference_text_parsers_agree(case):
    """Two independent routes -- the module's structure and the reference solution's text
    parsers -- give the same counts at every stage, on real text."""
    fn, specs = FUNCTIONS[case]
    lowered = _lowered(fn, specs)
    assert xs.stablehlo_op_counts(lowered) == SOLUTION.stablehlo_counts(lowered.as_text())
    comps, _ = SOLUTION.hlo_computations(lowered.as_text("hlo"))
    assert xs.hlo_module(lowered).opcode_counts() == dict(Counter(op for ops in comps.values() for op in ops))
    comps, entry = SOLUTION.hlo_computations(lowered.compile().as_text())
    assert xs.optimized_module(lowered.compile()).opcode_counts(entry_only=True) == dict(Counter(comps[entry]))


def test_stablehlo_walk_counts_hidden_bodies_once_where_written():
    counts = xs.stablehlo_op_counts(_lowered(_many_forms, FUNCTIONS[0][1]))
    text = _lowered(_many_forms, FUNCTIONS[0][1]).as_text()
    assert " applies stablehlo.add " in text  # the short form hides a body...
    assert counts["stablehlo.return"] > text.count("stablehlo.return")  # ...whose return the walk counts
    assert counts["stablehlo.sine"] == text.count("stablehlo.sine")  # the helper called twice: written once
    assert counts["chlo.erf"] == 1 and not any(n.startswith(("func.", "sdy.")) for n in counts)


def test_mistake_counts_differ_from_the_truth():
    """The probe's 'usual mistake' counts are distinct, so a diagnosis can name one."""
    from grader.exercises.ex09_lowering import probes as probe

    source = ('@jax.jit\ndef h(v):\n    return jnp.sin(v)\n\n\ndef f(x, w):\n'
              '    v = h(x @ w) - jnp.sum(x @ w)\n    return lax.cond(jnp.sum(v) > 0, jnp.cos, h, v)\n')
    truth = probe.truth_stats(None, source, "f", [[[4, 3], "float32"], [[3, 3], "float32"]])
    mistakes = truth["mistakes"]
    assert mistakes["jaxpr_every_depth"] > truth["jaxpr_eqns"]
    assert mistakes["hlo_entry_only"] != truth["hlo_opcodes"]
    assert mistakes["optimized_whole_module"] != truth["optimized_entry_opcodes"]
    assert truth["optimized_entry_opcodes"]["fusion"] >= 1


def _body(fn: ast.FunctionDef) -> str:
    """The function's statements without its docstring, as ast.dump gives them."""
    body = fn.body[1:] if isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant) \
        else fn.body
    return ast.dump(ast.Module(body=body, type_ignores=[]))


def _functions(path: Path) -> dict[str, str]:
    return {n.name: _body(n) for n in ast.parse(path.read_text()).body if isinstance(n, ast.FunctionDef)}


def test_the_graders_copies_match_the_stub():
    stub = _functions(STUB)
    assert _body(ast.parse(ex09.GELU_SOURCE).body[0]) == stub["gelu"]
    public = _load(REPO / "exercises" / "09_lowering_and_export" / "test_public.py", "ex09_public")
    for name, (source, _) in public.EXAMPLES.items():
        for fn in ast.parse(source).body:
            assert _body(fn) == stub[fn.name], fn.name


def test_reference_gelu_is_the_exact_gelu():
    x = np.linspace(-6, 6, 101).astype(np.float32)
    assert np.allclose(ex09.reference_gelu(x), jax.nn.gelu(x, approximate=False), rtol=1e-5, atol=2e-6)
    assert not np.allclose(ex09.reference_gelu(x), jax.nn.gelu(x), rtol=1e-5, atol=2e-6)  # tanh form differs
    assert ex09.reference_gelu(np.array([1.0]))[0] == pytest.approx(0.5 * (1 + math.erf(1 / math.sqrt(2))))


def test_facts_the_statement_teaches():
    """Verified on the pinned JAX; a new JAX that changes one fails here, not in grading."""
    lowered = _lowered(SOLUTION.gelu, [((4, 8), jnp.float32)])
    shlo = xs.stablehlo_op_counts(lowered)
    assert "chlo.erf" in shlo and "stablehlo.erf" not in shlo
    assert "stablehlo.sqrt" in shlo                                     # sqrt(2) survives in StableHLO
    assert "sqrt" not in xs.hlo_module(lowered).opcode_counts()         # ... folded before XLA's passes
    assert lowered.as_text("hlo") == lowered.compiler_ir("hlo").as_hlo_text()
    text = lowered.compile().as_text()
    assert text.index("FileNames") < text.index("\nENTRY")             # tables come first
    assert not hasattr(jax, "xla_computation")


def test_export_facts_the_statement_teaches():
    b, = jax.export.symbolic_shape("b")
    exported = SOLUTION.export_gelu(5)
    assert str(exported.in_avals[0]) == "float32[b,5]"
    for batch in (1, 7):
        assert exported.call(np.ones((batch, 5), np.float32)).shape == (batch, 5)
    concrete = jax.export.export(jax.jit(SOLUTION.gelu))(jax.ShapeDtypeStruct((8, 5), jnp.float32))
    with pytest.raises(ValueError, match="Shape mismatch"):
        concrete.call(np.ones((3, 5), np.float32))
    with pytest.raises(ValueError, match="jit"):
        jax.export.export(SOLUTION.gelu)(jax.ShapeDtypeStruct((b, 5), jnp.float32))
    try:
        import flatbuffers  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="flatbuffers"):
            exported.serialize()
    else:
        again = jax.export.deserialize(exported.serialize())
        assert again.call(np.ones((3, 5), np.float32)).shape == (3, 5)


def test_hidden_draw_holds_every_construct_in_its_text():
    """The hidden generator's construct labels are true of the text it makes (checked on a few seeds)."""
    hidden = _load(REPO / "solutions" / "09_lowering_and_export" / "test_hidden.py", "ex09_hidden")
    for seed in range(3):
        drawn = hidden.draw_functions(np.random.default_rng(seed))
        texts = []
        for source, specs, _ in drawn:
            namespace = {"jax": jax, "jnp": jnp, "lax": lax}
            exec(compile(source, "<test>", "exec"), namespace)
            with jax.numpy_rank_promotion("allow"):  # as graded: `v * jnp.min(v, axis=0)` broadcasts a row
                texts.append(_lowered(namespace["f"], [(tuple(s), d) for s, d in specs]).as_text())
        both = "\n".join(texts)
        for marker in (" applies stablehlo.", "reducer(", "stablehlo.case", "stablehlo.while", "func.func private",
                       "chlo.erf", "stablehlo.sort", "stablehlo.dot_general", "stablehlo.custom_call"):
            assert marker in both, (seed, marker)

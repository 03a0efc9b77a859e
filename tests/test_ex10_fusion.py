"""Exercise 10's truth: fusions and unfused work read from the module's structure agree with
the reference solution's text parser on real optimized HLO (three pipelines, several shapes
and dtypes); the elementwise set, the pipelines and the rewrite rules behave as the
statement says on the installed JAX; the hidden draw meets what it claims."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from grader import xla_structure as xs
from grader.exercises.ex10_fusion import judges as ex10
from grader.exercises.ex10_fusion import probes as probe

REPO = Path(__file__).resolve().parents[1]


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SOLUTION = _load(REPO / "solutions" / "10_reading_fusion" / "fusion_reading.py", "ex10_solution")
STUB = REPO / "exercises" / "10_reading_fusion" / "fusion_reading.py"

SOURCES = {
    "mlp": ("def f(x, w, b):\n    return jax.nn.relu(x @ w + b[None, :]) * 2.0\n", [(32, 64), (64, 128), (128,)]),
    "small_dot": ("def f(x, w):\n    v = jnp.tanh(x) @ w\n    return v * v, jnp.sum(v)\n", [(3, 4), (4, 2)]),
    "softmax": ("def f(x):\n    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))\n"
                "    return e / jnp.sum(e, axis=-1, keepdims=True)\n", [(8, 16)]),
    "loop": ("def f(x):\n    v = lax.fori_loop(0, 3, lambda i, u: jnp.sin(u) * 2.0 + 1.0, x)\n"
             "    return jnp.cos(v), jnp.argmax(v, axis=-1)\n", [(5, 7)]),
    "lone": ("def f(x, y):\n    return jnp.sin(x), x * y, jnp.tanh(y) + 1.0\n", [(6, 9), (6, 9)]),
    "printing": ("def f(x):\n    jax.debug.print('{}', x)\n    return jnp.sin(x) * 2.0\n", [(4, 4)]),
}


class DirectTruth:
    """The clean worker's probes, called in this process (as ``truth.probe`` calls them there)."""

    def probe(self, name, *args):
        module, function = name.split(":")
        assert module == "ex10_fusion"
        return getattr(probe, function)(None, *args)


TRUTH = DirectTruth()


def _compile(name, dtype, pipeline):
    source, shapes = SOURCES[name]
    return ex10.compile_module(TRUTH, source, "f", [[list(s), dtype] for s in shapes], pipeline)


def _canonical(fusions):
    return sorted((f["name"], f["kind"], sorted(f["opcodes"].items())) for f in fusions)


@pytest.mark.parametrize("pipeline", sorted(ex10.PIPELINES))
@pytest.mark.parametrize("name,dtype", [("mlp", "float32"), ("small_dot", "float32"), ("softmax", "float32"),
                                        ("softmax", "bfloat16"), ("loop", "float32"), ("loop", "bfloat16"),
                                        ("lone", "float16"), ("lone", "int32"), ("printing", "float32")])
def test_structure_and_reference_text_parser_agree(name, dtype, pipeline):
    if name in ("mlp", "small_dot", "softmax") and dtype == "int32":
        pytest.skip("float-only function")
    module = _compile(name, dtype, pipeline)
    assert _canonical(SOLUTION.fusions(module["text"])) == _canonical(module["fusions"])
    assert SOLUTION.unfused(module["text"]) == module["unfused"]


def test_pipelines_do_what_the_statement_says():
    default, wrapper_off, fusion_off = (_compile("lone", "float32", p)
                                        for p in ("default", "wrapper_off", "fusion_off"))
    assert default["unfused"] == {} and any(f["name"].startswith("wrapped_") for f in default["fusions"])
    assert wrapper_off["unfused"].get("sine") == 1 and wrapper_off["unfused"].get("multiply") == 1
    assert any(f["kind"] == "kLoop" for f in wrapper_off["fusions"])  # the tanh + 1 chain still fuses
    assert fusion_off["fusions"] == [] and fusion_off["unfused"]["add"] == 1
    mlp = _compile("mlp", "float32", "fusion_off")
    assert [f["kind"] for f in mlp["fusions"]] == ["kCustom"]  # dots still go to a library kernel


def test_debug_print_and_fusions_outside_entry():
    printing = _compile("printing", "float32", "default")
    entry = printing["text"][printing["text"].index("\nENTRY"):]
    assert "custom-call(" in entry  # the print survives fusion (where it is printed depends on the schedule)
    loop = _compile("loop", "float32", "default")
    assert loop["outside_entry"] and "fusion_outside_entry" in loop["labels"]
    assert "fused_computation_calls" in _compile("softmax", "float32", "default")["labels"]


def test_elementwise_set_names_real_opcodes():
    """Every elementwise instruction a fusion-off compile leaves in ENTRY is in ELEMENTWISE,
    and these spellings are the ones XLA prints."""
    def f(x, y, i):
        return (jnp.sin(x), jnp.cos(x), jnp.tan(x), jnp.tanh(x), jnp.exp(x), jnp.expm1(x), jnp.log(x),
                jnp.log1p(x), jax.nn.sigmoid(x), jnp.sqrt(x), lax.rsqrt(x), jnp.cbrt(x), lax.erf(x), jnp.abs(x),
                -x, jnp.sign(x), jnp.floor(x), jnp.ceil(x), jnp.round(x), jnp.isfinite(x), x + y, x - y, x * y,
                x / y, jnp.maximum(x, y), jnp.minimum(x, y), x ** y, jnp.arctan2(x, y), lax.rem(x, y),
                jnp.where(x > y, x, y), jnp.clip(x, 0.0, 1.0), i & 3, i | 3, i ^ 3, ~i, i << 1, i >> 1,
                lax.shift_right_logical(i, 1), lax.population_count(i), lax.clz(i), x.astype(jnp.int32))
    specs = [jax.ShapeDtypeStruct((4,), jnp.float32)] * 2 + [jax.ShapeDtypeStruct((4,), jnp.int32)]
    compiled = jax.jit(f).lower(*specs).compile(compiler_options=dict(ex10.PIPELINES["fusion_off"]))
    entry = set(xs.optimized_module(compiled).opcode_counts(entry_only=True))
    data = {"parameter", "constant", "broadcast", "tuple", "copy", "bitcast", "reshape"}
    assert entry - data <= ex10.ELEMENTWISE, sorted(entry - data - ex10.ELEMENTWISE)
    assert {"sine", "exponential-minus-one", "log-plus-one", "round-nearest-even", "popcnt",
            "count-leading-zeros", "is-finite", "clamp", "select", "compare", "convert", "shift-left",
            "shift-right-logical", "shift-right-arithmetic", "atan2", "remainder", "power", "not", "cbrt",
            "rsqrt", "erf", "tan"} <= entry


def _body(fn: ast.FunctionDef) -> str:
    """The function's statements without its docstring, as ast.dump gives them."""
    body = fn.body[1:] if isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant) \
        else fn.body
    return ast.dump(ast.Module(body=body, type_ignores=[]))


def test_the_graders_copies_match_the_stub():
    tree = ast.parse(STUB.read_text())
    stub = {n.name: _body(n) for n in tree.body if isinstance(n, ast.FunctionDef)}
    for fn in ast.parse(ex10.CASES_SOURCE).body:
        assert _body(fn) == stub[fn.name], fn.name
    assert {fn for fn, _, _ in ex10.CASES.values()} <= set(stub)
    public = _load(REPO / "exercises" / "10_reading_fusion" / "test_public.py", "ex10_public")
    for source, _ in public.EXAMPLES.values():  # the grader's copies (judges.EXAMPLES)
        for fn in ast.parse(source).body:
            assert _body(fn) == stub[fn.name], fn.name
    namespace = {}
    exec(compile(ast.Module(body=[n for n in tree.body if isinstance(n, ast.Assign)], type_ignores=[]),
                 "<stub>", "exec"), namespace)
    assert namespace["ELEMENTWISE"] == ex10.ELEMENTWISE == SOLUTION.ELEMENTWISE


# What each case does on the pinned JAX 0.10.2 (CPU).  The statement does not say it (the
# learner finds out); this records it, so that a JAX that changes one is noticed here.
APPLIED_ON_0_10_2 = {
    "x_plus_zero": True, "x_times_one": True, "x_times_zero_f32": False, "x_times_zero_i32": True,
    "x_minus_x_f32": False, "x_minus_x_i32": True, "max_of_relu": False, "transpose_twice": True,
    "reshape_twice": True, "broadcast_scalars_add": True, "dot_identity": False, "slice_of_concat": True,
    "debug_print_removed": False,
}


@pytest.mark.parametrize("key", sorted(ex10.CASES))
def test_rewrite_answer_does_not_depend_on_the_shape(key):
    answers = {ex10.rewrite_applied(TRUTH, key, shape) for shape in ([8, 16], [2, 2], [37, 5], [64, 64])}
    assert answers == {APPLIED_ON_0_10_2[key]}


def test_reference_rewrites_agree_with_the_probe():
    assert SOLUTION.rewrites() == APPLIED_ON_0_10_2


def test_hidden_draw_meets_what_it_claims():
    """The compiled modules of the hidden draw hold what the checks promise (a few seeds;
    grading re-checks this on every draw and refuses to grade one that misses)."""
    hidden = _load(REPO / "solutions" / "10_reading_fusion" / "test_hidden.py", "ex10_hidden")
    with jax.numpy_rank_promotion("allow"):  # as graded: example_mlp adds a bias row
        known = hidden.opcodes_of_examples(TRUTH)
    for seed in range(3):
        rng = np.random.default_rng(seed)
        for scenarios, required in ((hidden.FUSION_SCENARIOS, hidden.FUSION_MEASURED),
                                    (hidden.UNFUSED_SCENARIOS, hidden.UNFUSED_MEASURED)):
            labels = set()
            for source, specs, pipeline, _ in hidden.draw(rng, scenarios):
                module = ex10.compile_module(TRUTH, source, "f", specs, pipeline)
                assert _canonical(SOLUTION.fusions(module["text"])) == _canonical(module["fusions"])
                assert SOLUTION.unfused(module["text"]) == module["unfused"]
                labels |= set(module["labels"]) | hidden.outside_examples(module, known)
            assert required <= labels, (seed, sorted(required - labels))


@pytest.mark.parametrize("source", ["x / 1.0", "-(-x)", "jnp.log(jnp.exp(x))"])
def test_simplifications_the_statement_shows(source):
    fn = eval(f"lambda x: {source}", {"jnp": jnp})
    module = xs.optimized_module(jax.jit(fn).lower(jax.ShapeDtypeStruct((8, 16), jnp.float32)).compile())
    assert module.opcode_counts() == {"parameter": 1, "copy": 1}


def test_a_tiny_dot_stays_bare_and_bf16_computes_in_f32():
    small = _compile("small_dot", "float32", "default")
    assert " dot(" in small["text"][small["text"].index("\nENTRY"):]  # no kCustom fusion for a 3x4 @ 4x2
    assert all(f["kind"] == "kLoop" for f in small["fusions"])
    soft = _compile("softmax", "bfloat16", "default")
    assert any(f["opcodes"].get("convert") for f in soft["fusions"])

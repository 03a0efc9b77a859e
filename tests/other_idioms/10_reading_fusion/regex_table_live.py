"""Exercise 10 in another idiom: one regex pass builds a table of computations, collections.Counter counts, rewrites() compiles every case live at two shapes.

Exercise 10: reading fusion and simplification.
"""

import re
from collections import Counter

import jax
import jax.numpy as jnp

# The opcodes `unfused` counts: elementwise arithmetic, logic and conversions.
ELEMENTWISE = frozenset({
    "abs", "cbrt", "ceil", "count-leading-zeros", "convert", "cosine", "erf", "exponential",
    "exponential-minus-one", "floor", "imag", "is-finite", "log", "log-plus-one", "logistic", "negate", "not",
    "popcnt", "real", "round-nearest-afz", "round-nearest-even", "rsqrt", "sign", "sine", "sqrt", "tan", "tanh",
    "add", "and", "atan2", "compare", "complex", "divide", "maximum", "minimum", "multiply", "or", "power",
    "remainder", "shift-left", "shift-right-arithmetic", "shift-right-logical", "subtract", "xor",
    "clamp", "select",
})


# ---------------------------------------------------------------------------------
# Part A: read the fusions of an optimized HLO module
# ---------------------------------------------------------------------------------

# A computation header: `[ENTRY ]%name (params) -> shape {`
_HEADER = re.compile(r"^(ENTRY\s+)?%?([^\s(]+)\s*\(.*\{\s*$")
# An instruction: `[ROOT ]%name = shape opcode(operands), attributes`
_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?([^\s=]+)\s*=\s*(\(.*?\)|\S+)\s+([\w\-]+)\((.*)$")


def _parse(hlo_text):
    """{computation name: {"entry": bool, "instrs": [(name, shape, opcode, rest)]}}"""
    table = {}
    current = None
    for line in hlo_text.splitlines():
        if current is None:
            m = _HEADER.match(line.strip())
            if m:
                current = {"entry": bool(m.group(1)), "instrs": []}
                table[m.group(2)] = current
            continue
        if line.strip() == "}":
            current = None
            continue
        m = _INSTR.match(line)
        if m:
            current["instrs"].append(m.groups())
    return table


def fusions(hlo_text):
    """Every fusion instruction of the module, in any computation."""
    table = _parse(hlo_text)
    found = []
    for comp in table.values():
        for name, _shape, opcode, rest in comp["instrs"]:
            if opcode != "fusion":
                continue
            kind = re.search(r"\bkind=(\w+)", rest).group(1)
            callee = re.search(r"\bcalls=%?([\w.\-]+)", rest).group(1)
            ops = Counter(op for _, _, op, _ in table[callee]["instrs"])
            found.append({"name": name, "kind": kind, "opcodes": dict(ops)})
    return found


def unfused(hlo_text):
    """{opcode: count} of the ELEMENTWISE instructions of the ENTRY computation."""
    for comp in _parse(hlo_text).values():
        if comp["entry"]:
            return dict(Counter(op for _, _, op, _ in comp["instrs"] if op in ELEMENTWISE))
    return {}


# Two functions to read (the public checks compile them; do not change them).

def example_mlp(x, w, b):
    """x: f32[32, 64], w: f32[64, 128], b: f32[128]."""
    return jax.nn.relu(x @ w + b)


def example_softmax(x):
    """x: f32[8, 16]."""
    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    return e / jnp.sum(e, axis=-1, keepdims=True)


# ---------------------------------------------------------------------------------
# Part B: which rewrites does XLA apply here?  (do not change these functions)
# ---------------------------------------------------------------------------------

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


def _module_instrs(fn, *specs):
    text = jax.jit(fn).lower(*specs).compile().as_text()
    return [ins for comp in _parse(text).values() for ins in comp["instrs"]]


def _applied(key, rows, cols):
    f32 = jax.ShapeDtypeStruct((rows, cols), jnp.float32)
    i32 = jax.ShapeDtypeStruct((rows, cols), jnp.int32)
    scalar = jax.ShapeDtypeStruct((), jnp.float32)

    def none_left(fn, spec, *opcodes):
        return not any(op in opcodes for _, _, op, _ in _module_instrs(fn, spec))

    if key == "x_plus_zero":
        return none_left(x_plus_zero, f32, "add")
    if key == "x_times_one":
        return none_left(x_times_one, f32, "multiply")
    if key == "x_times_zero_f32":
        return none_left(x_times_zero, f32, "multiply")
    if key == "x_times_zero_i32":
        return none_left(x_times_zero, i32, "multiply")
    if key == "x_minus_x_f32":
        return none_left(x_minus_x, f32, "subtract")
    if key == "x_minus_x_i32":
        return none_left(x_minus_x, i32, "subtract")
    if key == "max_of_relu":
        return sum(op == "maximum" for _, _, op, _ in _module_instrs(max_of_relu, f32)) <= 1
    if key == "transpose_twice":
        return none_left(transpose_twice, f32, "transpose")
    if key == "reshape_twice":
        return sum(op in ("reshape", "bitcast") for _, _, op, _ in _module_instrs(reshape_twice, f32)) <= 1
    if key == "broadcast_scalars_add":
        instrs = _module_instrs(broadcast_scalars_add, scalar, scalar, f32)
        return all(shape == "f32[]" for _, shape, op, _ in instrs if op == "add")
    if key == "dot_identity":
        return none_left(dot_identity, f32, "dot")
    if key == "slice_of_concat":
        return none_left(slice_of_concat, f32, "slice", "concatenate")
    if key == "debug_print_removed":
        return none_left(with_debug_print, f32, "custom-call")
    raise KeyError(key)


KEYS = ("x_plus_zero", "x_times_one", "x_times_zero_f32", "x_times_zero_i32", "x_minus_x_f32", "x_minus_x_i32",
        "max_of_relu", "transpose_twice", "reshape_twice", "broadcast_scalars_add", "dot_identity",
        "slice_of_concat", "debug_print_removed")


def rewrites():
    """Compile every case at two shapes and report whether its rule holds (at both)."""
    return {key: all(_applied(key, r, c) for r, c in ((8, 16), (5, 3))) for key in KEYS}


if __name__ == "__main__":
    f32 = jnp.float32
    mlp = jax.jit(example_mlp).lower(jax.ShapeDtypeStruct((32, 64), f32), jax.ShapeDtypeStruct((64, 128), f32),
                                     jax.ShapeDtypeStruct((128,), f32))
    print(fusions(mlp.compile().as_text()))
    soft = jax.jit(example_softmax).lower(jax.ShapeDtypeStruct((8, 16), f32))
    for opts in ({}, {"xla_disable_hlo_passes": "fusion-wrapper"}, {"xla_disable_hlo_passes": "fusion,fusion-wrapper"}):
        t = soft.compile(compiler_options=opts).as_text()
        print(fusions(t), unfused(t))
    for shape in ((2, 2), (8, 16), (5, 3), (64, 256), (3, 7)):
        print(shape, {k: _applied(k, *shape) for k in KEYS})

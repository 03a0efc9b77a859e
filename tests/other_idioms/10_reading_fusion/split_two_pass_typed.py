"""Exercise 10 in another idiom: line-by-line str.split in two passes (bodies first, then fusion lines) with plain dict counting; rewrites typed in from compiling the cases.

Exercise 10: reading fusion and simplification.
"""

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

def _split_instruction(line):
    """'[ROOT ]%name = shape opcode(operands), attrs' -> (name, opcode)."""
    left, right = line.strip().split(" = ", 1)
    name = left.split()[-1].lstrip("%")
    right = right.lstrip()
    if right.startswith("("):                      # a tuple shape: jump past its closing paren
        depth, end = 0, 0
        for end, ch in enumerate(right):
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth == 0:
                    break
        after_shape = right[end + 1:].lstrip()
    else:
        after_shape = right.split(" ", 1)[1].lstrip()
    return name, after_shape.split("(", 1)[0]


def _bodies(hlo_text):
    """First pass: {computation name: [instruction lines]}, plus the ENTRY's name."""
    bodies, entry = {}, None
    name = None
    for line in hlo_text.split("\n"):
        s = line.strip()
        if name is None:
            if s.endswith("{") and "->" in s and not s.startswith("HloModule"):
                words = s.split()
                if words[0] == "ENTRY":
                    name = words[1].lstrip("%")
                    entry = name
                else:
                    name = words[0].lstrip("%")
                bodies[name] = []
        elif s == "}":
            name = None
        elif " = " in s:
            bodies[name].append(s)
    return bodies, entry


def _attribute(line, key):
    value = line.split(key + "=", 1)[1]
    for stop in (",", " ", "}"):
        value = value.split(stop, 1)[0]
    return value


def fusions(hlo_text):
    """Every fusion instruction of the module, in any computation."""
    bodies, _ = _bodies(hlo_text)
    result = []
    for lines in bodies.values():                  # second pass: the fusion lines
        for line in lines:
            name, opcode = _split_instruction(line)
            if opcode != "fusion":
                continue
            callee = _attribute(line, "calls").lstrip("%")
            counts = {}
            for inner in bodies[callee]:
                _, op = _split_instruction(inner)
                counts[op] = counts.get(op, 0) + 1
            result.append({"name": name, "kind": _attribute(line, "kind"), "opcodes": counts})
    return result


def unfused(hlo_text):
    """{opcode: count} of the ELEMENTWISE instructions of the ENTRY computation."""
    bodies, entry = _bodies(hlo_text)
    counts = {}
    for line in bodies.get(entry, []):
        _, op = _split_instruction(line)
        if op in ELEMENTWISE:
            counts[op] = counts.get(op, 0) + 1
    return counts


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


def rewrites():
    """Typed in after compiling each case at (2, 2), (5, 3), (8, 16) and (64, 256) and reading the modules:
    float rules that would break inf/NaN (x*0, x-x) are not applied, integer ones are; the max of a relu
    keeps both maxima; x @ eye stays a dot; the debug print stays a custom-call."""
    return {
        "x_plus_zero": True,
        "x_times_one": True,
        "x_times_zero_f32": False,
        "x_times_zero_i32": True,
        "x_minus_x_f32": False,
        "x_minus_x_i32": True,
        "max_of_relu": False,
        "transpose_twice": True,
        "reshape_twice": True,
        "broadcast_scalars_add": True,
        "dot_identity": False,
        "slice_of_concat": True,
        "debug_print_removed": False,
    }


if __name__ == "__main__":
    f32 = jnp.float32
    mlp = jax.jit(example_mlp).lower(jax.ShapeDtypeStruct((32, 64), f32), jax.ShapeDtypeStruct((64, 128), f32),
                                     jax.ShapeDtypeStruct((128,), f32))
    print(fusions(mlp.compile().as_text()))
    soft = jax.jit(example_softmax).lower(jax.ShapeDtypeStruct((8, 16), f32))
    for opts in ({}, {"xla_disable_hlo_passes": "fusion-wrapper"}, {"xla_disable_hlo_passes": "fusion,fusion-wrapper"}):
        t = soft.compile(compiler_options=opts).as_text()
        print(fusions(t), unfused(t))

"""Exercise 10: reading fusion and simplification.

Read README.md in this folder first.  Three TODOs: `fusions` and `unfused` (part A) and
`rewrites` (part B).  Keep every name and signature; do not change ELEMENTWISE, the
example functions or the rewrite cases.  Check your work with:  grade exercise 10

Try things out with:  python fusion_reading.py   (prints the optimized HLO of the examples)
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

def fusions(hlo_text):
    """Every fusion instruction of the module `hlo_text` (what compiled.as_text() returns),
    in ANY computation (ENTRY, loop bodies, branches), as a list of dicts:

        {"name": "broadcast_maximum_fusion",        # the instruction's name, without '%'
         "kind": "kLoop",                           # what kind=... says
         "opcodes": {"parameter": 2, "add": 1, ...}}  # every instruction of the computation
                                                    # that calls=... names, parameters included
                                                    # (not the computations IT calls, such as a
                                                    # reduce's to_apply)

    In any order.  TODO
    """
    raise NotImplementedError("TODO: fusions")


def unfused(hlo_text):
    """The elementwise work left outside every fusion: {opcode: count} over the instructions
    of the ENTRY computation whose opcode is in ELEMENTWISE ({} when there is none).  TODO
    """
    raise NotImplementedError("TODO: unfused")


# Five functions to read (the public checks compile them; do not change them).

def example_mlp(x, w, b):
    """x: f32[32, 64], w: f32[64, 128], b: f32[128]."""
    return jax.nn.relu(x @ w + b)


def example_softmax(x):
    """x: f32[8, 16]."""
    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    return e / jnp.sum(e, axis=-1, keepdims=True)


def example_loop_print(x):
    """x: f32[6, 8]: fusions in a loop body (outside ENTRY), and a jax.debug.print whose
    custom-call, and the work only it reads, XLA prints after ENTRY's ROOT line."""
    v = jax.lax.fori_loop(0, 3, lambda i, u: jnp.sin(u) * 2.0 + 1.0, x)
    jax.debug.print("v: {}", jnp.cos(v) * 0.5 + 1.0)
    return v


def example_folds_away(x):
    """x: f32[4, 4]: XLA simplifies it to a copy, and prints no tables before the computations."""
    return x * 1.0


def example_argmax(x):
    """x: f32[8, 16]: an argmax, a variadic reduce: its fusion has a tuple shape ((f32[8], s32[8]))."""
    return jnp.argmax(x, axis=-1)


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
    """For each case, True if the OPTIMIZED module (lowered.compile().as_text(), every
    computation, fused ones included) shows the rewrite applied, by the case's rule.

    Compile each with jax.jit(fn).lower(*args).compile() for the input it names; x is 2-D
    with both dimensions at least 2 (the grader uses shapes of its own choosing).

    key                      function               input          applied when ...
    "x_plus_zero"            x_plus_zero            f32 x          no `add` is left
    "x_times_one"            x_times_one            f32 x          no `multiply` is left
    "x_times_zero_f32"       x_times_zero           f32 x          no `multiply` is left
    "x_times_zero_i32"       x_times_zero           int32 x        no `multiply` is left
    "x_minus_x_f32"          x_minus_x              f32 x          no `subtract` is left
    "x_minus_x_i32"          x_minus_x              int32 x        no `subtract` is left
    "max_of_relu"            max_of_relu            f32 x          at most one `maximum` is left
    "transpose_twice"        transpose_twice        f32 x          no `transpose` is left
    "reshape_twice"          reshape_twice          f32 x          at most one `reshape` or `bitcast` is left
    "broadcast_scalars_add"  broadcast_scalars_add  f32 a, b (scalars), f32 like (2-D)
                                                                   every `add` left has a scalar result (f32[])
    "dot_identity"           dot_identity           f32 x          no `dot` is left
    "slice_of_concat"        slice_of_concat        f32 x          no `slice` and no `concatenate` is left
    "debug_print_removed"    with_debug_print       f32 x          no `custom-call` is left

    Returns {key: bool} with exactly these keys.  TODO: compile, read, decide (or compute it
    here); answers are judged against what the JAX that grades you compiles.
    """
    raise NotImplementedError("TODO: rewrites")


if __name__ == "__main__":
    f32 = jnp.float32
    mlp = jax.jit(example_mlp).lower(jax.ShapeDtypeStruct((32, 64), f32), jax.ShapeDtypeStruct((64, 128), f32),
                                     jax.ShapeDtypeStruct((128,), f32))
    print(mlp.compile().as_text())
    soft = jax.jit(example_softmax).lower(jax.ShapeDtypeStruct((8, 16), f32))
    # XLA's last CPU pass wraps each elementwise op left alone into a one-op fusion; switch it off:
    print(soft.compile(compiler_options={"xla_disable_hlo_passes": "fusion-wrapper"}).as_text())
    try:
        print(fusions(mlp.compile().as_text()))
    except NotImplementedError as exc:
        print("fusions:", exc)

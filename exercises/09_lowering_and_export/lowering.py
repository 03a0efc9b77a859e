"""Exercise 9: lowering and export.

Read README.md in this folder first.  Three TODOs: `ir_stats` (part A), `export_gelu`
(part B) and `answers` (part C).  Keep every name and signature; do not change `gelu`
or the example functions.  Check your work with:  grade exercise 9

Try things out with:  python lowering.py   (prints every stage of gelu)
"""

import jax
import jax.numpy as jnp
from jax import lax


# ---------------------------------------------------------------------------------
# Part A: one function, four stages
# ---------------------------------------------------------------------------------

def ir_stats(fn, *args):
    """How big `fn` is at each stage of its trip to the CPU, for arguments `args`
    (arrays or jax.ShapeDtypeStruct: only shapes and dtypes matter).

    Returns a dict with exactly these keys:
      "jaxpr_eqns"              (int)  equations of the OUTER jaxpr of jax.make_jaxpr(fn)(*args)
                                       (an equation holding a nested jit, cond or loop counts as one)
      "stablehlo_ops"           (dict str -> int)  the operations of jax.jit(fn).lower(*args),
                                       by full name ("stablehlo.add", "chlo.erf"): every operation of
                                       the stablehlo and chlo dialects, at every depth (private
                                       functions, reduction bodies, branches, loop regions), each
                                       counted once where it is written
      "hlo_opcodes"             (dict str -> int)  every instruction of every computation of
                                       lowered.as_text("hlo"), by opcode ("add", "parameter", ...)
      "optimized_entry_opcodes" (dict str -> int)  every instruction of the ENTRY computation
                                       of lowered.compile().as_text(), by opcode ("fusion", ...)

    TODO: lower once, read each text (or walk lowered.compiler_ir("stablehlo")).
    """
    raise NotImplementedError("TODO: ir_stats")


# Three functions to try ir_stats on (the public checks use them; do not change them).

def example_small(x):
    """x: f32[4, 3]."""
    return jnp.tanh(x) * 2.0 + jnp.sum(x)


@jax.jit
def _scale(v):
    return jnp.sin(v) * 3.0


def example_nested(x, w):
    """x: f32[4, 3], w: f32[3, 3]: a nested jit called twice, a cond and a loop."""
    v = _scale(x) @ w
    v = lax.cond(jnp.max(v) > 0, jnp.cos, _scale, v)
    return lax.fori_loop(0, 3, lambda i, u: u * 0.5 + 1.0, v)


def example_side_effect(x):
    """x: f32[4, 4]: a jax.debug.print; in the optimized ENTRY its custom-call comes after ROOT."""
    v = jnp.sin(x) * 2.0
    jax.debug.print("v: {}", jnp.cos(v) + 1.0)
    return v * 3.0


# ---------------------------------------------------------------------------------
# Part B: export once, run at any batch size
# ---------------------------------------------------------------------------------

def gelu(x):
    """The exact GELU the reading questions are about (do not change it)."""
    return x * 0.5 * (1.0 + jax.lax.erf(x / jnp.sqrt(2.0)))


def export_gelu(features):
    """A jax.export.Exported of `gelu` for float32 inputs of shape (b, features), where the
    batch size b is SYMBOLIC: exported once, it must run (exported.call(x)) for every b >= 1.

    TODO: jax.export.symbolic_shape, jax.ShapeDtypeStruct, jax.export.export(jax.jit(...)).
    """
    raise NotImplementedError("TODO: export_gelu")


# ---------------------------------------------------------------------------------
# Part C: read the stages of gelu on f32[4, 8]
# ---------------------------------------------------------------------------------

def answers():
    """Your answers about `gelu` traced, lowered and compiled for one f32[4, 8] input.

    "gelu_jaxpr_eqns"          (int)  how many equations its jaxpr has
    "gelu_stablehlo_ops"       (int)  how many stablehlo/chlo operations its lowered module has
                                      (the total of what ir_stats counts in "stablehlo_ops")
    "erf_in_stablehlo"         (str)  the full name (dialect.op) of the operation erf becomes there
    "stages_with_sqrt"         (list of str)  which of "stablehlo", "hlo" (lowered.as_text("hlo"))
                                      and "optimized_hlo" (compile().as_text(), fused computations
                                      included) still take a square root
    "erf_operand_in_optimized" (str)  in the optimized HLO, the opcode of the instruction whose
                                      result erf takes as its operand
    "optimized_fusion_kinds"   (list of str)  the kind (kLoop, kCustom, ...) of each fusion
                                      instruction in the optimized ENTRY computation

    TODO: replace the raise with `return {...}`.  Hard-code what you read or compute it here;
    either way it is judged against what the JAX installed where you are graded produces.
    """
    raise NotImplementedError("TODO: answers")


if __name__ == "__main__":
    x = jnp.ones((4, 8))
    lowered = jax.jit(gelu).lower(x)
    print(jax.make_jaxpr(gelu)(x))
    print(lowered.as_text())              # StableHLO
    print(lowered.as_text("hlo"))         # HLO, before XLA's passes
    print(lowered.compile().as_text())    # optimized HLO
    try:
        print(ir_stats(example_nested, jnp.ones((4, 3)), jnp.ones((3, 3))))
    except NotImplementedError as exc:
        print("ir_stats:", exc)

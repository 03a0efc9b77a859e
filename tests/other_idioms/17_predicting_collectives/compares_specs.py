"""Exercise 17: predicting the collectives of a sharded MLP, and FSDP.

Read README.md in this folder first.  Fill in every TODO; keep the names and signatures.
Check your work with:  grade exercise 17
Try it yourself on 8 simulated CPU devices:  python collectives.py
"""

import re

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

#: The sizes every prediction is about: x f32[B, D], w1 f32[D, H], w2 f32[H, O].
SIZES = {"B": 16, "D": 8, "H": 32, "O": 8}
_OPCODE = re.compile(r"\s(all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute)(?:-start)?\(")


def mlp(x, w1, w2):
    """The model of exercise 4: relu(x @ w1) @ w2.  Given; nothing to change here."""
    return jax.nn.relu(x @ w1) @ w2


def collectives_of(specs: dict) -> dict:
    """Given, to test your rules with (not graded, and not for predict_collectives): compile
    `mlp` at SIZES on the 2x4 ("data", "model") mesh with inputs laid out by `specs` and count
    the collective opcodes of the ENTRY computation of the optimized HLO.  Needs 8 devices."""
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"))
    shapes = {"x": (SIZES["B"], SIZES["D"]), "w1": (SIZES["D"], SIZES["H"]), "w2": (SIZES["H"], SIZES["O"])}
    args = [jax.ShapeDtypeStruct(shapes[n], np.float32, sharding=NamedSharding(mesh, specs[n])) for n in shapes]
    text = jax.jit(mlp).lower(*args).compile().as_text()
    entry = text[text.index("\nENTRY"):]
    counts: dict = {}
    for m in _OPCODE.finditer(entry):
        counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    return counts
# The layouts compared as PartitionSpecs, the way the statement writes them.
REPLICATED, BY_COLUMNS, BY_ROWS = P(None, None), P(None, "model"), P("model", None)
FEATURES_SPLIT = P("data", "model")


def predict_collectives(specs):
    """First matmul, then second: which side of each contraction is split over 'model'?"""
    x, w1, w2 = specs["x"], specs["w1"], specs["w2"]
    found = []
    if x == FEATURES_SPLIT:
        if w1 == BY_ROWS:
            found.append("all-reduce")    # both sides of x @ w1 split: partial sums before relu
            hidden_split = False
        else:
            found.append("all-gather")    # x's features gathered
            hidden_split = w1 == BY_COLUMNS
    elif w1 == BY_ROWS and w2 == BY_ROWS:
        found.append("all-to-all")        # w2's split of the hidden units moves w1's split to its columns
        hidden_split = True
    elif w1 == BY_ROWS:
        found.append("all-gather")        # w1 gathered: fewer bytes than all-reducing h
        hidden_split = False
    else:
        hidden_split = w1 == BY_COLUMNS
    if hidden_split and w2 == BY_COLUMNS:
        found.append("all-gather")        # 'model' cannot split both h's units and y's columns
    elif hidden_split or w2 == BY_ROWS:
        found.append("all-reduce")
    return {op: found.count(op) for op in found}


def fsdp_specs():
    return {"x": P("data", None), "w1": P("data", None), "w2": P(None, "data")}


def fsdp_mlp(mesh, x, w1, w2):
    everywhere = NamedSharding(mesh, P(None, None))
    h = jax.nn.relu(x @ jax.lax.with_sharding_constraint(w1, everywhere))
    return h @ jax.lax.with_sharding_constraint(w2, everywhere)

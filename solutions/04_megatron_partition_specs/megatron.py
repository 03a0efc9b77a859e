"""Reference solution for exercise 4: a Megatron-style tensor-parallel MLP, from three PartitionSpecs.

Read README.md in this folder first.  Fill in every TODO; keep the names and
signatures.  Check your work with:  grade exercise 4

The grader builds the mesh and passes it to you (the same way, whatever its shape):

    mesh = Mesh(np.array(jax.devices()).reshape(d, m), ("data", "model"))

Its axes are Auto axes: you say how the inputs are laid out; JAX's sharding propagation
(Shardy) works out where every intermediate value lives, and XLA's SPMD partitioner
inserts the collectives that layout needs.
Try it yourself on 8 simulated CPU devices:  python megatron.py
"""

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P


def partition_specs() -> dict:
    """How each input is laid out over the mesh axes "data" and "model".

    Return {"x": P(...), "w1": P(...), "w2": P(...)} for
      x:  f32[B, D]  the batch           -> data parallel over "data"
      w1: f32[D, H]  first layer         -> column parallel over "model"
      w2: f32[H, O]  second layer        -> row parallel over "model"
    so that relu(x @ w1) @ w2 needs one all-reduce and nothing else, and the output
    f32[B, O] comes out split over "data" and whole (replicated) across "model".
    """
    return {
        "x": P("data", None),   # rows (examples) split over "data"; features whole
        "w1": P(None, "model"),  # columns (hidden units) split over "model": column parallel
        "w2": P("model", None),  # rows (the same hidden units) split over "model": row parallel
    }


def shard_inputs(mesh: Mesh, x, w1, w2):
    """Place x, w1, w2 on `mesh` with the layouts of `partition_specs()`.

    x, w1, w2 arrive as NumPy arrays on the host.  Return (x, w1, w2) as jax.Arrays
    spread over the devices of `mesh` -- the mesh you are given, whatever its shape.
    """
    specs = partition_specs()
    return tuple(jax.device_put(a, NamedSharding(mesh, specs[name]))
                 for name, a in (("x", x), ("w1", w1), ("w2", w2)))


@jax.jit
def mlp(x, w1, w2):
    """The model: relu(x @ w1) @ w2.  Given; nothing to change here.

    No sharding appears in it: the layouts of its inputs decide how it runs.
    """
    return jax.nn.relu(x @ w1) @ w2


if __name__ == "__main__":
    # A quick look at what XLA made of your layout, on 8 simulated CPU devices.
    jax.config.update("jax_num_cpu_devices", 8)  # only works before JAX first runs anything
    rng = np.random.default_rng(0)
    x = rng.normal(size=(16, 8)).astype(np.float32)
    w1 = rng.normal(size=(8, 32)).astype(np.float32)
    w2 = rng.normal(size=(32, 8)).astype(np.float32)
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
    xs, w1s, w2s = shard_inputs(mesh, x, w1, w2)
    compiled = mlp.lower(xs, w1s, w2s).compile()
    print("input shardings: ", compiled.input_shardings[0])
    print("output sharding: ", compiled.output_shardings)
    print("argument bytes per device:", compiled.memory_analysis().argument_size_in_bytes)
    hlo = compiled.as_text()
    print(hlo[hlo.index("\nENTRY"):])

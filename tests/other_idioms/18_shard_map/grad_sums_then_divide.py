"""Exercise 18: shard_map, collectives by hand.

Read README.md in this folder first.  Fill in every TODO; keep the names and signatures.
Check your work with:  grade exercise 18
Try it yourself on 8 simulated CPU devices:  python by_hand.py
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P


def loss_fn(params: dict, x, y):
    """Mean squared error of exercise 4's MLP, relu(x @ w1) @ w2.  Given; nothing to change here."""
    pred = jax.nn.relu(x @ params["w1"]) @ params["w2"]
    return jnp.mean((pred - y) ** 2)


def _local_mlp(xb, w1b, w2b):
    return jax.lax.psum(jax.nn.relu(xb @ w1b) @ w2b, "model")


def megatron_mlp(mesh, x, w1, w2):
    specs = dict(x=P("data", None), w1=P(None, "model"), w2=P("model", None))
    mapped = jax.shard_map(_local_mlp, mesh=mesh, in_specs=(specs["x"], specs["w1"], specs["w2"]),
                           out_specs=P("data", None), check_vma=True)
    return mapped(x, w1, w2)


def ring_allreduce(x):
    size = jax.lax.axis_size("model")
    ring = [(src, (src + 1) % size) for src in range(size)]
    acc, msg = x, x
    step = 0
    while step < size - 1:
        msg = jax.lax.ppermute(msg, axis_name="model", perm=ring)
        acc = acc + msg
        step += 1
    return acc


def data_parallel_grads(mesh, params, x, y):
    # grad of the invariant params already sums the devices' gradients (check_vma inserts pvary,
    # whose transpose is psum): divide by the number of devices instead of averaging again
    def per_device(params, xb, yb):
        d = jax.lax.axis_size("data")
        grads = jax.grad(loss_fn)(params, xb, yb)
        grads = jax.tree.map(lambda g: g / d, grads)
        return jax.lax.pmean(loss_fn(params, xb, yb), "data"), grads

    return jax.jit(jax.shard_map(per_device, mesh=mesh, in_specs=(P(), P("data", None), P("data", None)),
                                 out_specs=(P(), P())))(params, x, y)

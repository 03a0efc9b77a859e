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


from functools import partial


def megatron_mlp(mesh, x, w1, w2):
    @partial(jax.shard_map, mesh=mesh, in_specs=(P("data"), P(None, "model"), P("model")), out_specs=P("data"))
    def tensor_parallel(xb, w1b, w2b):
        hidden = jnp.maximum(jnp.dot(xb, w1b), 0.0)
        return jax.lax.psum(jnp.dot(hidden, w2b), axis_name="model")

    return tensor_parallel(x, w1, w2)


def ring_allreduce(x):
    # the ring the other way round: every step takes the right neighbour's block
    m = jax.lax.axis_size("model")
    to_previous = [(j, (j - 1) % m) for j in range(m)]
    blocks = [x]
    while len(blocks) < m:
        blocks.append(jax.lax.ppermute(blocks[-1], "model", perm=to_previous))
    return sum(blocks[1:], blocks[0])


def data_parallel_grads(mesh, params, x, y):
    def per_device(params, xb, yb):
        # make the replicated params varying first: grad then stays per device, and pmean averages it
        local = jax.lax.pcast(params, "data", to="varying")
        loss, grads = jax.value_and_grad(loss_fn)(local, xb, yb)
        return jax.lax.pmean(loss, "data"), jax.lax.pmean(grads, "data")

    return jax.shard_map(per_device, mesh=mesh, in_specs=(P(), P("data"), P("data")), out_specs=(P(), P()))(params, x, y)

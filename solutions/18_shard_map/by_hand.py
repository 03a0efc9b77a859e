"""Reference solution for exercise 18: shard_map, collectives by hand.

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


def megatron_mlp(mesh: Mesh, x, w1, w2):
    """relu(x @ w1) @ w2 for x P("data", None), w1 P(None, "model"), w2 P("model", None), written
    per device with jax.shard_map: each device's partial product, summed over "model" by psum."""

    def per_device(x_block, w1_block, w2_block):
        partial = jax.nn.relu(x_block @ w1_block) @ w2_block  # this device's hidden units' share of y
        return jax.lax.psum(partial, "model")                  # one all-reduce over "model"

    return jax.shard_map(per_device, mesh=mesh, in_specs=(P("data", None), P(None, "model"), P("model", None)),
                         out_specs=P("data", None))(x, w1, w2)


def ring_allreduce(x):
    """Inside shard_map over "model": every device ends with the sum of all the devices' blocks,
    passed once around the ring, m - 1 neighbour-to-neighbour steps."""
    m = jax.lax.axis_size("model")
    to_next = [(j, (j + 1) % m) for j in range(m)]
    total = passing = x
    for _ in range(m - 1):
        passing = jax.lax.ppermute(passing, "model", to_next)  # take the left neighbour's block
        total = total + passing
    return total


def data_parallel_grads(mesh: Mesh, params: dict, x, y):
    """(loss, grads) of loss_fn on the whole batch, computed data parallel: each device takes its
    rows of x and y; the mean over "data" is taken on the loss, inside the differentiated function."""

    def per_device(params, x_block, y_block):
        return jax.value_and_grad(lambda p: jax.lax.pmean(loss_fn(p, x_block, y_block), "data"))(params)

    return jax.shard_map(per_device, mesh=mesh, in_specs=(P(), P("data", None), P("data", None)),
                         out_specs=(P(), P()))(params, x, y)


if __name__ == "__main__":
    jax.config.update("jax_num_cpu_devices", 8)  # only works before JAX first runs anything
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
    rng = np.random.default_rng(0)
    x, w1, w2, y = (rng.normal(size=s).astype(np.float32) for s in ((16, 8), (8, 32), (32, 8), (16, 8)))

    def put(a, spec):
        return jax.device_put(a, NamedSharding(mesh, spec))

    def entry(compiled):
        text = compiled.as_text()
        return text[text.index("\nENTRY"):]

    args = (put(x, P("data", None)), put(w1, P(None, "model")), put(w2, P("model", None)))
    compiled = jax.jit(lambda *a: megatron_mlp(mesh, *a)).lower(*args).compile()
    print("megatron_mlp matches:", np.allclose(compiled(*args), np.maximum(x @ w1, 0) @ w2, rtol=1e-4, atol=1e-4))
    print(entry(compiled))
    ring = jax.jit(jax.shard_map(ring_allreduce, mesh=mesh, in_specs=P("model", None), out_specs=P("model", None)))
    blocks = put(np.arange(4 * 3, dtype=np.float32).reshape(4, 3), P("model", None))
    print("ring_allreduce:", ring(blocks))
    print(entry(ring.lower(blocks).compile()))
    params = {"w1": put(w1, P()), "w2": put(w2, P())}
    loss, grads = jax.jit(lambda p, a, b: data_parallel_grads(mesh, p, a, b))(params, put(x, P("data", None)),
                                                                               put(y, P("data", None)))
    full_loss, full_grads = jax.value_and_grad(loss_fn)({"w1": w1, "w2": w2}, x, y)
    print("data_parallel_grads: loss", float(loss), "full batch", float(full_loss))

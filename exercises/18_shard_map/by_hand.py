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


def megatron_mlp(mesh: Mesh, x, w1, w2):
    """relu(x @ w1) @ w2 written per device with jax.shard_map, over `mesh`.

    x arrives P("data", None), w1 P(None, "model"), w2 P("model", None).  Return the whole y,
    laid out P("data", None).

    TODO: a per-device function computing this device's share of y, summed over "model" by an
    explicit collective; shard_map it with in_specs matching the inputs' layouts.  Leave
    check_vma at its default.
    """
    raise NotImplementedError("TODO: megatron_mlp")


def ring_allreduce(x):
    """Runs inside shard_map over "model" (the grader wraps it): x is this device's block.
    Return the sum of the blocks of all the devices along "model", on every device.

    TODO: m = jax.lax.axis_size("model"); m - 1 steps of jax.lax.ppermute to the next device
    of the ring, in a Python loop, adding what arrives.
    """
    raise NotImplementedError("TODO: ring_allreduce")


def data_parallel_grads(mesh: Mesh, params: dict, x, y):
    """(loss, grads) of loss_fn on the whole batch (x, y), computed data parallel over "data".

    params arrive replicated; x and y P("data", None).  grads is a dict like params.

    TODO: jax.shard_map a per-device function over "data"; average over "data" with
    jax.lax.pmean -- and check the gradient against jax.grad of loss_fn on the whole batch.
    """
    raise NotImplementedError("TODO: data_parallel_grads")


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

"""Reference solution for exercise 7 (the training lab, read down to the HLO)."""

import contextlib
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax

LEARNING_RATE = 0.05
CLIP_NORM = 1.0
WEIGHT_DECAY = 0.01


def forward(params, x):
    h = x
    for layer in params[:-1]:
        h = jax.nn.relu(h @ layer["w"] + layer["b"])
    return h @ params[-1]["w"] + params[-1]["b"]


def init_params(key, sizes):
    # One independent key per layer; reusing one key would give related layers.
    keys = jax.random.split(key, len(sizes) - 1)
    return [{"w": jax.random.normal(k, (n_in, n_out), jnp.float32) * np.float32(np.sqrt(2.0 / n_in)),
             "b": jnp.zeros((n_out,), jnp.float32)}
            for k, n_in, n_out in zip(keys, sizes[:-1], sizes[1:])]


def loss_fn(params, x, y):
    logits = forward(params, x)
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


def make_optimizer(lr, clip, weight_decay):
    # Clip the raw gradient first, then let AdamW (decoupled weight decay) turn it into an update.
    return optax.chain(optax.clip_by_global_norm(clip), optax.adamw(lr, weight_decay=weight_decay))


@partial(jax.jit, donate_argnums=(0, 1))
def train_step(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    updates, opt_state = make_optimizer(LEARNING_RATE, CLIP_NORM, WEIGHT_DECAY).update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


def _one_example(params, x, y):
    logits = forward(params, x)
    return -jax.nn.log_softmax(logits)[y], jnp.argmax(logits) == y


def per_example(params, x, y):
    return jax.vmap(_one_example, in_axes=(None, 0, 0))(params, x, y)


def report(params, opt_state, x, y):
    # lower() and compile() only need shapes: nothing runs, nothing donated is consumed.
    compiled = train_step.lower(params, opt_state, x, y).compile()
    cost = compiled.cost_analysis()
    text = compiled.as_text()
    entry = text[text.index("\nENTRY"):].splitlines()[1:]
    fusions = 0
    for line in entry:
        if line.strip() == "}":
            break
        if " fusion(" in line.split("=", 1)[-1]:
            fusions += 1
    return {"flops": float(cost["flops"]), "bytes_accessed": float(cost["bytes accessed"]), "fusions": fusions}


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    sizes, batch = [8, 32, 32, 4], 256
    means = rng.normal(size=(sizes[-1], sizes[0])) * 3
    y = rng.integers(0, sizes[-1], size=batch).astype(np.int32)
    x = (means[y] + rng.normal(size=(batch, sizes[0]))).astype(np.float32)
    x, y = jnp.asarray(x), jnp.asarray(y)
    params = init_params(jax.random.key(0), sizes)
    opt_state = make_optimizer(LEARNING_RATE, CLIP_NORM, WEIGHT_DECAY).init(params)
    print("report:", report(params, opt_state, x, y))
    for step in range(50):
        params, opt_state, loss = train_step(params, opt_state, x, y)
        if step % 10 == 0:
            print(f"step {step:3d}  loss {float(loss):.4f}")
    losses, correct = per_example(params, x, y)
    print(f"accuracy {float(correct.mean()):.3f}  worst example loss {float(losses.max()):.4f}")

    # Not graded: the same step run op by op (jax.disable_jit) against the compiled one.
    # (Without jit there is no donation: the old arrays stay alive.)
    for name, mode in (("eager", jax.disable_jit), ("jit", contextlib.nullcontext)):
        with mode():
            params, opt_state, _ = train_step(params, opt_state, x, y)  # warm-up: compiles under jit
            jax.block_until_ready(params)
            t0 = time.perf_counter()
            for _ in range(20):
                params, opt_state, loss = train_step(params, opt_state, x, y)
            jax.block_until_ready(params)
        print(f"{name:5s} {(time.perf_counter() - t0) / 20 * 1e3:8.2f} ms/step")

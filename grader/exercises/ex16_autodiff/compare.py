"""What ``grade compare`` measures for exercise 16 (forward and reverse mode, custom derivatives):
``SPEC``, its measurements and their fixed inputs (``grader.compare.specs`` documents the kinds and
collects every ``SPEC``).  The functions handed to ``hvp`` and ``jacobian`` are written here
(``bind``): a quartic with a dense Hessian, a wide and a tall tanh layer."""

from __future__ import annotations

import numpy as np

from grader.compare.specs import ExerciseSpec, Measurement, call, f32, seeded_rng

_QUARTIC = """
def quartic(x):
    a = jnp.arange(x.shape[0], dtype=jnp.float32) / x.shape[0]
    return 0.25 * jnp.sum(x ** 4) + 0.5 * jnp.dot(a, x) ** 2
"""

_LAYER = """
def layer(x):
    w = 0.01 * (jnp.arange({m}, dtype=jnp.float32)[:, None] - jnp.arange(x.shape[0], dtype=jnp.float32)[None, :])
    return jnp.tanh(w @ x)
"""


def _hvp_calls() -> dict:
    rng = seeded_rng(161)
    return {"kind": "jax", "target": "hvp", "bind": [{"source": _QUARTIC, "fn_name": "quartic"}],
            "calls": [call(f32(rng, 64), f32(rng, 64)) for _ in range(2)]}


def _jacobian_calls(m: int, n: int) -> dict:
    rng = seeded_rng(162 + m)
    return {"kind": "jax", "target": "jacobian", "bind": [{"source": _LAYER.format(m=m), "fn_name": "layer"}],
            "calls": [call(f32(rng, n)) for _ in range(2)]}


def _clip_calls(transform: str = "") -> dict:
    rng = seeded_rng(164)
    spec = {"kind": "jax", "target": "clip_gradient", "bind": [-1.0, 1.0],
            "calls": [call(f32(rng, 8)) for _ in range(2)]}
    if transform:
        spec.update(transform=transform, argnums=[0])
    return spec


def _softmax_calls(transform: str = "") -> dict:
    x = np.float32([[1e4, -1e4, 0.0, 9999.0], [0.5, 1.0, 2.0, -1.0]])
    spec = {"kind": "jax", "target": "softmax", "calls": [call(x), call(-x)]}
    if transform:
        spec.update(transform=transform, argnums=[0])
    return spec


SPEC = ExerciseSpec(
    "autodiff-modes",
    (Measurement("hvp", _hvp_calls), Measurement("jacobian (wide, 4 x 128)", lambda: _jacobian_calls(4, 128)),
     Measurement("jacobian (tall, 128 x 4)", lambda: _jacobian_calls(128, 4)),
     Measurement("clip_gradient", _clip_calls), Measurement("grad of clip_gradient", lambda: _clip_calls("grad")),
     Measurement("softmax", _softmax_calls), Measurement("grad of softmax", lambda: _softmax_calls("grad"))),
    note="hvp's jaxpr and flops on a 64-wide quartic (forward over reverse, reverse over reverse, or a whole "
         "Hessian), jacobian's on a wide and a tall layer (which mode), the jaxprs of clip_gradient and softmax "
         "and of their gradients (custom_vjp or autodiff)")

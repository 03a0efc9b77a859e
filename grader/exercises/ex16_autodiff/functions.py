"""The functions exercise 16 hands to the learner's ``hvp`` and ``jacobian``, by name and plain
parameters, and their exact derivatives.

``probes.build(name, params)`` makes the JAX function (in the sandbox, and in the clean worker for
the truth about costs); here are the exact derivatives in float64 NumPy, ``hessian(name, params,
x)`` and ``jacobian(name, params, x)``, for the trusted side, and the draws of parameters.  NumPy
only.  Every function closes over its parameters as constants, the way a loss closes over its
data.

Scalar functions (for ``hvp``), with their Hessians:

``quartic``    ``0.25 * sum(x ** 4) + 0.5 * (a . x) ** 2``      ``diag(3 x**2) + a a^T`` (dense)
``sine``       ``sum(c * sin(x))``                                ``diag(-c sin x)`` (diagonal)
``logsumexp``  ``logsumexp(A x)``                                 ``A^T (diag(p) - p p^T) A``, ``p = softmax(A x)`` (dense)

Vector functions ``R^n -> R^m`` (for ``jacobian``), with their Jacobians:

``tanh_layer`` ``tanh(W x + b)``                                  ``diag(1 - tanh(W x + b)**2) W``
``sin_mix``    ``s * (W @ sin(x))``                               ``diag(s) W diag(cos x)``
"""

from __future__ import annotations

import numpy as np

SCALAR = ("quartic", "sine", "logsumexp")
VECTOR = ("tanh_layer", "sin_mix")
DENSE_HESSIAN = ("quartic", "logsumexp")


def _f64(params: dict) -> dict:
    return {k: np.asarray(v, np.float64) for k, v in params.items()}


def hessian(name: str, params: dict, x) -> np.ndarray:
    p, x = _f64(params), np.asarray(x, np.float64)
    if name == "quartic":
        return np.diag(3.0 * x ** 2) + np.outer(p["a"], p["a"])
    if name == "sine":
        return np.diag(-p["c"] * np.sin(x))
    if name == "logsumexp":
        z = p["A"] @ x
        e = np.exp(z - z.max())
        q = e / e.sum()
        return p["A"].T @ (np.diag(q) - np.outer(q, q)) @ p["A"]
    raise ValueError(f"no Hessian for {name!r}")


def jacobian(name: str, params: dict, x) -> np.ndarray:
    p, x = _f64(params), np.asarray(x, np.float64)
    if name == "tanh_layer":
        t = np.tanh(p["W"] @ x + p["b"])
        return (1.0 - t ** 2)[:, None] * p["W"]
    if name == "sin_mix":
        return p["s"][:, None] * p["W"] * np.cos(x)[None, :]
    raise ValueError(f"no Jacobian for {name!r}")


def draw_params(rng, name: str, n: int, m: int | None = None) -> dict:
    """Parameters of ``name`` for inputs of size ``n`` (and ``m`` outputs), float32."""
    def normal(*shape, scale=1.0):
        return (scale * rng.normal(size=shape)).astype(np.float32)

    if name == "quartic":
        return {"a": normal(n, scale=1.0 / np.sqrt(n))}
    if name == "sine":
        return {"c": normal(n)}
    if name == "logsumexp":
        return {"A": normal(int(rng.integers(3, 7)), n, scale=1.0 / np.sqrt(n))}
    if name == "tanh_layer":
        return {"W": normal(m, n, scale=1.0 / np.sqrt(n)), "b": normal(m, scale=0.1)}
    if name == "sin_mix":
        return {"W": normal(m, n, scale=1.0 / np.sqrt(n)), "s": normal(m)}
    raise ValueError(f"unknown function {name!r}")

# verdict: right
# strategy: pretty-printed text parsing
# idea: regex over pretty_print output: every equation line is `binders = prim`
"""Exercise 6 submission (right_text_parsing__hardcoded), written from the statement alone."""

import collections
from collections import Counter, deque

import jax
import jax.numpy as jnp
from jax import lax
from jax.extend import core as jcore

import re
from collections import Counter

# an equation: one or more binders `v:type` then `=` then the primitive name
_BINDER = r"[A-Za-z_][A-Za-z0-9_']*:[A-Za-z0-9_]+\[[^\]]*\](?:\{[^}]*\})?"
_EQN = re.compile(r"(?:%s\s+)+=\s+([A-Za-z_][A-Za-z0-9_]*)" % _BINDER)
_LET = re.compile(r"^let ([A-Za-z_][A-Za-z0-9_]*) = ", re.M)
_REF_SINGLE = re.compile(r"\b(\w*jaxpr)=([A-Za-z_][A-Za-z0-9_]*)(?=[\s\]])")
_REF_TUPLE = re.compile(r"\bbranches=\(([^(){}]*)\)")


def _split_top(text):
    """Split `let NAME = {...} in` definitions from the main jaxpr by brace matching."""
    defs, i = {}, 0
    while True:
        m = _LET.match(text, i)
        if not m:
            return defs, text[i:]
        j = m.end()
        depth = 0
        for k in range(j, len(text)):
            if text[k] == "{":
                depth += 1
            elif text[k] == "}":
                depth -= 1
                if depth == 0:
                    break
        defs[m.group(1)] = text[j:k + 1]
        i = text.index(" in\n", k) + 4 if text.startswith(" in\n", k + 1) else k + 1
        while i < len(text) and text[i] in " \n":
            i += 1


def count_text(text):
    defs, main = _split_top(text)
    memo = {}

    def count(body):
        c = Counter(m.group(1) for m in _EQN.finditer(body))
        for m in _REF_SINGLE.finditer(body):
            if m.group(2) in defs:
                c.update(count_def(m.group(2)))
        for m in _REF_TUPLE.finditer(body):
            for name in m.group(1).split():
                if name in defs:
                    c.update(count_def(name))
        return c

    def count_def(name):
        if name not in memo:
            memo[name] = count(defs[name])
        return memo[name]

    return dict(count(main))


def count_primitives(closed_jaxpr):
    """Parse the pretty-printed jaxpr; shared sub-jaxprs are printed once as `let NAME = ...`
    and referenced by name, so each reference adds that definition's counts again."""
    return count_text(closed_jaxpr.pretty_print(use_color=False))


def answers():
    # read off the printed jaxprs of JAX 0.10.2
    return {
        "where_selects_with": "select_n",
        "nested_call_primitive": "jit",
        "relu_primitive": "custom_jvp_call",
        "layer_top_level_eqns": 8,
        "mixed_output_dtypes": ["int32", "float32", "float32", "float32", "bool", "int32", "int32"],
        "branchy_cond_count": 1,
        "scan_body_eqns": 3,
    }


def example_mlp(x, w1, w2):
    h = jax.nn.relu(x @ w1)
    return jnp.tanh(h @ w2)


def example_scan(xs):
    def step(carry, row):
        total, biggest = carry
        return (total + row, jnp.maximum(biggest, row)), jnp.sum(row)

    start = (jnp.zeros(3), jnp.full(3, -jnp.inf))
    (total, biggest), row_sums = lax.scan(step, start, xs)
    return total, biggest, row_sums


@jax.jit
def _unit(v):
    return v / jnp.sqrt(jnp.sum(v * v))


def example_branch(x):
    return lax.cond(jnp.sum(x) > 0, _unit, lambda v: jnp.where(v > 0, v, 0.0), x)


def clip_negative(x):
    return jnp.where(x > 0, x, 0.0)


@jax.jit
def _double(x):
    return 2.0 * x


def calls_helper(x):
    return _double(x) + 1.0


def activation(x):
    return jax.nn.relu(x)


def layer(x, w, b):
    h = x @ w + b
    for _ in range(2):
        h = jnp.tanh(h)
    return jnp.where(h > 0, h, 0.1 * h)


def mixed_types(i, x):
    return i * 2, i / 2, i + x, i * 2.0, x > 1, jnp.sum(i), i // 2


def branchy(x, use_sin):
    if use_sin:
        x = jnp.sin(x)
    x = lax.cond(jnp.sum(x) > 0, lambda v: v * 2.0, lambda v: -v, x)
    return jnp.where(x > 1.0, x, 1.0)


def running_total(xs):
    def step(total, x):
        total = total + x * x
        return total, total

    return lax.scan(step, 0.0, xs)

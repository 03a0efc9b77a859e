"""Helpers for check tests (trusted side): judging compile records with useful feedback.

A compile record is the plain dict a ``generic:count_compiles`` probe returns (see
``grader.compiles.CompileRecorder.to_plain``).  Compiles are attributed to the learner
when the compiled function's name is one the learner's file defines (``learner_names``
fixture); every other compile is incidental (``jnp.ones`` -> ``broadcast_in_dim``...).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from grader.feedback import CheckFailed

_REASON = re.compile(r"^\s*\*\s*(?P<reason>.+)$", re.MULTILINE)
_SIG_ARRAY = re.compile(r"ShapedArray\((?P<body>[^)]*)\)")


def short_signature(sig: str) -> str:
    """``(ShapedArray(float32[2,3]), ShapedArray(float32[], weak_type=True))`` -> ``f32[2,3], f32[]{weak}``."""
    def one(m):
        body = m.group("body")
        body = body.replace("float32", "f32").replace("int32", "i32").replace("float16", "f16").replace("bool", "bool")
        return body.replace(", weak_type=True", "{weak}")
    out = _SIG_ARRAY.sub(one, sig).strip()
    if out.startswith("(") and out.endswith(")"):
        out = out[1:-1].rstrip(",")
    return out


def attributed(record: dict, names: Iterable[str]) -> tuple[int, list[dict], dict[str, int]]:
    """(count, the attributed events, the incidental counts by name)."""
    names = set(names)
    events = [e for e in record["events"] if e["name"] in names]
    count = sum(n for name, n in record["by_name"].items() if name in names)
    incidental = {name: n for name, n in record["by_name"].items() if name not in names}
    return count, events, incidental


_MISS_FOR = re.compile(r"for (?P<name>\S+) defined at")
_URL = re.compile(r"\s*https?://\S+")
_WHERE = re.compile(r"\*\s*at (?:input path )?(?P<where>.+?), now (?P<rest>.*)")


def learner_misses(record: dict, names: Iterable[str] | None = None) -> list[str]:
    """Cache-miss messages about functions named in ``names`` (all of them when ``None``)."""
    names = None if names is None else set(names)
    keep = []
    for msg in record.get("cache_misses", []):
        m = _MISS_FOR.search(msg)
        if names is None or m is None or m.group("name") in names:
            keep.append(msg)
    return keep


def cache_miss_reasons(record: dict, limit: int = 3, names: Iterable[str] | None = None) -> list[str]:
    """JAX's own explanations (``jax_explain_cache_misses``) of why a call retraced."""
    reasons = []
    for msg in learner_misses(record, names):
        if "never seen function" in msg:
            continue
        found = [_URL.sub("", m.group("reason")) for m in _REASON.finditer(msg)]
        reasons.append("; ".join(found) if found else msg.strip().splitlines()[-1])
    return reasons[:limit]


def changed_arguments(messages: Iterable[str]) -> list[str]:
    """``lr (static value...)``, ``tokens (shape or dtype)``: the arguments JAX's explanations name."""
    found = []
    for msg in messages:
        for m in _WHERE.finditer(msg):
            where, rest = m.group("where"), m.group("rest")
            kw = re.fullmatch(r"\[1\]\['(?P<k>[^']+)'\]", where)
            pos = re.fullmatch(r"\[0\]\[(?P<i>\d+)\]", where)
            arg = kw.group("k") if kw else f"positional argument {pos.group('i')}" if pos else where
            kind = ("static value: every new value compiles again" if "Static(" in rest else
                    "Python scalar vs array (weak type)" if "weak_type" in rest else
                    "pytree structure" if "children" in rest or "pytree" in rest else "shape or dtype")
            item = f"{arg} ({kind})"
            if item not in found:
                found.append(item)
    return found


def explain(record: dict, names: Iterable[str]) -> str:
    """A readable account of what compiled and why, for feedback."""
    names = set(names)
    count, events, incidental = attributed(record, names)
    lines = []
    for i, e in enumerate(events, 1):
        sig = short_signature(e["signature"]) if e["signature"] else "?"
        lines.append(f"compile {i}: jit({e['name']}) with ({sig})")
    if count > len(events):
        lines.append(f"{count - len(events)} compile(s) seen only through jax.monitoring "
                     f"(the compile log was switched off while they happened)")
    reasons = cache_miss_reasons(record, names=names)
    if reasons:
        lines.append("JAX says (jax_explain_cache_misses): " + " | ".join(reasons))
    changed = changed_arguments(learner_misses(record, names))
    if changed:
        lines.append("arguments JAX names as changing between calls: " + "; ".join(changed))
    if incidental:
        lines.append("not counted (incidental): " + ", ".join(f"{k} x{v}" for k, v in sorted(incidental.items())))
    return "\n".join(lines)


def expect_compiles(record: dict, names: Iterable[str], *, at_most: int | None = None, at_least: int = 1,
                    what: str = "your function", hint: str = "") -> int:
    """The learner's code compiled between ``at_least`` and ``at_most`` times."""
    names = set(names)
    count, _, _ = attributed(record, names)
    if count < at_least:
        raise CheckFailed(
            f"no compilation of {what} was seen" if count == 0 else f"{what} compiled only {count} time(s)",
            measured=f"{count} compilation(s) of functions defined in your file\n{explain(record, names)}".rstrip(),
            expected=f"at least {at_least}",
            hint=hint or "decorate the function with @jax.jit (keep its name), and do the work inside it",
        )
    if at_most is not None and count > at_most:
        raise CheckFailed(
            f"{count} compilations of {what}; expected at most {at_most}",
            measured=explain(record, names),
            expected=f"at most {at_most} compilation(s)",
            hint=hint or "run with JAX_LOG_COMPILES=1 and JAX_EXPLAIN_CACHE_MISSES=1 to see what changes between calls",
        )
    return count

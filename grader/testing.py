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


def cache_miss_reasons(record: dict, limit: int = 3) -> list[str]:
    """JAX's own explanations (``jax_explain_cache_misses``) of why a call retraced."""
    reasons = []
    for msg in record.get("cache_misses", []):
        if "never seen function" in msg:
            continue
        found = [m.group("reason") for m in _REASON.finditer(msg)]
        reasons.append("; ".join(found) if found else msg.strip().splitlines()[-1])
    return reasons[:limit]


def explain(record: dict, names: Iterable[str]) -> str:
    """A readable account of what compiled and why, for feedback."""
    count, events, incidental = attributed(record, names)
    lines = []
    for i, e in enumerate(events, 1):
        sig = short_signature(e["signature"]) if e["signature"] else "?"
        lines.append(f"compile {i}: jit({e['name']}) with ({sig})")
    if count > len(events):
        lines.append(f"{count - len(events)} compile(s) seen only through jax.monitoring "
                     f"(the compile log was switched off while they happened)")
    reasons = cache_miss_reasons(record)
    if reasons:
        lines.append("JAX says (jax_explain_cache_misses): " + " | ".join(reasons))
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

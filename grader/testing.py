"""Helpers for check tests (trusted side): counting the learner's compilations and
explaining them.

``count_compiles(submission, target, calls)`` runs the ``generic:count_compiles`` probe
and returns ``Compiles``: the number of compilations of the learner's code -- the
worker's own meter (every compilation the request caused, read from JAX's C++ cache by
the worker's trusted thread) minus the incidental ones the probe could prove were JAX's
own (see ``grader.compiles``).  Anything unproven counts as the learner's, so a
submission that silences JAX's logs or confuses the recorder only raises its count.
``compiles_of(submission, record)`` does the same for a probe of an exercise's own that
records compilations.  ``expect_compiles`` turns a count into a verdict with feedback that
is true for the failure: "no compilation was seen: is it jitted?" is not "3 compilations,
expected at most 1".

Everything here parses text the learner's process produced (JAX's log lines, cache-miss
explanations), so it caps sizes and uses only line-anchored patterns: linear time, whatever
the learner logged.
"""

from __future__ import annotations

import dataclasses
import re

from grader.feedback import CheckFailed

MAX_MESSAGES, MAX_MESSAGE_CHARS = 50, 4000
_SIG_ARRAY = re.compile(r"ShapedArray\((?P<body>[^()]{0,300})\)")
_SHORT = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16", "int32": "i32", "int64": "i64",
          "int8": "i8", "int16": "i16", "uint8": "u8", "uint32": "u32"}


@dataclasses.dataclass(frozen=True)
class Compiles:
    """The compilations one request to the sandbox caused."""

    learner: int  # of the learner's code: total minus the incidental ones proven to be JAX's own
    total: int  # all of them (the worker's meter)
    incidental: int
    events: tuple[dict, ...] = ()  # the learner's compilations the probe saw: {"name", "signature"}
    cache_misses: tuple[str, ...] = ()  # JAX's jax_explain_cache_misses messages

    def names(self) -> list[str]:
        return sorted({e["name"] for e in self.events})


def compiles_of(submission, record: dict) -> Compiles:
    """The compilations of the request that returned ``record`` (a ``CompileRecorder``'s
    ``to_plain()``), checked against the sandbox's meter for that request."""
    total = int(submission.last_meter.get("compiles", 0))
    incidental = record.get("incidental", 0)
    if type(incidental) is not int or not 0 <= incidental <= total:  # compilations that never happened
        submission.note_violation("reported compilations that did not happen")
        incidental = 0
    events = tuple({"name": str(e.get("name", ""))[:200], "signature": str(e.get("signature", ""))[:2000]}
                   for e in record.get("events", [])[:200] if isinstance(e, dict))
    misses = tuple(str(m)[:MAX_MESSAGE_CHARS] for m in record.get("cache_misses", [])[:MAX_MESSAGES])
    return Compiles(learner=total - incidental, total=total, incidental=incidental, events=events,
                    cache_misses=misses)


def count_compiles(submission, target: str, calls: list, explain: bool = True) -> tuple[list, Compiles]:
    """Call the learner's ``target`` once per ``{"args": [...], "kwargs": {...}}``; returns
    (outputs, the compilations those calls caused)."""
    out = submission.probe("generic:count_compiles", target, calls, explain)
    return out["outputs"], compiles_of(submission, out["compiles"])


def short_signature(sig: str) -> str:
    """``(ShapedArray(float32[2,3]), ShapedArray(float32[], weak_type=True))`` -> ``f32[2,3], f32[]{weak}``."""
    sig = sig[:2000]

    def one(m):
        body = m.group("body")
        for long, short in _SHORT.items():
            body = body.replace(long + "[", short + "[")
        return body.replace(", weak_type=True", "{weak}")

    out = _SIG_ARRAY.sub(one, sig).strip()
    if out.startswith("(") and out.endswith(")"):
        out = out[1:-1].rstrip(",")
    return out


# --- JAX's explanations of cache misses -----------------------------------------------------
_MISS_FOR = re.compile(r"for (?P<name>\S{1,200}) defined at")
_URL = re.compile(r"\s*https?://\S{0,500}")
_REASON_LINE = re.compile(r"^\s*\*\s*(?P<reason>.{1,1000})$")
_WHERE_LINE = re.compile(r"^\s*\*\s*at (?:input path )?(?P<where>.{1,300}?), now (?P<rest>.{0,1000})$")


def _lines(messages) -> list[list[str]]:
    """Each message (capped) as its lines (capped)."""
    return [str(m)[:MAX_MESSAGE_CHARS].splitlines()[:40] for m in list(messages)[:MAX_MESSAGES]]


def learner_misses(compiles: Compiles, names=None) -> list[str]:
    """Cache-miss messages about functions named in ``names`` (all of them when ``None``)."""
    wanted = None if names is None else set(names)
    keep = []
    for msg in compiles.cache_misses[:MAX_MESSAGES]:
        m = _MISS_FOR.search(msg[:MAX_MESSAGE_CHARS])
        if wanted is None or m is None or m.group("name") in wanted:
            keep.append(msg)
    return keep


def cache_miss_reasons(messages, limit: int = 3) -> list[str]:
    """JAX's own explanations (``jax_explain_cache_misses``) of why a call retraced."""
    reasons = []
    for lines in _lines(messages):
        text = "\n".join(lines)
        if "never seen function" in text:
            continue
        found = [_URL.sub("", m.group("reason")) for m in map(_REASON_LINE.match, lines) if m]
        reasons.append("; ".join(found) if found else (lines[-1].strip() if lines else ""))
    return [r for r in reasons if r][:limit]


def changed_arguments(messages) -> list[str]:
    """``lr (static value...)``, ``tokens (shape or dtype)``: the arguments JAX's explanations name."""
    found: list[str] = []
    for lines in _lines(messages):
        for m in map(_WHERE_LINE.match, lines):
            if not m:
                continue
            where, rest = m.group("where"), m.group("rest")
            kw = re.fullmatch(r"\[1\]\['([^']{1,100})'\]", where)
            pos = re.fullmatch(r"\[0\]\[(\d{1,3})\]", where)
            arg = kw.group(1) if kw else f"positional argument {pos.group(1)}" if pos else where
            kind = ("static value: every new value compiles again" if "Static(" in rest else
                    "Python scalar vs array (weak type)" if "weak_type" in rest else
                    "pytree structure" if "children" in rest or "pytree" in rest else "shape or dtype")
            item = f"{arg} ({kind})"
            if item not in found:
                found.append(item)
    return found[:10]


def explain(compiles: Compiles, limit: int = 6) -> str:
    """A readable account of what compiled and why, for feedback."""
    lines = []
    for i, e in enumerate(compiles.events[:limit], 1):
        sig = short_signature(e["signature"]) if e["signature"] else "?"
        lines.append(f"compile {i}: jit({e['name']}) with ({sig})")
    if len(compiles.events) > limit:
        lines.append(f"... and {len(compiles.events) - limit} more")
    unseen = compiles.learner - len(compiles.events)
    if unseen > 0:
        lines.append(f"{unseen} compilation(s) the grader could not trace to JAX's own code (counted as yours)")
    misses = learner_misses(compiles, compiles.names() or None)
    reasons = cache_miss_reasons(misses)
    if reasons:
        lines.append("JAX says (jax_explain_cache_misses): " + " | ".join(reasons))
    changed = changed_arguments(misses)
    if changed:
        lines.append("arguments JAX names as changing between calls: " + "; ".join(changed))
    if compiles.incidental:
        lines.append(f"not counted: {compiles.incidental} compilation(s) of JAX's own helpers")
    return "\n".join(lines)


def expect_compiles(compiles: Compiles, *, at_most: int | None = None, at_least: int = 1,
                    what: str = "your function", hint: str = "", advice: str = "") -> int:
    """The learner's code compiled between ``at_least`` and ``at_most`` times.

    A failure says which way it went: none at all (is it jitted?), too few, or too many;
    ``diagnosis`` and ``advice`` carry only counts, so a hidden check may show them."""
    __tracebackhide__ = True
    count = compiles.learner
    if count < at_least:
        if count == 0:
            message, diagnosis = (f"no compilation of {what} was seen",
                                  f"0 compilations of {what}: is the function jitted, and is the work done inside it?")
        else:
            message = diagnosis = f"{what} compiled only {count} time(s); expected at least {at_least}"
        raise CheckFailed(
            message, measured=f"{count} compilation(s) of code in your file\n{explain(compiles)}".rstrip(),
            expected=f"at least {at_least}", diagnosis=diagnosis,
            hint=hint or "decorate the function with @jax.jit, and do the work inside it",
            advice=advice or "decorate the function with @jax.jit, and do the work inside it",
        )
    if at_most is not None and count > at_most:
        message = f"{count} compilations of {what}; expected at most {at_most}"
        raise CheckFailed(
            message, measured=explain(compiles), expected=f"at most {at_most} compilation(s)", diagnosis=message,
            hint=hint or "run with JAX_LOG_COMPILES=1 and JAX_EXPLAIN_CACHE_MISSES=1 to see what changes between calls",
            advice=advice or "run your own calls with JAX_LOG_COMPILES=1 and JAX_EXPLAIN_CACHE_MISSES=1: each "
                             "compilation after the first says which argument changed",
        )
    return count

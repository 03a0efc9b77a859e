"""Helpers for check tests (trusted side): counting compilations, judging the count, and
explaining it.

The verdict rests on totals.  Every answer of a sandbox carries the number of XLA
compilations its request caused, read from JAX's C++ caches by the worker's trusted
thread (``grader.sandbox.meter``): nothing in the learner's process can lower it.  A
check sends the same request, at the same time, to the **reference solution** in a
sandbox of the same kind (the ``reference`` fixture): its total is what an honest
solution costs for exactly those calls, incidental compilations included
(``jnp.zeros`` -> ``broadcast_in_dim``, optimizer helpers).  The learner's total may not
exceed it.  The measured blocks are designed so the reference makes exactly the number
the statement promises (inputs on device first, one-time work outside the block, each
signature repeated, the graded function alone); ``budget`` turns any drift of the live
JAX from that design into a grader error rather than into slack.

Who compiled what -- the in-process recorder's attribution (``grader.compiles``: where
the traced code comes from, which learner code can forge) -- is for **feedback** only:
"3 look like your function `train_step`", with JAX's own cache-miss explanations.  Only
where no reference solution is available (a learner's copy: public checks, 0 points)
does the attributed count decide, and the message says so.

``count_compiles(submission, reference, target, calls)`` calls a learner function with
the ``generic:count_compiles`` probe; ``probe_compiles(submission, reference, probe,
...)`` runs an exercise's own probe whose answer holds a recorder's record under
``"compiles"``.  ``expect_compiles`` turns ``Compiles`` into a verdict whose feedback is
true for the failure.

Everything here parses text the learner's process produced (JAX's log lines, cache-miss
explanations), so it caps sizes and uses only line-anchored patterns: linear time, whatever
the learner logged.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from grader.feedback import CheckFailed
from grader.sandbox.client import SubmissionError

MAX_MESSAGES, MAX_MESSAGE_CHARS = 50, 4000
MAX_PRIMITIVES = 1000  # distinct primitive names read from a record
_SIG_ARRAY = re.compile(r"ShapedArray\((?P<body>[^()]{0,300})\)")
_SHORT = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16", "int32": "i32", "int64": "i64",
          "int8": "i8", "int16": "i16", "uint8": "u8", "uint32": "u32"}
NO_REFERENCE = ("no reference solution here (public checks only): counted as the compilations not traced to "
                "JAX's own code")


class ReferenceMismatch(RuntimeError):
    """The reference solution's total is not what the check was designed around: the live
    JAX compiles differently, and judging by it would leave slack (a grader error)."""


@dataclasses.dataclass(frozen=True)
class Compiles:
    """The compilations one request caused, and what an honest solution costs for it."""

    total: int  # every compilation of the request: the worker's meter (JAX's C++ caches, trusted thread)
    reference: int | None  # the reference solution's total for the same request; None: not available here
    attributed: int  # total minus what the recorder proved JAX's own (feedback; decides only without a reference)
    incidental: int = 0
    events: tuple[dict, ...] = ()  # the compilations the recorder attributed to the learner: {"name", "signature"}
    cache_misses: tuple[str, ...] = ()  # JAX's jax_explain_cache_misses messages
    #: primitive counts of the programs lowered and compiled during the request (the count
    #: floor, ``grader.traced_work.expect_compiled_work``), and how many programs they come
    #: from / could not be read (their jaxpr was gone when the request ended)
    primitives: dict = dataclasses.field(default_factory=dict)
    programs_read: int = 0
    programs_unread: int = 0
    #: elements those programs compute (``grader.ir.elements_computed``), and the reference
    #: solution's for the same request (None: not available here)
    work: int = 0
    reference_work: int | None = None

    @property
    def counted(self) -> int:
        """What a verdict counts: the total, or, without a reference, the attributed count."""
        return self.total if self.reference is not None else self.attributed

    def names(self) -> list[str]:
        return sorted({e["name"] for e in self.events})


def _work_of(record) -> int:
    work = record.get("work", 0) if isinstance(record, dict) else 0
    return work if type(work) is int and work >= 0 else 0


def compiles_of(submission, record: dict, reference_total: int | None = None,
                reference_record: dict | None = None) -> Compiles:
    """The compilations of the request that returned ``record`` (a ``CompileRecorder``'s
    ``to_plain()``): its total is the sandbox's meter for that request (read now);
    ``reference_total`` the reference solution's for the same request, and
    ``reference_record`` its recorder's record."""
    total = int(submission.last_meter.get("compiles", 0))
    incidental = record.get("incidental", 0) if isinstance(record, dict) else 0
    if type(incidental) is not int or not 0 <= incidental <= total:
        # more of JAX's own compilations than happened: the record proves nothing, so every
        # compilation counts as the learner's (the strictest count; not an accusation -- the
        # record is the grader's, and which code made it wrong is not known)
        incidental = 0
    record = record if isinstance(record, dict) else {}
    events = tuple({"name": str(e.get("name", ""))[:200], "signature": str(e.get("signature", ""))[:2000]}
                   for e in list(record.get("events", []))[:200] if isinstance(e, dict))
    misses = tuple(str(m)[:MAX_MESSAGE_CHARS] for m in list(record.get("cache_misses", []))[:MAX_MESSAGES])
    raw = record.get("primitives", {})
    primitives = {str(k)[:100]: v for k, v in list(raw.items())[:MAX_PRIMITIVES]
                  if type(v) is int and v > 0} if isinstance(raw, dict) else {}
    programs = record.get("programs", {}) if isinstance(record.get("programs"), dict) else {}
    read, unread = (n if type(n := programs.get(k, 0)) is int and n >= 0 else 0 for k in ("read", "unread"))
    return Compiles(total=total, reference=reference_total, attributed=total - incidental, incidental=incidental,
                    events=events, cache_misses=misses, primitives=primitives, programs_read=read,
                    programs_unread=unread, work=_work_of(record),
                    reference_work=_work_of(reference_record) if isinstance(reference_record, dict) else None)


def probe_pair(submission, reference, probe: str, *args: Any, **kwargs: Any) -> Any:
    """Run ``probe`` in the learner's sandbox and the same request in the reference
    solution's (``reference`` may be None), at the same time: wall time is the slower of
    the two, not their sum.  Returns the learner's answer; ``submission.last_meter`` and
    ``reference.last_meter`` then hold each one's meter.  The learner's failure is raised
    as it is (the reference's answer is still read, so the next request pairs up); the
    reference's own failure is a grader error."""
    __tracebackhide__ = True
    return probe_both(submission, reference, probe, *args, **kwargs)[0]


def probe_both(submission, reference, probe: str, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
    """``probe_pair``, returning both answers: (the learner's, the reference's or None)."""
    __tracebackhide__ = True
    rid = submission.submit("probe", probe, *args, **kwargs)
    ref_rid = reference.submit("probe", probe, *args, **kwargs) if reference is not None else None
    try:
        out = submission.result(rid)
    except SubmissionError:
        if ref_rid is not None:
            try:
                reference.result(ref_rid)
            except SubmissionError:
                pass
        raise
    ref_out = None
    if ref_rid is not None:
        try:
            ref_out = reference.result(ref_rid)
        except SubmissionError as exc:
            raise RuntimeError(f"the reference solution failed on the request the learner's code got "
                               f"({probe}): {exc.message}") from None
    return out, ref_out


def probe_compiles(submission, reference, probe: str, *args: Any, **kwargs: Any) -> tuple[Any, Compiles]:
    """``probe_pair`` for a measured request: the learner's answer and its ``Compiles`` (the
    learner's total, the reference's total for the same request, and the recorder's record
    the probe returns under ``"compiles"``, for feedback)."""
    __tracebackhide__ = True
    out, ref_out = probe_both(submission, reference, probe, *args, **kwargs)
    ref_total = int(reference.last_meter.get("compiles", 0)) if reference is not None else None
    record = out.get("compiles", {}) if isinstance(out, dict) else {}
    ref_record = ref_out.get("compiles") if isinstance(ref_out, dict) else None
    return out, compiles_of(submission, record, ref_total, ref_record)


def count_compiles(submission, reference, target: str, calls: list, explain: bool = True) -> tuple[list, Compiles]:
    """Call the learner's ``target`` once per ``{"args": [...], "kwargs": {...}}`` (inputs on
    device first); returns (outputs, the compilations those calls caused), with the
    reference solution's total for the same calls."""
    out, compiles = probe_compiles(submission, reference, "generic:count_compiles", target, calls, explain)
    return out["outputs"], compiles


def budget(compiles: Compiles, at_least: int, at_most: int | None) -> tuple[int, int | None]:
    """(at least, at most) compilations for this verdict.

    With a reference: exactly its total is allowed, and it must be what the check was
    designed around (``at_least <= reference <= at_most``): otherwise the live JAX
    compiles differently from the design, and a budget taken from it would be slack or
    an impossible demand -- ``ReferenceMismatch``, a grader error.  Without one: the
    check's own numbers, judged on the attributed count."""
    if compiles.reference is None:
        return at_least, at_most
    ref = compiles.reference
    if ref < at_least or (at_most is not None and ref > at_most):
        raise ReferenceMismatch(f"the reference solution compiled {ref} time(s) for these calls; the check expects "
                                f"between {at_least} and {at_most}: the measured block no longer fits the installed JAX")
    return ref, ref


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
    """A readable account of what compiled and why, for feedback: the totals the verdict
    rests on, then what the recorder saw (which learner code can disguise: never judged)."""
    if compiles.reference is not None:
        lines = [f"{compiles.total} compilation(s) during these calls; the reference solution makes "
                 f"{compiles.reference} for the same calls"]
    else:
        lines = [f"{compiles.attributed} compilation(s) of code in your file ({NO_REFERENCE})"]
    if compiles.events:
        names = ", ".join(f"`{n}`" for n in compiles.names()[:4])
        lines.append(f"{len(compiles.events)} look like your function(s) {names}:")
    for i, e in enumerate(compiles.events[:limit], 1):
        sig = short_signature(e["signature"]) if e["signature"] else "?"
        lines.append(f"compile {i}: jit({e['name']}) with ({sig})")
    if len(compiles.events) > limit:
        lines.append(f"... and {len(compiles.events) - limit} more")
    unseen = compiles.attributed - len(compiles.events)
    if unseen > 0:
        lines.append(f"{unseen} more that the grader could not trace to JAX's own code")
    misses = learner_misses(compiles, compiles.names() or None)
    reasons = cache_miss_reasons(misses)
    if reasons:
        lines.append("JAX says (jax_explain_cache_misses): " + " | ".join(reasons))
    changed = changed_arguments(misses)
    if changed:
        lines.append("arguments JAX names as changing between calls: " + "; ".join(changed))
    if compiles.incidental:
        lines.append(f"{compiles.incidental} look like single operations run outside any jit (an eager jnp call: "
                     f"your code's, or a JAX helper's such as jnp.zeros, .astype or an optimizer's init; "
                     f"{'counted too: the reference makes its own' if compiles.reference is not None else 'not counted'})")
    return "\n".join(lines)


def expect_compiles(compiles: Compiles, *, at_most: int | None = None, at_least: int = 1,
                    what: str = "your function", hint: str = "", advice: str = "", fewer_ok: bool = False) -> int:
    """At most as many compilations as the reference solution makes for the same calls
    (which must be what the check expects: ``budget``), and at least ``at_least``; without
    a reference, the attributed count between ``at_least`` and ``at_most``.

    With a reference the count must equal its total, unless ``fewer_ok``: where the statement
    asks only for "at most" (one program serving several of the reference's cache keys is
    right), anything from ``at_least`` up to the reference's total passes -- the check then
    needs its own floor (``grader.traced_work``) against a do-nothing jit.

    A failure says which way it went: none at all (is it jitted?), too few, or too many;
    ``diagnosis`` and ``advice`` carry only counts, so a hidden check may show them."""
    __tracebackhide__ = True
    low, high = budget(compiles, at_least, at_most)
    if fewer_ok:
        low = at_least
    count = compiles.counted
    of_what = "during these calls" if compiles.reference is not None else f"of {what}"
    if count < low:
        if count == 0:
            message, diagnosis = (f"no compilation of {what} was seen",
                                  f"0 compilations of {what}: is the function jitted, and is the work done inside it?")
        else:
            message = diagnosis = f"{what} compiled only {count} time(s); expected at least {low}"
        raise CheckFailed(
            message, measured=explain(compiles), expected=f"at least {low}", diagnosis=diagnosis,
            hint=hint or "decorate the function with @jax.jit, and do the work inside it",
            advice=advice or "decorate the function with @jax.jit, and do the work inside it",
        )
    if high is not None and count > high:
        ref = (f"; the reference solution makes {high} for the same calls" if compiles.reference is not None
               else f"; expected at most {high}")
        message = f"{count} compilations {of_what}{ref}"
        raise CheckFailed(
            message, measured=explain(compiles), expected=f"at most {high} compilation(s)", diagnosis=message,
            hint=hint or "run with JAX_LOG_COMPILES=1 and JAX_EXPLAIN_CACHE_MISSES=1 to see what changes between calls",
            advice=advice or "run your own calls with JAX_LOG_COMPILES=1 and JAX_EXPLAIN_CACHE_MISSES=1: each "
                             "compilation after the first says which argument changed",
        )
    return count

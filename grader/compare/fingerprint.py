"""Structural fingerprints: what a submission's functions are made of, measured in a sandbox.

``measure`` starts one ``Sandbox`` for a learner file and sends it every measurement of
the exercise's spec (probe ``fingerprint:measure``).  A fingerprint is plain data::

    {"spec_digest": "...", "seconds": 0.4,
     "measurements": [{"name": "scan_version", "structural": true,
                       "facts": {"jaxpr": "...", "primitives": {...}, "compiles": 1, ...}}
                      | {"name": ..., "structural": ..., "failed": {"kind": "syntax_error", "message": "..."}}]}

``approach_key`` turns a fingerprint (and, for pure-Python functions, their normalised
source) into the key submissions are grouped by; ``describe`` into a short label.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from grader.compare import source_norm
from grader.compare.specs import ExerciseSpec
from grader.manifest import Exercise

#: Primitives that say how a function is built, shown in an approach's label: a primitive
#: is named by one of these or by one with a version number after it (``remat2``, the
#: checkpoint primitive of JAX 0.10), whatever the installed JAX calls it.
SHAPE_PRIMITIVES = ("while", "scan", "cond", "jit", "pjit", "custom_jvp_call", "custom_vjp_call", "remat",
                    "checkpoint", "shard_map", "pmap", "xla_pmap")


def _shape_primitives(primitives: dict[str, int]) -> list[str]:
    """The primitives of ``primitives`` that SHAPE_PRIMITIVES names, in its order."""
    return [p for base in SHAPE_PRIMITIVES for p in sorted(primitives) if p.rstrip("0123456789") == base]


def measure(ex: Exercise, spec: ExerciseSpec, module_path: Path, zygote: Any = None, *,
            course_cache: Path | None = None) -> dict[str, Any]:
    """Every measurement of ``spec`` on the learner file ``module_path``, in one sandbox
    (``course_cache``: the course's own files only, as in ``grader.compare.workers.run_all``)."""
    from grader.sandbox.client import Sandbox, SubmissionError

    t0 = time.monotonic()
    results = []
    kwargs = dict(timeout_s=ex.timeout_s, memory_mb=ex.memory_mb, cpu_devices=ex.cpu_devices)
    if zygote is not None:
        kwargs["zygote"] = zygote
    sandbox = Sandbox(module_path, course_cache=course_cache, **kwargs)
    try:
        sandbox.start()
        for m, payload in zip(spec.measurements, spec.payloads()):
            entry: dict[str, Any] = {"name": m.name, "structural": m.structural}
            try:
                entry["facts"] = sandbox.probe("fingerprint:measure", payload)
            except SubmissionError as exc:
                entry["failed"] = {"kind": exc.kind, "message": exc.message[:500]}
            results.append(entry)
    finally:
        sandbox.close()
    return {"spec_digest": spec.digest(), "seconds": round(time.monotonic() - t0, 3), "measurements": results}


def _short(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def _compile_bucket(n: Any) -> str:
    if not isinstance(n, int):
        return "?"
    return str(n) if n <= 3 else "many"


def measurement_state(entry: dict[str, Any]) -> str:
    """"ok", or what stopped the measurement: a sandbox failure kind or the first failing step."""
    if "failed" in entry:
        return entry["failed"]["kind"]
    errors = entry.get("facts", {}).get("errors", {})
    if not errors:
        return "ok"
    kinds = sorted({e if e == "not_implemented" else e.split(":")[0] for e in errors.values()})
    return "+".join(kinds)


def _structure(entry: dict[str, Any]) -> list[Any]:
    facts = entry.get("facts", {})
    part: list[Any] = [entry["name"], measurement_state(entry)]
    if not entry["structural"] or "failed" in entry:
        return part
    if "jaxpr" in facts:
        part.append(_short(facts["jaxpr"]))
    if "compiles" in facts:
        part.append(_compile_bucket(facts["compiles"]))
    if "layouts" in facts:
        part.append([[lay["shard_shape"], lay["distinct_blocks"]] for lay in facts["layouts"]])
        part.append({k: v for k, v in facts.get("collectives", {}).items() if v})
    return part


def approach_key(spec: ExerciseSpec | None, fingerprint: dict[str, Any] | None, source: str | None,
                 source_fp: source_norm.SourceFingerprint) -> str:
    """The key an approach group shares.  Without a spec: the normalised learner part."""
    if spec is None or fingerprint is None:
        if not source_fp.ok:
            return "source:" + ("missing" if source is None else "unparsable")
        return "source:" + (source_fp.digest or "unchanged-stub")
    parts: list[Any] = [_structure(e) for e in fingerprint.get("measurements", [])]
    parts += [[name, source_norm.closure_hash(source, name)] for name in spec.source_functions]
    return "fp:" + _short(json.dumps(parts, sort_keys=True, default=str))


def _primitive_words(primitives: dict[str, int]) -> str:
    shown = [f"{p}x{primitives[p]}" if primitives[p] > 1 else p for p in _shape_primitives(primitives)]
    return ", ".join(shown)


def describe_measurement(entry: dict[str, Any]) -> str:
    """One line: what a measurement found (``scan, jit x2; 16 eqns; 1 compile``)."""
    state = measurement_state(entry)
    if state != "ok" and ("failed" in entry or "jaxpr" not in entry.get("facts", {})):
        return f"{entry['name']}: {state.replace('_', ' ')}"
    facts = entry["facts"]
    bits = []
    if "primitives" in facts:
        words = _primitive_words(facts["primitives"])
        bits.append((words + "; " if words else "") + f"{facts.get('eqns', '?')} eqns")
    if "compiles" in facts:
        n = facts["compiles"]
        bits.append(f"{n} compile{'s' if n != 1 else ''}")
    if "layouts" in facts:
        coll = {k: v for k, v in facts.get("collectives", {}).items() if v}
        bits.append(", ".join(f"{k} x{v}" for k, v in coll.items()) or "no collectives")
    if state != "ok":
        bits.append(state.replace("_", " "))
    return f"{entry['name']}: " + "; ".join(bits)


def describe(spec: ExerciseSpec | None, fingerprint: dict[str, Any] | None, source: str | None,
             source_fp: source_norm.SourceFingerprint) -> str:
    """A short label for an approach group."""
    if spec is None or fingerprint is None:
        if not source_fp.ok:
            return source_fp.problem or "no source"
        return "unchanged stub" if source_fp.empty else f"normalised source {source_fp.digest[:8]}"
    entries = fingerprint.get("measurements", [])
    lines = [describe_measurement(e) for e in entries if e["structural"]]
    lines += [f"{e['name']}: {measurement_state(e).replace('_', ' ')}" for e in entries
              if not e["structural"] and measurement_state(e) != "ok"]
    lines += [f"{name}: source {source_norm.closure_hash(source, name)[:8]}" for name in spec.source_functions]
    return " | ".join(lines)


def facts_of(fingerprint: dict[str, Any] | None, name: str) -> dict[str, Any]:
    """The facts of measurement ``name`` ({} when missing or failed)."""
    for entry in (fingerprint or {}).get("measurements", []):
        if entry["name"] == name:
            return entry.get("facts", {})
    return {}

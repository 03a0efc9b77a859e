"""`grade compare`'s report as plain data: what ``--json`` prints and every view renders.

``class_report`` (``"kind": "class"``) and ``pair_report`` (``"kind": "pair"``) are pure
functions of an ``Analysis``.  ``FORMAT_VERSION`` is bumped whenever a field changes
meaning or disappears (new fields may be added without a bump).

Audience: instructors.  Learners appear only by the label the gradebook gives them.
Hidden checks' private text (what they measured) appears only when the analysis was
made with ``instructor=True`` (``--instructor``); learner-facing messages always.
Wording about similar files never accuses: "near-identical, worth a look".
"""

from __future__ import annotations

import datetime
import statistics
from collections import Counter
from typing import Any

import numpy as np

from grader import __version__
from grader.compare import diffs, grouping
from grader.compare.fingerprint import describe_measurement, measurement_state
from grader.compare.run import Analysis, jax_version
from grader.compare.source_norm import similarity

FORMAT_VERSION = 1
NEAR_IDENTICAL_WORDING = "near-identical, worth a look"
MAX_PAIRS = 500


def _header(a: Analysis, kind: str) -> dict[str, Any]:
    ex = a.exercise
    return {
        "format_version": FORMAT_VERSION,
        "kind": kind,
        "generated_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "grader_version": __version__,
        "jax_version": jax_version(),
        "instructor": a.instructor,
        "exercise": {"number": ex.number, "slug": ex.slug, "title": ex.title, "file": ex.module_file,
                     "max_score": ex.max_score,
                     "checks": [{"name": c.name, "visibility": c.visibility, "points": c.points, "summary": c.summary}
                                for c in ex.checks]},
        "spec": {"present": a.spec is not None, "note": a.spec.note if a.spec else "",
                 "measurements": [m.name for m in a.spec.measurements] if a.spec else []},
        "notes": list(a.notes),
        "stats": dict(a.stats),
    }


# --- measurements ---------------------------------------------------------------------------

def _measurement_summary(fp: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    out = {}
    for entry in (fp or {}).get("measurements", []):
        facts = entry.get("facts", {})
        out[entry["name"]] = {
            "state": measurement_state(entry), "summary": describe_measurement(entry),
            "compiles": facts.get("compiles"), "eqns": facts.get("eqns"), "flops": facts.get("flops"),
            "bytes_accessed": facts.get("bytes_accessed"), "seconds": facts.get("seconds"),
            "primitives": facts.get("primitives"),
        }
    return out


def _spread(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"min": min(values), "median": statistics.median(values), "max": max(values), "n": len(values)}


def _measure_stats(a: Analysis) -> list[dict[str, Any]]:
    if a.spec is None:
        return []
    stats = []
    for m in a.spec.measurements:
        rows = [_measurement_summary(fp).get(m.name, {}) for fp in a.fingerprints]
        ok = [r for r in rows if r.get("state") == "ok"]
        compiles = Counter(str(r["compiles"]) for r in ok if r.get("compiles") is not None)
        stats.append({
            "name": m.name, "structural": m.structural, "measured": len([r for r in rows if r]), "ok": len(ok),
            "states": dict(Counter(r["state"] for r in rows if r)),
            "compiles": dict(sorted(compiles.items(), key=lambda kv: int(kv[0]))),
            "seconds": _spread([r["seconds"] for r in ok if isinstance(r.get("seconds"), float)]),
            "eqns": _spread([r["eqns"] for r in ok if isinstance(r.get("eqns"), int)]),
            "flops": _spread([r["flops"] for r in ok if isinstance(r.get("flops"), float) and r["flops"] >= 0]),
            "seconds_by_submission": {a.solutions[i].label: r["seconds"] for i, r in enumerate(rows)
                                      if r.get("state") == "ok" and isinstance(r.get("seconds"), float)},
        })
    return stats


# --- the class ------------------------------------------------------------------------------

def _pass_rates(a: Analysis) -> list[dict[str, Any]]:
    graded = [r for r in a.results if r is not None and not r.error]
    rows = []
    for check in a.exercise.checks:
        statuses = [c.status for r in graded for c in r.checks if c.name == check.name]
        passed = sum(1 for s in statuses if s == "passed")
        rows.append({"check": check.name, "visibility": check.visibility, "points": check.points, "passed": passed,
                     "of": len(statuses), "rate": round(passed / len(statuses), 3) if statuses else None})
    return rows


def _class_view(a: Analysis) -> dict[str, Any]:
    graded = [r for r in a.results if r is not None and not r.error]
    scores = Counter(r.score for r in graded)
    return {
        "submissions": len(a.solutions), "graded": len(graded),
        "not_graded": sum(1 for r in a.results if r is None), "grader_errors": sum(1 for r in a.results if r and r.error),
        "max_score": a.exercise.max_score,
        "score_distribution": {str(k): scores[k] for k in sorted(scores)},
        "mean_score": round(statistics.mean(r.score for r in graded), 2) if graded else None,
        "full_marks": sum(1 for r in graded if r.max_score and r.score == r.max_score),
        "pass_rate": _pass_rates(a),
        "measurements": _measure_stats(a),
    }


def _outcome_groups(a: Analysis, groups: list[grouping.OutcomeGroup]) -> list[dict[str, Any]]:
    out = []
    for gid, g in enumerate(groups):
        failing = []
        for f in g.failing:
            item = {"check": f.name, "visibility": f.visibility,
                    "messages": [{"text": m.text, "count": m.count} for m in f.messages]}
            if a.instructor:
                item["private"] = [{"text": m.text, "count": m.count} for m in f.private]
            failing.append(item)
        out.append({"id": gid, "size": len(g.members), "score": g.score, "max_score": g.max_score,
                    "vector": [{"check": c, "status": s} for c, s in g.vector],
                    "members": [a.solutions[i].label for i in g.members], "failing": failing})
    return out


def _approach_groups(a: Analysis, groups: list[grouping.ApproachGroup],
                     outcome_of: dict[int, int]) -> list[dict[str, Any]]:
    out = []
    largest = groups[0] if groups else None
    for gid, g in enumerate(groups):
        rep = g.representative
        code = a.codes[rep]
        ref_diff = diffs.unified(a.reference.code, code, "reference solution", a.solutions[rep].label)
        big_diff = None
        if largest is not None and g is not largest:
            big_rep = largest.representative
            big_diff = diffs.unified(a.codes[big_rep], code, f"{a.solutions[big_rep].label} (largest group)",
                                     a.solutions[rep].label)
        out.append({
            "id": gid, "size": len(g.members), "key": g.key, "label": g.label, "is_reference": g.is_reference,
            "members": [a.solutions[i].label for i in g.members], "representative": a.solutions[rep].label,
            "representative_code": code, "facts": _measurement_summary(a.fingerprints[rep]),
            "outcomes": dict(Counter(str(outcome_of[i]) for i in g.members)),
            "scores": dict(Counter(str(a.results[i].score) for i in g.members if a.results[i] is not None)),
            "diff_vs_reference": ref_diff, "diff_vs_largest": big_diff,
        })
    return out


def _near_identical(a: Analysis) -> dict[str, Any]:
    pairs = grouping.near_identical(a.source_fps)
    ref_digest = a.reference.source_fp.digest
    clusters = []
    for members in grouping.clusters(pairs):
        clusters.append({"members": [a.solutions[i].label for i in members],
                         "matches_reference": bool(ref_digest) and all(a.source_fps[i].digest == ref_digest
                                                                       for i in members)})
    return {
        "wording": NEAR_IDENTICAL_WORDING, "threshold": grouping.NEAR_IDENTICAL, "min_tokens": grouping.MIN_TOKENS,
        "pairs": [{"a": a.solutions[p.a].label, "b": a.solutions[p.b].label, "similarity": p.similarity,
                   "diff": diffs.unified(a.codes[p.a], a.codes[p.b], a.solutions[p.a].label, a.solutions[p.b].label)}
                  for p in pairs[:MAX_PAIRS]],
        "pairs_total": len(pairs),
        "clusters": clusters,
    }


def _submission_rows(a: Analysis, outcome_of: dict[int, int], approach_of: dict[int, int]) -> list[dict[str, Any]]:
    ref_digest = a.reference.source_fp.digest
    rows = []
    for i, s in enumerate(a.solutions):
        r = s.result
        rows.append({
            "label": s.label, "score": r.score if r else None, "max_score": r.max_score if r else None,
            "error": r.error if r else "", "outcome_group": outcome_of[i], "approach_group": approach_of[i],
            "outcome_origin": s.outcome_origin, "note": s.note,
            "checks": {c.name: c.status for c in r.checks} if r else {},
            "matches_reference": bool(ref_digest) and a.source_fps[i].digest == ref_digest,
            "source_tokens": a.source_fps[i].tokens, "measurements": _measurement_summary(a.fingerprints[i]),
        })
    return rows


def class_report(a: Analysis) -> dict[str, Any]:
    """The whole class's view of the exercise (``--json``)."""
    outcome = grouping.outcome_groups(a.results, instructor=a.instructor)
    approach = grouping.approach_groups(a.keys, a.labels, a.source_fps, a.reference.key or None)
    outcome_of = {i: gid for gid, g in enumerate(outcome) for i in g.members}
    approach_of = {i: gid for gid, g in enumerate(approach) for i in g.members}
    report = _header(a, "class")
    report.update({
        "reference": {"approach_key": a.reference.key, "facts": _measurement_summary(a.reference.fingerprint),
                      "code": a.reference.code},
        "class": _class_view(a),
        "outcome_groups": _outcome_groups(a, outcome),
        "approach_groups": _approach_groups(a, approach, outcome_of),
        "near_identical": _near_identical(a),
        "submissions": _submission_rows(a, outcome_of, approach_of),
    })
    return report


# --- two solutions side by side -------------------------------------------------------------

def outputs_agree(x: Any, y: Any, rtol: float = 1e-4, atol: float = 1e-5) -> bool:
    """Whether two measured outputs are the same (arrays up to float tolerance)."""
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        try:
            ax, ay = np.asarray(x), np.asarray(y)
            if ax.shape != ay.shape:
                return False
            if ax.dtype.kind in "fc" or ay.dtype.kind in "fc":
                return bool(np.allclose(ax, ay, rtol=rtol, atol=atol, equal_nan=True))
            return bool(np.array_equal(ax, ay))
        except (TypeError, ValueError):
            return False
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(outputs_agree(x[k], y[k], rtol, atol) for k in x)
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return len(x) == len(y) and all(outputs_agree(u, v, rtol, atol) for u, v in zip(x, y))
    if isinstance(x, float) or isinstance(y, float):
        try:
            return bool(np.isclose(float(x), float(y), rtol=rtol, atol=atol, equal_nan=True))
        except (TypeError, ValueError):
            return False
    return x == y


def _side(a: Analysis, i: int) -> dict[str, Any]:
    s, r = a.solutions[i], a.solutions[i].result
    return {"label": s.label, "score": r.score if r else None, "max_score": r.max_score if r else None,
            "error": r.error if r else "", "note": s.note, "code": a.codes[i], "approach_key": a.keys[i],
            "approach": a.labels.get(a.keys[i], ""),
            "outcome": [{"check": c, "status": st} for c, st in grouping.outcome_vector(r)]}


def _primitive_delta(pa: dict[str, int] | None, pb: dict[str, int] | None) -> dict[str, list[int]]:
    pa, pb = pa or {}, pb or {}
    return {p: [pa.get(p, 0), pb.get(p, 0)] for p in sorted(set(pa) | set(pb)) if pa.get(p, 0) != pb.get(p, 0)}


def _facts_pair(a: Analysis, i: int, j: int) -> list[dict[str, Any]]:
    rows = []
    names = [m.name for m in a.spec.measurements] if a.spec else []
    for name in names:
        fa = next((e for e in (a.fingerprints[i] or {}).get("measurements", []) if e["name"] == name), {})
        fb = next((e for e in (a.fingerprints[j] or {}).get("measurements", []) if e["name"] == name), {})
        xa, xb = fa.get("facts", {}), fb.get("facts", {})
        both = "output" in xa and "output" in xb
        rows.append({
            "name": name,
            "a": _measurement_summary({"measurements": [fa]} if fa else None).get(name, {}),
            "b": _measurement_summary({"measurements": [fb]} if fb else None).get(name, {}),
            "outputs_agree": outputs_agree(xa["output"], xb["output"]) if both else None,
            "same_jaxpr": (xa["jaxpr"] == xb["jaxpr"]) if "jaxpr" in xa and "jaxpr" in xb else None,
            "primitive_differences": _primitive_delta(xa.get("primitives"), xb.get("primitives")),
        })
    return rows


def pair_report(a: Analysis, i: int, j: int) -> dict[str, Any]:
    """Two solutions side by side: code, outcomes, measured facts (``--json``)."""
    ra, rb = a.solutions[i].result, a.solutions[j].result
    checks = [{"check": c.name, "a": next((x.status for x in ra.checks if x.name == c.name), None) if ra else None,
               "b": next((x.status for x in rb.checks if x.name == c.name), None) if rb else None}
              for c in a.exercise.checks]
    report = _header(a, "pair")
    report.update({
        "a": _side(a, i), "b": _side(a, j),
        "same_approach": a.keys[i] == a.keys[j],
        "source_similarity": round(similarity(a.source_fps[i], a.source_fps[j]), 3),
        "near_identical": similarity(a.source_fps[i], a.source_fps[j]) >= grouping.NEAR_IDENTICAL
        and min(a.source_fps[i].tokens, a.source_fps[j].tokens) >= grouping.MIN_TOKENS,
        "wording": NEAR_IDENTICAL_WORDING,
        "checks": checks,
        "measurements": _facts_pair(a, i, j),
        "diff": diffs.unified(a.codes[i], a.codes[j], a.solutions[i].label, a.solutions[j].label),
    })
    return report

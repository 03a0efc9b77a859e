"""`grade compare`'s report as plain data: what ``--json`` prints and every view renders.

``class_report`` (``"kind": "class"``) and ``pair_report`` (``"kind": "pair"``) are pure
functions of an ``Analysis``.  ``FORMAT_VERSION`` is bumped whenever a field changes
meaning or disappears (new fields may be added without a bump).

Format 2: solutions are grouped by approach at two levels, ``strategies`` (what an
instructor calls the approach, ``grader.compare.strategy``) each holding ``variants`` (the
exact fingerprint, format 1's ``approach_groups``); a submission row names its
``strategy`` and ``variant`` (format 1's ``approach_group``).

Audience: instructors.  Learners appear only by the label the gradebook gives them.
Hidden checks' private text (what they measured) appears only when the analysis was
made with ``instructor=True`` (``--instructor``); learner-facing messages always.
Wording about similar files never accuses: "near-identical, worth a look".
"""

from __future__ import annotations

import dataclasses
import datetime
import statistics
from collections import Counter
from typing import Any

import numpy as np

from grader import __version__
from grader.compare import diffs, grouping, strategy
from grader.compare.features import tokens as feature_tokens
from grader.compare.fingerprint import describe_measurement, measurement_state
from grader.compare.run import Analysis, jax_version
from grader.compare.source_norm import similarity

FORMAT_VERSION = 2
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
    """What each measurement found, in a few fields; facts come from the learner's sandbox,
    so one of the wrong shape is reported as unreadable, never a crash."""
    out = {}
    for entry in (fp or {}).get("measurements", []):
        try:
            facts = entry.get("facts", {})
            out[str(entry["name"])] = {
                "state": measurement_state(entry), "summary": describe_measurement(entry),
                "compiles": _int(facts.get("compiles")), "eqns": _int(facts.get("eqns")),
                "flops": _float(facts.get("flops")), "bytes_accessed": _float(facts.get("bytes_accessed")),
                "seconds": _float(facts.get("seconds")),
                "primitives": facts.get("primitives") if isinstance(facts.get("primitives"), dict) else None,
            }
        except Exception:  # noqa: BLE001 - facts of the wrong shape
            out[str(entry.get("name", "?")) if isinstance(entry, dict) else "?"] = {
                "state": "unreadable", "summary": "the measured facts could not be read", "compiles": None,
                "eqns": None, "flops": None, "bytes_accessed": None, "seconds": None, "primitives": None}
    return out


def _int(value: Any) -> int | None:
    return value if type(value) is int else None


def _float(value: Any) -> float | None:
    return value if type(value) is float else None


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


def _scores(a: Analysis, members: tuple[int, ...]) -> dict[str, int]:
    return dict(Counter(str(a.results[i].score) for i in members if a.results[i] is not None))


def _score_spread(a: Analysis, members: tuple[int, ...]) -> dict[str, Any] | None:
    graded = [a.results[i] for i in members if a.results[i] is not None and not a.results[i].error]
    return _spread([float(r.score) for r in graded]) if graded else None


def _variants(a: Analysis, groups: list[grouping.ApproachGroup], outcome_of: dict[int, int], strategy_id: int,
              first_id: int, largest: grouping.ApproachGroup | None) -> list[dict[str, Any]]:
    out = []
    for k, g in enumerate(groups):
        rep = g.representative
        code = a.codes[rep]
        ref_diff = diffs.unified(a.reference.code, code, "reference solution", a.solutions[rep].label)
        big_diff = None
        if largest is not None and g is not largest:
            big_rep = largest.representative
            big_diff = diffs.unified(a.codes[big_rep], code, f"{a.solutions[big_rep].label} (largest variant)",
                                     a.solutions[rep].label)
        out.append({
            "id": first_id + k, "strategy": strategy_id, "size": len(g.members), "key": g.key, "label": g.label,
            "is_reference": g.is_reference, "members": [a.solutions[i].label for i in g.members],
            "representative": a.solutions[rep].label, "representative_code": code,
            "facts": _measurement_summary(a.fingerprints[rep]),
            "outcomes": dict(Counter(str(outcome_of[i]) for i in g.members)), "scores": _scores(a, g.members),
            "diff_vs_reference": ref_diff, "diff_vs_largest": big_diff,
        })
    return out


def strategy_groups(a: Analysis) -> tuple[list[strategy.StrategyGroup], str | None]:
    """The class's strategies (the reference solution placed among them, then left out),
    and the name of the reference's strategy."""
    named = a.spec.strategies if a.spec is not None else ()
    feats = list(a.features)
    why = list(a.unmeasured)
    if a.spec is None:  # nothing measured: a strategy is a normalised source, as the variants are
        feats, why = [None] * len(a.keys), [a.labels.get(k, k) for k in a.keys]
    ref = a.reference.features if a.spec is not None else None
    groups = strategy.group(feats + [ref], why + ["the reference solution"], named)
    n = len(a.solutions)
    ref_name = next((g.name for g in groups if n in g.members), None) if ref is not None and ref.measured else None
    out = []
    for g in groups:
        members = tuple(i for i in g.members if i < n)
        if not members:
            continue
        rep = g.representative if g.representative < n else members[0]
        out.append(dataclasses.replace(g, members=members, representative=rep))
    return out, ref_name


def _strategies(a: Analysis, outcome_of: dict[int, int]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    groups, ref_name = strategy_groups(a)
    ref_words = set(feature_tokens(a.reference.features, prefix_parts=True)) if a.reference.features else set()
    strategies, variants = [], []
    for sid, g in enumerate(groups):
        inner = grouping.approach_groups([a.keys[i] for i in g.members], a.labels,
                                         [a.source_fps[i] for i in g.members], a.reference.key or None)
        inner = [dataclasses.replace(v, members=tuple(g.members[m] for m in v.members),
                                     representative=g.members[v.representative]) for v in inner]
        found = _variants(a, inner, outcome_of, sid, len(variants), inner[0] if inner else None)
        variants += found
        rep = g.representative
        words = list(g.tokens)
        strategies.append({
            "id": sid, "name": g.name, "named": g.named, "how": g.how, "measured": g.measured,
            "size": len(g.members), "members": [a.solutions[i].label for i in g.members],
            "is_reference": g.name == ref_name, "representative": a.solutions[rep].label,
            "representative_code": a.codes[rep], "features": words,
            "vs_reference": {"adds": [w for w in words if w not in ref_words],
                             "lacks": sorted(ref_words - set(words))} if ref_words and g.measured else None,
            "diff_vs_reference": diffs.unified(a.reference.code, a.codes[rep], "reference solution",
                                               a.solutions[rep].label),
            "scores": _scores(a, g.members), "score_spread": _score_spread(a, g.members),
            "variants": [v["id"] for v in found],
        })
    return strategies, variants


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


def _submission_rows(a: Analysis, outcome_of: dict[int, int], strategy_of: dict[int, int],
                     variant_of: dict[int, int]) -> list[dict[str, Any]]:
    ref_digest = a.reference.source_fp.digest
    rows = []
    for i, s in enumerate(a.solutions):
        r = s.result
        rows.append({
            "label": s.label, "score": r.score if r else None, "max_score": r.max_score if r else None,
            "error": r.error if r else "", "outcome_group": outcome_of[i], "strategy": strategy_of[i],
            "variant": variant_of[i],
            "outcome_origin": s.outcome_origin, "note": s.note,
            "checks": {c.name: c.status for c in r.checks} if r else {},
            "matches_reference": bool(ref_digest) and a.source_fps[i].digest == ref_digest,
            "source_tokens": a.source_fps[i].tokens, "measurements": _measurement_summary(a.fingerprints[i]),
        })
    return rows


def class_report(a: Analysis) -> dict[str, Any]:
    """The whole class's view of the exercise (``--json``)."""
    outcome = grouping.outcome_groups(a.results, instructor=a.instructor)
    outcome_of = {i: gid for gid, g in enumerate(outcome) for i in g.members}
    strategies, variants = _strategies(a, outcome_of)
    label_index = {s.label: i for i, s in enumerate(a.solutions)}
    strategy_of = {label_index[m]: st["id"] for st in strategies for m in st["members"]}
    variant_of = {label_index[m]: v["id"] for v in variants for m in v["members"]}
    ref_strategy = next((st["name"] for st in strategies if st["is_reference"]), None)
    report = _header(a, "class")
    report.update({
        "reference": {"approach_key": a.reference.key, "strategy": ref_strategy,
                      "features": feature_tokens(a.reference.features, prefix_parts=True)
                      if a.reference.features else [],
                      "facts": _measurement_summary(a.reference.fingerprint), "code": a.reference.code},
        "class": _class_view(a),
        "outcome_groups": _outcome_groups(a, outcome),
        "strategies": strategies,
        "variants": variants,
        "near_identical": _near_identical(a),
        "submissions": _submission_rows(a, outcome_of, strategy_of, variant_of),
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


def _side(a: Analysis, i: int, strategy_name: str | None) -> dict[str, Any]:
    s, r = a.solutions[i], a.solutions[i].result
    return {"label": s.label, "score": r.score if r else None, "max_score": r.max_score if r else None,
            "error": r.error if r else "", "note": s.note, "code": a.codes[i], "strategy": strategy_name,
            "approach_key": a.keys[i], "approach": a.labels.get(a.keys[i], ""),
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
    groups, _ = strategy_groups(a)
    name_of = {m: g.name for g in groups for m in g.members}
    report = _header(a, "pair")
    report.update({
        "a": _side(a, i, name_of.get(i)), "b": _side(a, j, name_of.get(j)),
        "same_strategy": name_of.get(i) is not None and name_of.get(i) == name_of.get(j),
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

"""Grouping a class's solutions: by outcome, by approach, and near-identical pairs.

Pure functions over plain inputs (outcomes, approach keys, source fingerprints), so
each is easy to test on its own:

* ``outcome_groups``: solutions whose checks passed and failed together (the *outcome
  vector*), largest first, with the most common failure message of each failing check;
* ``approach_groups``: solutions with the same approach key, largest first, each with a
  representative (the member whose source is closest to the others');
* ``near_identical``: pairs whose normalised learner parts overlap at least
  ``NEAR_IDENTICAL`` (and are long enough to mean something), and the clusters they form.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence

from grader.compare.source_norm import SourceFingerprint, similarity
from grader.results import PASSED, ExerciseResult

NEAR_IDENTICAL = 0.9  # shingle overlap from which two files are worth a look side by side
MIN_TOKENS = 25  # learner parts shorter than this are too small to pair (e.g. `return x`)
TOP_MESSAGES = 3
MEDOID_SAMPLE = 40  # the representative is chosen among this many members at most


@dataclasses.dataclass(frozen=True)
class Message:
    text: str
    count: int


@dataclasses.dataclass(frozen=True)
class FailingCheck:
    name: str
    visibility: str
    messages: tuple[Message, ...]  # learner-facing, most common first
    private: tuple[Message, ...] = ()  # instructor-only text of hidden checks (only when asked)


@dataclasses.dataclass(frozen=True)
class OutcomeGroup:
    vector: tuple[tuple[str, str], ...]  # (check, status) in manifest order; ("(grading)", why) when none
    members: tuple[int, ...]
    score: int
    max_score: int
    failing: tuple[FailingCheck, ...]


@dataclasses.dataclass(frozen=True)
class ApproachGroup:
    key: str
    members: tuple[int, ...]
    representative: int
    label: str
    is_reference: bool  # the reference solution measures the same


@dataclasses.dataclass(frozen=True)
class Pair:
    a: int
    b: int
    similarity: float


def outcome_vector(result: ExerciseResult | None) -> tuple[tuple[str, str], ...]:
    if result is None:
        return (("(grading)", "not graded"),)
    if result.error:
        return (("(grading)", "grader error"),)
    return tuple((c.name, c.status) for c in result.checks)


def _top(texts: list[str]) -> tuple[Message, ...]:
    counts = Counter(t for t in texts if t)
    return tuple(Message(t, n) for t, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_MESSAGES])


def _failing(results: list[ExerciseResult], instructor: bool) -> tuple[FailingCheck, ...]:
    if not results or not results[0].checks:
        return ()
    out = []
    for i, check in enumerate(results[0].checks):
        if check.status == PASSED:
            continue
        checks = [r.checks[i] for r in results if i < len(r.checks)]
        private = _top([c.private for c in checks]) if instructor and check.visibility == "hidden" else ()
        out.append(FailingCheck(check.name, check.visibility, _top([c.message for c in checks]), private))
    return tuple(out)


def outcome_groups(results: Sequence[ExerciseResult | None], *, instructor: bool = False) -> list[OutcomeGroup]:
    """Solutions grouped by outcome vector, largest group first (then higher score)."""
    by_vector: dict[tuple, list[int]] = {}
    for i, r in enumerate(results):
        by_vector.setdefault(outcome_vector(r), []).append(i)
    groups = []
    for vector, members in by_vector.items():
        graded = [results[i] for i in members if results[i] is not None and not results[i].error]
        score = graded[0].score if graded else 0
        max_score = graded[0].max_score if graded else 0
        groups.append(OutcomeGroup(vector, tuple(members), score, max_score, _failing(graded, instructor)))
    groups.sort(key=lambda g: (-len(g.members), -g.score, g.vector))
    return groups


def representative(members: Sequence[int], fps: Sequence[SourceFingerprint]) -> int:
    """The member whose source is, on average, most similar to the other members'."""
    usable = [i for i in members if fps[i].ok and fps[i].text][:MEDOID_SAMPLE]
    if len(usable) <= 2:
        return usable[0] if usable else members[0]

    def closeness(i: int) -> float:
        return sum(similarity(fps[i], fps[j]) for j in usable if j != i)

    return max(usable, key=lambda i: (closeness(i), -usable.index(i)))


def approach_groups(keys: Sequence[str], labels: dict[str, str], fps: Sequence[SourceFingerprint],
                    reference_key: str | None) -> list[ApproachGroup]:
    """Solutions grouped by approach key, largest first."""
    by_key: dict[str, list[int]] = {}
    for i, k in enumerate(keys):
        by_key.setdefault(k, []).append(i)
    groups = [ApproachGroup(k, tuple(m), representative(m, fps), labels.get(k, k), k == reference_key)
              for k, m in by_key.items()]
    groups.sort(key=lambda g: (-len(g.members), not g.is_reference, g.label))
    return groups


def near_identical(fps: Sequence[SourceFingerprint], threshold: float = NEAR_IDENTICAL) -> list[Pair]:
    """Pairs of solutions whose normalised learner parts are near-identical, most similar first."""
    usable = [i for i, fp in enumerate(fps) if fp.ok and fp.tokens >= MIN_TOKENS]
    pairs = []
    for n, i in enumerate(usable):
        for j in usable[n + 1:]:
            s = similarity(fps[i], fps[j])
            if s >= threshold:
                pairs.append(Pair(i, j, round(s, 3)))
    pairs.sort(key=lambda p: (-p.similarity, p.a, p.b))
    return pairs


def clusters(pairs: Sequence[Pair]) -> list[list[int]]:
    """Connected groups of near-identical solutions, largest first."""
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for p in pairs:
        parent[find(p.a)] = find(p.b)
    groups: dict[int, list[int]] = {}
    for x in parent:
        groups.setdefault(find(x), []).append(x)
    return sorted((sorted(g) for g in groups.values()), key=lambda g: (-len(g), g))

"""Strategies: what an instructor calls a solution's approach, read from its features.

Two levels group a class.  A **strategy** (vmap of grad, a Python loop over the batch,
backprop by hand) holds **variants**, the exact fingerprints (``grader.compare.fingerprint``).
A strategy is found in two ways, in this order:

1. **Named** by the exercise's spec: ``ExerciseSpec.strategies`` is a tuple of ``Strategy``
   (a short name and a predicate over ``grader.compare.features.Features``); the first
   whose predicate holds names the solution.
2. **Clustered**: whatever no predicate names is grouped by ``features.distance`` with
   average-linkage agglomerative clustering (``THRESHOLD``), where each named strategy is
   a cluster already that may take in close solutions but never merges with another.  A
   cluster of unnamed solutions is named by the features all its members share and the
   rest of the class mostly lacks, so nothing close to others stays on its own.

Solutions with nothing to read a strategy from (not measured, stopped before anything was
traced) are grouped by why, so a class of stubs is one group, not many.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from grader.compare.features import Features, distance_matrix, tokens

#: Average distance under which two clusters are one strategy (features.distance: 0 same
#: structure, 1 nothing in common).  Different transformations or loops alone weigh about
#: 0.3; layout and arithmetic differences inside one approach stay well under 0.2.
THRESHOLD = 0.25
MAX_NAME_TOKENS = 3


@dataclasses.dataclass(frozen=True)
class Strategy:
    """A strategy an exercise's spec names: ``name`` when ``when(features)`` holds."""

    name: str
    when: Callable[[Features], bool]
    how: str = ""  # how it is recognised, one line for the report


@dataclasses.dataclass(frozen=True)
class StrategyGroup:
    name: str
    named: bool  # named by the spec (False: clustered, named by its features; or not measured)
    how: str
    members: tuple[int, ...]
    representative: int
    tokens: tuple[str, ...]  # features every measured member shares
    measured: bool = True


def _matches(strategy: Strategy, feats: Features) -> bool:
    try:
        return bool(strategy.when(feats))
    except Exception:  # noqa: BLE001 - a predicate that cannot read these features does not match
        return False


def _cluster(d: np.ndarray, weights: list[int], fixed: list[str | None]) -> list[int]:
    """Average-linkage clustering of items at distances ``d`` (each ``weights[i]`` solutions); items whose
    ``fixed`` label is set start grouped by it, and two labelled clusters never merge.
    Returns a cluster index per item.  The cluster distances live in one matrix updated by
    the Lance-Williams rule, so a class of hundreds of distinct programs clusters in
    moments."""
    n = len(weights)
    w = np.asarray(weights, dtype=float)
    members: list[list[int]] = [[i] for i in range(n)]
    label = list(fixed)
    alive = np.ones(n, dtype=bool)
    size = w.copy()
    link = d.copy()

    def merge(a: int, b: int) -> None:
        """Cluster ``b`` into ``a``: average linkage, weighted by solutions."""
        link[a, :] = (size[a] * link[a, :] + size[b] * link[b, :]) / (size[a] + size[b])
        link[:, a] = link[a, :]
        size[a] += size[b]
        members[a] += members[b]
        label[a] = label[a] or label[b]
        alive[b] = False

    for i in range(n):  # the spec's strategies first: one cluster each
        for j in range(i + 1, n):
            if alive[i] and alive[j] and label[i] is not None and label[i] == label[j]:
                merge(i, j)
    while True:
        live = np.flatnonzero(alive)
        if len(live) < 2:
            break
        sub = link[np.ix_(live, live)].copy()
        labelled = np.array([label[k] is not None for k in live])
        sub[np.ix_(labelled, labelled)] = np.inf  # two named strategies never merge
        np.fill_diagonal(sub, np.inf)
        i, j = np.unravel_index(int(np.argmin(sub)), sub.shape)
        if sub[i, j] >= THRESHOLD:
            break
        a, b = sorted((int(live[i]), int(live[j])))
        merge(a, b)
    out = [0] * n
    for k, c in enumerate(np.flatnonzero(alive)):
        for i in members[c]:
            out[i] = k
    return out


def _medoid(members: list[int], d: np.ndarray, weights: list[int]) -> int:
    """The member closest, on average over the solutions, to the others."""
    if len(members) == 1:
        return members[0]
    w = np.asarray([weights[j] for j in members], dtype=float)
    cost = d[np.ix_(members, members)] @ w
    best = min(range(len(members)), key=lambda k: (cost[k], -weights[members[k]], members[k]))
    return members[best]


def _name(common: list[str], elsewhere: Counter, total_elsewhere: int) -> str:
    """The features a cluster shares, those the rest of the class lacks most first."""
    if not common:
        return "mixed structure"
    ranked = sorted(common, key=lambda t: (elsewhere[t] / max(1, total_elsewhere), common.index(t)))
    return "; ".join(ranked[:MAX_NAME_TOKENS])


def group(features: Sequence[Features | None], unmeasured: Sequence[str],
          strategies: Sequence[Strategy]) -> list[StrategyGroup]:
    """Every solution's strategy.  ``features[i]`` is None (or measured nothing) when there
    is nothing to read; ``unmeasured[i]`` then says why.  Largest group first."""
    unique: dict[Features, int] = {}
    uniq_of: dict[int, int] = {}
    waiting: dict[str, list[int]] = {}
    for i, f in enumerate(features):
        if f is None or not f.measured:
            waiting.setdefault(unmeasured[i] or "nothing to measure", []).append(i)
            continue
        uniq_of[i] = unique.setdefault(f, len(unique))
    items = list(unique)
    weights = [0] * len(items)
    for u in uniq_of.values():
        weights[u] += 1
    fixed = [next((s.name for s in strategies if _matches(s, f)), None) for f in items]
    d = distance_matrix(items)
    cluster_of = _cluster(d, weights, fixed) if items else []
    words = [tokens(f, prefix_parts=True) for f in items]

    groups: list[StrategyGroup] = []
    for c in sorted(set(cluster_of)):
        members_u = [u for u in range(len(items)) if cluster_of[u] == c]
        members = tuple(i for i in sorted(uniq_of) if cluster_of[uniq_of[i]] == c)
        names = [fixed[u] for u in members_u if fixed[u]]
        common = [t for t in words[members_u[0]] if all(t in words[u] for u in members_u)]
        rep = _medoid(members_u, d, weights)
        representative = next(i for i in members if uniq_of[i] == rep)
        if names:
            strategy = next(s for s in strategies if s.name == names[0])
            groups.append(StrategyGroup(strategy.name, True, strategy.how, members, representative, tuple(common)))
        else:
            others = Counter(t for u in range(len(items)) if cluster_of[u] != c for t in set(words[u]))
            rest = sum(1 for u in range(len(items)) if cluster_of[u] != c)
            groups.append(StrategyGroup(_name(common, others, rest), False,
                                        "clustered by measured structure (no strategy of the spec matched)",
                                        members, representative, tuple(common)))
    for why, members in waiting.items():
        groups.append(StrategyGroup(why, False, "nothing to read a strategy from", tuple(members), members[0], (),
                                    measured=False))
    groups.sort(key=lambda g: (not g.measured, -len(g.members), g.name))
    return _unique_names(groups)


def _unique_names(groups: list[StrategyGroup]) -> list[StrategyGroup]:
    seen: Counter = Counter()
    out = []
    for g in groups:
        seen[g.name] += 1
        out.append(g if seen[g.name] == 1 else dataclasses.replace(g, name=f"{g.name} ({seen[g.name]})"))
    return out

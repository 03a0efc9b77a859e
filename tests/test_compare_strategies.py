"""`grade compare`'s strategies against classes labelled by hand (``tests/compare_strategies``).

Each class is a folder of solutions of one exercise written independently from the
statement by authors who did not write the grader, right and wrong ones, with
``labels.csv``: the author's own description (``author_strategy``) and the strategy it is
normalised to (``strategy``; ``tests/compare_strategies/README.md`` says how).  Every file
is measured in a sandbox as `grade compare` measures it, and the strategy groups must
agree with the labels: adjusted Rand index at least ``MIN_ARI`` on each class, and no
label spread over more than two groups.
"""

from __future__ import annotations

import csv
from collections import Counter, defaultdict
from math import comb
from pathlib import Path

import pytest

from grader import cache
from grader.compare import features, specs, strategy, workers
from grader.manifest import load

REPO = Path(__file__).resolve().parents[1]
CLASSES = Path(__file__).resolve().parent / "compare_strategies"
NAMES = ("ex03", "ex05", "ex06", "ex07")
MIN_ARI = 0.8
pytestmark = pytest.mark.slow


def adjusted_rand_index(truth: list[str], found: list[object]) -> float:
    """Hubert and Arabie's adjusted Rand index of two partitions of the same items."""
    n = len(truth)
    together = sum(comb(c, 2) for c in Counter(zip(truth, found)).values())
    a = sum(comb(c, 2) for c in Counter(truth).values())
    b = sum(comb(c, 2) for c in Counter(found).values())
    expected = a * b / comb(n, 2)
    best = (a + b) / 2
    return 1.0 if best == expected else (together - expected) / (best - expected)


def test_adjusted_rand_index():
    assert adjusted_rand_index(list("aabb"), [1, 1, 2, 2]) == 1.0
    assert adjusted_rand_index(list("aabb"), [1, 2, 1, 2]) < 0
    assert 0 < adjusted_rand_index(list("aaabbb"), [1, 1, 2, 2, 2, 2]) < 1


def _labels(name: str) -> dict[str, str]:
    with open(CLASSES / name / "labels.csv", encoding="utf-8") as fh:
        return {row["file"]: row["strategy"] for row in csv.DictReader(fh)}


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> dict[str, dict[str, dict]]:
    """Every file of every class measured in its own sandbox (fingerprints only), all sharing one
    compile cache: they are the course's own test files (``grader.cache.course_cache``)."""
    manifest = load(REPO / "exercises" / "manifest.toml")
    root = tmp_path_factory.mktemp("strategy-classes")
    tasks, where = [], []
    for name in NAMES:
        ex = manifest.get(int(name[2:]))
        for file in sorted(_labels(name)):
            folder = root / name / file[:-3]
            target = folder / "exercises" / ex.dir / ex.module_file
            target.parent.mkdir(parents=True)
            target.write_text((CLASSES / name / file).read_text(encoding="utf-8"), encoding="utf-8")
            tasks.append(workers.Task(len(tasks), ex.number, str(folder), str(target), False, True))
            where.append((name, file))
    out: dict[str, dict[str, dict]] = defaultdict(dict)
    with cache.course_cache() as shared:
        for done in workers.run_all(tasks, jobs=2, manifest_path=manifest.path, course=REPO, hidden=None,
                                    course_cache=shared):
            name, file = where[done["index"]]
            out[name][file] = done.get("fingerprint") or {"error": done.get("error", "?"), "measurements": []}
    return out


@pytest.mark.parametrize("name", NAMES)
def test_strategies_agree_with_hand_labels(measured, name):
    manifest = load(REPO / "exercises" / "manifest.toml")
    spec = specs.spec_for(manifest.get(int(name[2:])).slug)
    labels = _labels(name)
    files = sorted(labels)
    feats = [features.features_of(spec, measured[name][f], (CLASSES / name / f).read_text(encoding="utf-8"))
             for f in files]
    groups = strategy.group(feats, ["not measured"] * len(files), spec.strategies)
    found = {files[i]: g.name for g in groups for i in g.members}
    truth = [labels[f] for f in files]
    score = adjusted_rand_index(truth, [found[f] for f in files])
    spread = defaultdict(set)
    for f in files:
        spread[labels[f]].add(found[f])
    table = "\n".join(f"  {f}: {labels[f]!r} -> {found[f]!r}" for f in files)
    assert score >= MIN_ARI, f"{name}: adjusted Rand index {score:.3f} < {MIN_ARI}\n{table}"
    assert all(len(g) <= 2 for g in spread.values()), f"{name}: a label over more than two groups\n{table}"
    assert len(files) >= 20 and any(f.startswith("right_") for f in files) and any(f.startswith("wrong_") for f in files)


# --- the pieces, on programs traced here --------------------------------------------------------

def _features_of(fn, *args, grown_args=None) -> features.Features:
    import jax

    from grader.compare import jaxpr_canon

    facts = {"structure": jaxpr_canon.structure(jax.make_jaxpr(fn)(*args)), "later_compiles": 0}
    if grown_args is not None:
        grown = jaxpr_canon.structure(jax.make_jaxpr(fn)(*grown_args))
        facts["grown"] = {"eqns": sum(grown["paths"].values()), "loops": grown["loops"]}
    entry = {"name": "f", "structural": True, "facts": facts}
    return features.Features((("f", features.part_of(entry)),))


def test_transformations_are_read_from_the_jaxpr():
    import jax
    import jax.numpy as jnp

    def loss(w, x):
        return jnp.sum(jnp.tanh(x @ w) ** 2)

    w, xs = jnp.ones((3, 2)), jnp.ones((5, 3))
    per_example = _features_of(jax.vmap(jax.grad(loss), in_axes=(None, 0)), w, xs)
    assert "vmap·grad" in per_example.part().reverse
    jacrev = _features_of(jax.jacrev(lambda w: jax.vmap(loss, (None, 0))(w, xs)), w)
    assert "vmap·grad·vmap" in jacrev.part().reverse
    looped = _features_of(lambda w, xs: jax.lax.map(lambda x: jax.grad(loss)(w, x), xs), w, xs,
                          grown_args=(w, jnp.ones((9, 3))))
    assert "scan·grad" in looped.part().reverse and "scan~size" in looped.part().constructs
    unrolled = _features_of(lambda w, xs: jnp.stack([jax.grad(loss)(w, x) for x in xs]), w, xs,
                            grown_args=(w, jnp.ones((9, 3))))
    assert unrolled.part().grows and not per_example.part().grows
    by_hand = _features_of(jax.vmap(lambda w, x: jnp.outer(x, 2 * jnp.tanh(x @ w) * (1 - jnp.tanh(x @ w) ** 2)),
                                    in_axes=(None, 0)), w, xs)
    assert not by_hand.part().autodiff
    assert features.distance(per_example, per_example) == 0.0
    assert features.distance(per_example, unrolled) > strategy.THRESHOLD


def test_named_first_then_clustered_then_unmeasured():
    import jax
    import jax.numpy as jnp

    a = _features_of(lambda x: jnp.sin(x) * 2.0, jnp.ones(4))
    a2 = _features_of(lambda x: jnp.sin(x) * 3.0 + 1.0, jnp.ones(4))
    b = _features_of(lambda x: jax.lax.scan(lambda c, v: (c + v, c), 0.0, x)[0], jnp.ones(4))
    boom = strategy.Strategy("never", lambda f: 1 / 0)  # a predicate that fails matches nothing
    scans = strategy.Strategy("a scan", lambda f: any(c.startswith("scan") for c in f.part().constructs))
    groups = strategy.group([a, b, a2, None, b], ["", "", "", "not measured: stub", ""], (boom, scans))
    by_name = {g.name: g for g in groups}
    assert by_name["a scan"].members == (1, 4) and by_name["a scan"].named
    clustered = [g for g in groups if not g.named and g.measured]
    assert len(clustered) == 1 and clustered[0].members == (0, 2)  # close enough: one group, not two singletons
    assert by_name["not measured: stub"].members == (3,) and not by_name["not measured: stub"].measured
    assert len({g.name for g in groups}) == len(groups)

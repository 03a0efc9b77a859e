"""`grade compare`, run for real on a synthetic class (``tests/compare_class``).

32 forks laid out like the course, each holding exercises 3, 5 and 6: the reference
solutions, right solutions in other idioms, renamed copies, known-wrong fixtures and
stubs.  One session-scoped run grades and fingerprints every distinct file once (the
gradebook file keeps the cache, which the browser test reuses); the tests then check
the groupings against what each fork was built from, the cache, the outputs and the CLI.
"""

from __future__ import annotations

import ast
import dataclasses
import html
import json
import re
import sqlite3
import subprocess
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from compare_class import build
from grader import __version__
from grader.compare import grouping, jaxpr_canon, model, report_html, run, source_norm, specs, workers
from grader.compare.cli import compare_cmd
from grader.compare.store import Store
from grader.course.gradebook import Gradebook
from grader.manifest import load
from grader.results import RunResult

REPO = Path(__file__).resolve().parents[1]
NUMBERS = (3, 5, 6)
pytestmark = pytest.mark.slow


@dataclasses.dataclass
class ClassRun:
    layout: build.ClassLayout
    gradebook: Path
    analyses: dict[int, run.Analysis]
    reports: dict[int, dict]


@pytest.fixture(scope="session")
def klass(tmp_path_factory) -> ClassRun:
    base = tmp_path_factory.getbasetemp() / "compare-class"
    layout, gradebook, analyses = build.analyse_class(base, NUMBERS)
    return ClassRun(layout, gradebook, analyses, {n: model.class_report(a) for n, a in analyses.items()})


def _by_label(report: dict) -> dict[str, dict]:
    return {s["label"]: s for s in report["submissions"]}


def _variant(klass: ClassRun, n: int, label: str) -> build.Variant:
    return klass.layout.assignment[label][n]


# --- grouping on the class ------------------------------------------------------------------

@pytest.mark.parametrize("n", NUMBERS)
def test_same_approach_same_group_different_approaches_different_groups(klass, n):
    families: dict[str, set[int]] = {}
    for label, row in _by_label(klass.reports[n]).items():
        families.setdefault(_variant(klass, n, label).family, set()).add(row["variant"])
    assert all(len(groups) == 1 for groups in families.values()), families  # one family, one group
    groups = [next(iter(g)) for g in families.values()]
    assert len(groups) == len(set(groups)), families  # different families, different groups
    assert len(klass.layout.forks) >= 30


@pytest.mark.parametrize("n", NUMBERS)
def test_the_reference_approach_is_marked(klass, n):
    report = klass.reports[n]
    marked = [g for g in report["variants"] if g["is_reference"]]
    assert len(marked) == 1
    reference_forks = {f for f, t in klass.layout.assignment.items() if t[n].family == "reference"}
    assert set(marked[0]["members"]) == reference_forks


@pytest.mark.parametrize("n", NUMBERS)
def test_renamed_copies_are_flagged_near_identical(klass, n):
    report = klass.reports[n]
    pairs = {frozenset((p["a"], p["b"])): p["similarity"] for p in report["near_identical"]["pairs"]}
    renamed = [v for v in build.variants(n) if v.kind == "renamed"]
    assert renamed
    for v in renamed:
        for copy in build.forks_with(klass.layout, n, v.name):
            for original in build.forks_with(klass.layout, n, v.of):
                assert pairs.get(frozenset((copy, original))) == 1.0, (v.name, copy, original)
    assert report["near_identical"]["wording"] == "near-identical, worth a look"


@pytest.mark.parametrize("n", (3, 5))
def test_independent_idioms_are_not_flagged(klass, n):
    pairs = {frozenset((p["a"], p["b"])) for p in klass.reports[n]["near_identical"]["pairs"]}
    idioms = [v.name for v in build.variants(n) if v.kind == "idiom"]
    for idiom in idioms:
        for a in build.forks_with(klass.layout, n, idiom):
            for b in build.forks_with(klass.layout, n, "reference"):
                assert frozenset((a, b)) not in pairs


@pytest.mark.parametrize("n", NUMBERS)
def test_outcomes_match_what_each_fork_was_built_from(klass, n):
    rows = _by_label(klass.reports[n])
    ex = load(REPO / "exercises" / "manifest.toml").get(n)
    for label, row in rows.items():
        v = _variant(klass, n, label)
        if v.kind in ("reference", "idiom", "renamed") and v.family in ("reference", "ravel", "closure", "blend",
                                                                           "recursive"):
            assert row["score"] == ex.max_score, (label, v.name, row)
        elif v.kind == "stub":
            assert row["score"] == 0
        elif v.kind == "fixture":
            for check in v.must_fail:
                assert row["checks"][check] != "passed", (v.name, check)
    # the outcome groups partition the class by outcome vector
    groups = klass.reports[n]["outcome_groups"]
    assert sorted(m for g in groups for m in g["members"]) == sorted(rows)
    for g in groups:
        vectors = {tuple(sorted(rows[m]["checks"].items())) for m in g["members"]}
        assert len(vectors) == 1


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def test_failure_messages_are_learner_facing_unless_instructor(klass):
    analysis = klass.analyses[3]
    private = {c.private for r in analysis.results if r for c in r.checks if c.visibility == "hidden" and c.private}
    assert private, "the class should have hidden-check failures with private text"
    plain = model.class_report(analysis)
    assert not any(p in text for text in _strings(plain) for p in private)
    instructor = model.class_report(dataclasses.replace(analysis, instructor=True))
    shown = {m["text"] for g in instructor["outcome_groups"] for f in g["failing"] for m in f.get("private", [])}
    assert shown and shown <= private
    page = report_html.render(plain)
    assert not any(html.escape(p) in page for p in private)
    assert any(html.escape(p) in report_html.render(instructor) for p in shown)


# --- the gradebook as SOURCE ------------------------------------------------------------------

def _import_into_gradebook(klass: ClassRun, n: int, path: Path, tmp: Path) -> None:
    from grader.cli import main
    from grader.runner import jax_version

    runner = CliRunner()
    for sol in klass.analyses[n].solutions:
        run_result = RunResult(exercises=(sol.result,), grader_version=__version__, jax_version=jax_version(),
                               seed_option=None, started_at="2025-01-01T00:00:00+00:00",
                               submission=str(klass.layout.forks[sol.label]))
        file = tmp / f"{sol.label}.json"
        file.write_text(json.dumps(run_result.to_dict(private=True)))
        out = runner.invoke(main, ["gradebook", "import", "--gradebook", str(path), "--submission", sol.label,
                                   str(file)])
        assert out.exit_code == 0, out.output


def test_outcome_groups_match_the_gradebook(klass, tmp_path):
    book = tmp_path / "grades.sqlite"
    _import_into_gradebook(klass, 3, book, tmp_path)
    manifest = load(REPO / "exercises" / "manifest.toml")
    # outcomes come from the new gradebook (the SOURCE); fingerprints from the class's cache
    analysis = run.analyse(run.Options(3, [str(book)], REPO, gradebook=klass.gradebook, jobs=2), manifest)
    report = model.class_report(analysis)
    with Gradebook(book, create=False) as gb:
        expected: dict[str, list] = {}
        for row in gb.check_rows():
            if row["exercise"] == 3:
                expected.setdefault(row["submission"], []).append((row["check"], row["status"]))
    partition = {}
    for label, vector in expected.items():
        partition.setdefault(tuple(vector), set()).add(label)
    got = {tuple((v["check"], v["status"]) for v in g["vector"]): set(g["members"]) for g in report["outcome_groups"]}
    assert got == partition
    assert all(s.outcome_origin == "gradebook" and s.root is not None for s in analysis.solutions)
    assert analysis.stats["graded_now"] == 0 and analysis.stats["measured_now"] == 0
    assert {s["variant"] for s in report["submissions"]} == {s["variant"] for s in
                                                                   klass.reports[3]["submissions"]}


GIT = ["git", "-c", "user.name=Fork Author", "-c", "user.email=fork@example.com", "-c", "init.defaultBranch=main"]


def test_gradebook_from_grade_batch_finds_the_graded_commit(klass, tmp_path):
    from grader.cli import main

    folder, file = build.EXERCISE_DIRS[6]
    idiom = next(v for v in build.variants(6) if v.name == "idiom-recursive")
    repo = tmp_path / "git-fork"
    (repo / "exercises" / folder).mkdir(parents=True)
    (repo / "exercises" / folder / file).write_text(idiom.text)
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "solution"]):
        subprocess.run([*GIT, "-C", str(repo), *args], check=True, capture_output=True)
    (repo / "exercises" / folder / file).write_text(build.variants(6)[-1].text)  # uncommitted: the stub
    book = tmp_path / "grades.sqlite"
    out = CliRunner().invoke(main, ["batch", str(repo), "--gradebook", str(book), "--exercise", "6", "-j", "1", "-q"])
    assert out.exit_code == 0, out.output
    manifest = load(REPO / "exercises" / "manifest.toml")
    analysis = run.analyse(run.Options(6, [str(book)], REPO, gradebook=klass.gradebook, jobs=1), manifest)
    (sol,) = analysis.solutions
    assert sol.label == "git-fork" and sol.outcome_origin == "gradebook" and sol.result.score == sol.result.max_score
    assert analysis.codes[0] == idiom.text  # the graded commit, not the work tree
    idiom_fork = build.forks_with(klass.layout, 6, "idiom-recursive")[0]
    assert analysis.keys[0] == klass.analyses[6].keys[[s.label for s in klass.analyses[6].solutions].index(idiom_fork)]
    assert analysis.stats["measured_now"] == 0  # the same files: fingerprints from the class's cache


# --- the cache ----------------------------------------------------------------------------------

def test_rerun_measures_only_new_forks(klass, tmp_path):
    manifest = load(REPO / "exercises" / "manifest.toml")
    forks = [str(p) for p in klass.layout.forks.values()]
    again = run.analyse(run.Options(5, forks, REPO, gradebook=klass.gradebook, jobs=2), manifest)
    assert again.stats["measured_now"] == 0 and again.stats["graded_now"] == 0
    stub = (REPO / "exercises" / "05_while_loop_vs_scan" / "loops.py").read_text()
    newcomer = tmp_path / "late-fork"
    target = newcomer / "exercises" / "05_while_loop_vs_scan" / "loops.py"
    target.parent.mkdir(parents=True)
    idiom = next(v for v in build.variants(5) if v.name == "idiom-blend")
    target.write_text(build.rename_copy(idiom.text, "late", stub))
    more = run.analyse(run.Options(5, forks + [str(newcomer)], REPO, gradebook=klass.gradebook, jobs=2), manifest)
    assert more.stats["measured_now"] == 1 and more.stats["graded_now"] == 1
    report = model.class_report(more)
    row = _by_label(report)["late-fork"]
    original = _by_label(report)[build.forks_with(klass.layout, 5, "idiom-blend")[0]]
    assert row["variant"] == original["variant"] and row["score"] == original["score"]
    with sqlite3.connect(klass.gradebook) as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"compare_fingerprints", "compare_outcomes", "gradings"} <= tables


def test_store_keys_fingerprints_by_versions(tmp_path):
    path = tmp_path / "g.sqlite"
    Gradebook(path).close()
    with Store(path, grader_version="1", jax_version="0.10.2") as store:
        store.put_fingerprint("h1", 3, "spec", {"measurements": [], "x": np.arange(3)})
        assert np.array_equal(store.fingerprints(3, "spec", {"h1"})["h1"]["x"], np.arange(3))
        assert store.fingerprints(3, "other-spec", {"h1"}) == {}
    with Store(path, grader_version="2", jax_version="0.10.2") as store:
        assert store.fingerprints(3, "spec", {"h1"}) == {}


# --- views and the CLI ----------------------------------------------------------------------

def test_json_report_is_versioned(klass):
    out = CliRunner().invoke(compare_cmd, ["5", *map(str, klass.layout.forks.values()), "--gradebook",
                                           str(klass.gradebook), "--json", "-j", "2"])
    assert out.exit_code == 0, out.output
    report = json.loads(out.output)
    assert report["format_version"] == model.FORMAT_VERSION and report["kind"] == "class"
    assert report["class"]["submissions"] == len(klass.layout.forks)
    assert sum(report["class"]["score_distribution"].values()) == report["class"]["graded"]
    assert {m["name"] for m in report["class"]["measurements"]} == {"scan_version", "grad of scan_version"}
    assert report["stats"]["measured_now"] == 0


def test_html_is_one_self_contained_file(klass, tmp_path):
    page_path = tmp_path / "class.html"
    out = CliRunner().invoke(compare_cmd, ["3", *map(str, klass.layout.forks.values()), "--gradebook",
                                           str(klass.gradebook), "--html", str(page_path)])
    assert out.exit_code == 0, out.output
    page = page_path.read_text()
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page)
    assert "<link" not in page and "<script src" not in page and "@import" not in page
    assert page.count('class="plot"') >= 3
    assert 'id="outcome-table"' in page and 'id="variant-table"' in page and 'id="strategy-table"' in page
    assert 'class="hl"' in page  # pygments
    assert page.count("data-diff=") >= len(klass.reports[3]["variants"])
    assert "Strategies" in out.output  # the terminal summary is printed too


def test_pair_view_compares_measured_facts(klass):
    layout = klass.layout
    ref = layout.forks[build.forks_with(layout, 3, "reference")[0]]
    for other, agree in (("idiom-ravel", True), ("fixture-python_loop", True), ("fixture-squared_norms", False)):
        fork = layout.forks[build.forks_with(layout, 3, other)[0]]
        out = CliRunner().invoke(compare_cmd, ["3", str(ref), str(fork), "--gradebook", str(klass.gradebook),
                                               "--json"])
        assert out.exit_code == 0, out.output
        report = json.loads(out.output)
        assert report["kind"] == "pair" and report["same_approach"] is False
        m = report["measurements"][0]
        assert m["outputs_agree"] is agree and m["same_jaxpr"] is False
        assert report["a"]["code"] and report["b"]["code"] and report["diff"]
    out = CliRunner().invoke(compare_cmd, ["3", *map(str, layout.forks.values()), "--gradebook", str(klass.gradebook),
                                           "--pair", *build.forks_with(layout, 3, "renamed-1")[:1],
                                           *build.forks_with(layout, 3, "idiom-ravel")[:1], "--json"])
    report = json.loads(out.output)
    assert report["same_approach"] is True and report["near_identical"] is True
    assert all(m["outputs_agree"] and m["same_jaxpr"] for m in report["measurements"])


def test_exercise_without_spec_falls_back_to_source(klass, monkeypatch):
    monkeypatch.setattr(run, "spec_for", lambda slug: None)
    manifest = load(REPO / "exercises" / "manifest.toml")
    forks = [str(p) for p in klass.layout.forks.values()]
    analysis = run.analyse(run.Options(6, forks, REPO, gradebook=klass.gradebook, jobs=2), manifest)
    assert analysis.stats["measured_now"] == 0 and analysis.stats["graded_now"] == 0
    report = model.class_report(analysis)
    assert any("no fingerprint spec" in note and "normalised source only" in note for note in report["notes"])
    assert all(g["key"].startswith("source:") for g in report["variants"])
    rows = _by_label(report)
    for v in build.variants(6):
        if v.kind == "renamed":
            copies = build.forks_with(klass.layout, 6, v.name) + build.forks_with(klass.layout, 6, v.of)
            assert len({rows[f]["variant"] for f in copies}) == 1
    stub_group = {rows[f]["variant"] for f in build.forks_with(klass.layout, 6, "stub")}
    assert [report["variants"][g]["label"] for g in stub_group] == ["unchanged stub"]


@pytest.mark.parametrize("args, message", [
    (["99", "."], "there is no exercise 99"),
    (["3"], "give at least one SOURCE"),
    (["3", "/no/such/folder"], "no such folder"),
])
def test_cli_errors_are_clear(args, message):
    out = CliRunner().invoke(compare_cmd, args)
    assert out.exit_code == 2 and message in out.output and "Traceback" not in out.output


def test_unreadable_gradebooks_are_clear(tmp_path):
    garbage = tmp_path / "grades.sqlite"
    garbage.write_bytes(b"not a database at all" * 100)
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE t (x)")
    for path in (garbage, other):
        out = CliRunner().invoke(compare_cmd, ["3", str(path)])
        assert out.exit_code == 2 and "cannot read the gradebook" in out.output, out.output
        assert "Traceback" not in out.output


def test_unknown_pair_label_is_clear(klass):
    out = CliRunner().invoke(compare_cmd, ["6", *map(str, klass.layout.forks.values()), "--gradebook",
                                           str(klass.gradebook), "--pair", "nobody", "learner-00"])
    assert out.exit_code == 2 and "no submission labelled 'nobody'" in out.output


# --- every spec, measured on the reference and the stub ----------------------------------------

def test_every_spec_measures_the_reference_and_sees_the_stub():
    manifest = load(REPO / "exercises" / "manifest.toml")
    assert {e.slug for e in manifest.exercises if e.number <= 6} <= set(specs.all_specs())
    tasks, names = [], []
    for ex in manifest.exercises:
        if specs.spec_for(ex.slug) is None:
            continue
        for where in ("solutions", "exercises"):
            path = REPO / where / ex.dir / ex.module_file
            tasks.append(workers.Task(len(tasks), ex.number, str(path.parent), str(path), False, True))
            names.append((ex.number, where))
    outs = {o["index"]: o for o in workers.run_all(tasks, jobs=2, manifest_path=manifest.path, course=REPO,
                                                    hidden=REPO / "solutions")}
    for i, (number, where) in enumerate(names):
        fp = outs[i]["fingerprint"]
        states = [model.measurement_state(e) for e in fp["measurements"]]
        if where == "solutions":
            assert states == ["ok"] * len(states), (number, fp)
            structural = [e["facts"] for e in fp["measurements"] if e["structural"]]
            assert all("jaxpr" in f for f in structural), number
        else:
            assert any("not_implemented" in s for s in states), (number, states)


_TIMING_FACTS = frozenset({"seconds", "wall_s"})


def _without_timings(value):
    """A fingerprint's measurements with the clock readings left out (everything else compared)."""
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if k not in _TIMING_FACTS}
    if isinstance(value, (list, tuple)):
        return [_without_timings(v) for v in value]
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    return value


def test_the_course_cache_changes_no_fingerprint():
    """The test suite's classes are measured through one compile cache (the course's own files):
    exercise 7's solution -- the spec with the most compiles -- measures the same, compile counts
    included, without it, with it empty, and with it holding every program already."""
    from grader import cache
    from grader.compare import fingerprint

    manifest = load(REPO / "exercises" / "manifest.toml")
    ex = manifest.get(7)
    spec = specs.spec_for(ex.slug)
    path = REPO / "solutions" / ex.dir / ex.module_file
    alone = fingerprint.measure(ex, spec, path)
    with cache.course_cache() as shared:
        cold = fingerprint.measure(ex, spec, path, course_cache=shared)
        written = sum(1 for f in shared.rglob("*") if f.is_file())
        warm = fingerprint.measure(ex, spec, path, course_cache=shared)
    assert written > 0  # the first measurement filled the cache the second one read
    assert _without_timings(cold["measurements"]) == _without_timings(alone["measurements"])
    assert _without_timings(warm["measurements"]) == _without_timings(alone["measurements"])
    compiles = [e["facts"].get("compiles") for e in warm["measurements"] if "facts" in e]
    assert any(isinstance(n, int) and n > 0 for n in compiles), compiles


# --- the pieces ---------------------------------------------------------------------------------

def test_canonical_jaxpr_ignores_names_and_buckets_literals():
    import jax
    import jax.numpy as jnp

    def first(x, w):
        hidden = jnp.tanh(x @ w)
        return jnp.sum(hidden * 2.0) + 1e-3

    def second(inputs, weights):  # the same program, other names
        activations = jnp.tanh(inputs @ weights)
        return jnp.sum(activations * 2.0) + 2e-3

    def third(x, w):  # another constant
        return jnp.sum(jnp.tanh(x @ w) * 1000.0) + 1e-3

    args = (jnp.ones((3, 4)), jnp.ones((4, 5)))
    texts = [jaxpr_canon.canonical_text(jax.make_jaxpr(jax.jit(f))(*args)) for f in (first, second, third)]
    assert texts[0] == texts[1] and texts[0] != texts[2]
    assert "first" not in texts[0] and "second" not in texts[1]
    assert jaxpr_canon.bucket(0.001) == jaxpr_canon.bucket(0.002) != jaxpr_canon.bucket(2.0)
    assert jaxpr_canon.primitive_counts(jax.make_jaxpr(jax.jit(first))(*args))["tanh"] == 1


def test_normalised_source_drops_names_comments_docstrings_and_aliases():
    a = 'import jax.numpy as jnp\n\ndef f(x):\n    """Doc."""\n    y = jnp.sum(x)  # total\n    return y * 2\n'
    b = 'import jax.numpy as np\n\n\ndef f(values):\n    total = np.sum(values)\n\n    return total * 2\n'
    c = 'import jax.numpy as jnp\n\ndef f(x):\n    return jnp.max(x) * 2\n'
    fa, fb, fc = (source_norm.fingerprint(s) for s in (a, b, c))
    assert fa.digest == fb.digest and fa.digest != fc.digest
    assert source_norm.similarity(fa, fb) == 1.0 > source_norm.similarity(fa, fc)
    stub = 'def f(x):\n    raise NotImplementedError\n\ndef g(x):\n    """Given."""\n    return x\n'
    assert source_norm.fingerprint(stub, stub).empty
    learner = stub.replace("raise NotImplementedError", "return x + 1")
    part = source_norm.fingerprint(learner, stub).text
    assert ast.parse(part) and part.count("def ") == 1  # g is the stub's: not the learner's part
    assert not source_norm.fingerprint("def broken(:\n", stub).ok


def test_grouping_functions():
    fps = [source_norm.fingerprint(f"def f(x):\n    return x * {k} + x ** 2 - x / 3 + abs(x) + max(x, 0) + min(x, 1)\n")
           for k in (1, 1, 7)]
    pairs = grouping.near_identical(fps, threshold=0.5)
    assert grouping.Pair(0, 1, 1.0) in pairs
    assert grouping.clusters([grouping.Pair(0, 1, 1.0), grouping.Pair(1, 2, 0.95), grouping.Pair(3, 4, 0.9)]) == \
        [[0, 1, 2], [3, 4]]
    assert model.outputs_agree({"a": np.ones(3)}, {"a": np.ones(3) + 1e-7})
    assert not model.outputs_agree([np.ones(3)], [np.zeros(3)])
    assert not model.outputs_agree(np.ones(3), np.ones(4))


def test_approach_labels_name_versioned_primitives():
    """JAX 0.10 calls the checkpoint primitive `remat2`: a label still says how the function
    is built, whatever number the installed JAX puts after the name."""
    from grader.compare.fingerprint import _primitive_words

    words = _primitive_words({"remat2": 2, "scan": 1, "add": 5, "pjit": 1})
    assert words == "scan, pjit, remat2x2"

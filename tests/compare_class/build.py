"""A synthetic class for `grade compare`'s tests and bench: forks laid out like the course.

Each fork holds ``exercises/<dir>/<file>`` for exercises 3, 5 and 6, one *variant* each:

* the reference solution (``solutions/<dir>/<file>``);
* right solutions written in other idioms (``idioms/``, written for these tests);
* renamed copies (``rename_copy``: every local name and helper renamed, comments rewritten);
* known-wrong fixtures from ``fixtures/<dir>/<name>/`` (``base = "solution"``: the solution
  with the fixture's file appended, as ``grade verify`` builds them);
* the untouched stub.

Every variant names its ``family``: the approach it is written with.  Variants of one
family must land in one approach group, and different families in different groups.
"""

from __future__ import annotations

import ast
import dataclasses
import io
import tokenize
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
IDIOMS = Path(__file__).resolve().parent / "idioms"
EXERCISE_DIRS = {3: ("03_per_example_grad_norms", "grad_norms.py"), 5: ("05_while_loop_vs_scan", "loops.py"),
                 6: ("06_reading_a_jaxpr", "jaxpr_reading.py")}


@dataclasses.dataclass(frozen=True)
class Variant:
    name: str
    text: str
    kind: str  # reference | idiom | renamed | fixture | stub
    family: str  # the approach it is written with
    of: str = ""  # renamed copies: the variant they copy
    must_fail: tuple[str, ...] = ()  # fixtures: checks that must fail (fixture.toml)


def _read(*parts: str) -> str:
    return (REPO.joinpath(*parts)).read_text(encoding="utf-8")


def fixture(number: int, name: str) -> Variant:
    folder, file = EXERCISE_DIRS[number]
    meta = tomllib.loads(_read("fixtures", folder, name, "fixture.toml"))
    text = _read("fixtures", folder, name, file)
    if meta.get("base") == "solution":
        text = f"{_read('solutions', folder, file)}\n\n{text}"
    return Variant(f"fixture-{name}", text, "fixture", name, must_fail=tuple(meta.get("must_fail", ())))


def _kept_names(stub: str) -> set[str]:
    """What a renamed copy must keep: the stub's top-level names and its functions' parameters."""
    tree = ast.parse(stub)
    keep = {"_", "self"}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            keep.add(node.name)
            if isinstance(node, ast.FunctionDef):
                keep |= {a.arg for a in node.args.args + node.args.kwonlyargs}
        elif isinstance(node, ast.Assign):
            keep |= {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            keep |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return keep


def _bound(text: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
            names |= {a.arg for a in node.args.args + node.args.kwonlyargs + node.args.posonlyargs}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names -= {(a.asname or a.name).split(".")[0] for a in node.names}
    imported = {(a.asname or a.name).split(".")[0] for node in ast.walk(ast.parse(text))
                if isinstance(node, (ast.Import, ast.ImportFrom)) for a in node.names}
    return names - imported


def rename_copy(text: str, salt: str, stub: str) -> str:
    """``text`` with every name it binds (but the stub's API) renamed and every comment rewritten."""
    keep = _kept_names(stub)
    mapping = {n: f"{salt}{n.strip('_')[::-1] or 'v'}" for n in sorted(_bound(text) - keep)}
    out, prev = [], None
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.NAME and tok.string in mapping and not (prev is not None and prev.string == "."):
            tok = tok._replace(string=mapping[tok.string])
        elif tok.type == tokenize.COMMENT:
            tok = tok._replace(string=f"# ({salt}) " + " ".join(reversed(tok.string.lstrip("# ").split())))
        out.append(tok)
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
            prev = tok
    return tokenize.untokenize(out)


def variants(number: int) -> list[Variant]:
    folder, file = EXERCISE_DIRS[number]
    stub = _read("exercises", folder, file)
    ref = Variant("reference", _read("solutions", folder, file), "reference", "reference")
    out = [ref]
    if number == 3:
        ravel = Variant("idiom-ravel", (IDIOMS / "grad_norms_ravel.py").read_text(), "idiom", "ravel")
        out += [ravel, Variant("idiom-closure", (IDIOMS / "grad_norms_closure.py").read_text(), "idiom", "closure")]
        out += [Variant(f"renamed-{k}", rename_copy(ravel.text, f"r{k}", stub), "renamed", "ravel", of=ravel.name)
                for k in (1, 2)]
        out += [fixture(3, n) for n in ("python_loop", "squared_norms", "not_jitted", "batch_mean_gradient")]
    elif number == 5:
        idiom = Variant("idiom-blend", (IDIOMS / "loops_masked_arith.py").read_text(), "idiom", "blend")
        out += [idiom, Variant("renamed-1", rename_copy(idiom.text, "q1", stub), "renamed", "blend", of=idiom.name)]
        out += [Variant(f"renamed-ref-{k}", rename_copy(ref.text, f"s{k}", stub), "renamed", "reference",
                        of=ref.name) for k in (1, 2)]
        out += [fixture(5, n) for n in ("still_while_loop", "python_unrolled", "scan_without_mask")]
    elif number == 6:
        idiom_text = f"{ref.text}\n\n{(IDIOMS / 'jaxpr_recursive.py').read_text()}"
        idiom = Variant("idiom-recursive", idiom_text, "idiom", "recursive")
        out += [idiom, Variant("renamed-1", rename_copy(idiom.text, "p1", stub), "renamed", "recursive", of=idiom.name),
                Variant("renamed-ref-1", rename_copy(ref.text, "t1", stub), "renamed", "reference", of=ref.name)]
        out += [fixture(6, n) for n in ("top_level_only", "skips_seen_subjaxprs")]
        old = fixture(6, "answers_from_old_jax")  # only answers() differs: count_primitives is the reference's
        out.append(dataclasses.replace(old, family="reference"))
    out.append(Variant("stub", stub, "stub", "stub"))
    return out


@dataclasses.dataclass(frozen=True)
class ClassLayout:
    root: Path
    forks: dict[str, Path]  # fork name -> folder
    assignment: dict[str, dict[int, Variant]]  # fork name -> exercise -> variant


def build_class(root: Path, forks: int = 32) -> ClassLayout:
    """Write ``forks`` forks under ``root`` (idempotent: the same files each time)."""
    table = {n: variants(n) for n in EXERCISE_DIRS}
    paths, assignment = {}, {}
    for k in range(forks):
        name = f"learner-{k:02d}"
        folder = root / name
        assignment[name] = {}
        for number, vs in table.items():
            v = vs[(k + number) % len(vs)]
            sub, file = EXERCISE_DIRS[number]
            target = folder / "exercises" / sub / file
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists() or target.read_text(encoding="utf-8") != v.text:
                target.write_text(v.text, encoding="utf-8")
            assignment[name][number] = v
        paths[name] = folder
    return ClassLayout(root, paths, assignment)


def forks_with(layout: ClassLayout, number: int, variant: str) -> list[str]:
    """The forks whose file for exercise ``number`` is ``variant``."""
    return sorted(f for f, table in layout.assignment.items() if table[number].name == variant)


def analyse_class(base: Path, numbers: tuple[int, ...] = (3, 5, 6), jobs: int = 2):
    """The class under ``base`` compared for each exercise, cached in ``base/class.sqlite``:
    the first call grades and measures every distinct file once, later calls (another test
    module of the same session) read the cache.  Every file is the course's own (no cheat among
    them), so their sandboxes share one compile cache (``grader.cache.course_cache``).  Returns
    (layout, gradebook, {number: Analysis})."""
    from grader import cache
    from grader.compare import run
    from grader.manifest import load

    layout = build_class(base / "forks")
    gradebook = base / "class.sqlite"
    manifest = load(REPO / "exercises" / "manifest.toml")
    analyses = {}
    with cache.course_cache() as shared:
        for n in numbers:
            opts = run.Options(n, [str(p) for p in layout.forks.values()], REPO, gradebook=gradebook, jobs=jobs,
                               course_cache=shared)
            analyses[n] = run.analyse(opts, manifest)
    return layout, gradebook, analyses

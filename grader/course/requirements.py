"""The requirement map: every sentence of a statement that asks for something is graded.

Each exercise keeps ``solutions/<dir>/requirements.toml`` (private, beside the hidden checks: it
names fixtures).  It ties each requirement of the statement (``exercises/<dir>/README.md``) to
the checks that fail without it and to the known-wrong fixtures that show it::

    [[requirement]]
    id = "donate-exactly"                      # short, unique in the exercise
    says = "donating exactly `params` and `momentum`"   # the statement's own words
    checks = ["momentum_step_donates"]         # hidden checks that fail when only this is broken
    public = ["momentum_step_small"]           # public checks that catch it on fixed inputs, or []
    public_gap = ""                            #   ... and then why no public check can
    fixtures = ["momentum_not_donated"]        # fixtures/<dir>/<name> whose mistake breaks it

    [[not_graded]]                             # a requirement-like sentence nothing checks
    says = "..."
    why = "..."                                # and the statement says "not graded" beside it

``problems(...)`` lists everything wrong with one exercise's map; ``grade verify`` reports
them as static problems (so ``make test`` fails on them) and ``tests/test_requirements.py``
runs it on the whole course.  A requirement-like sentence of the statement's task (its level-2
sections but "The idea", "What the grader checks" and "Running it": a sentence with *must*, *exactly*, *each*,
*every*, *do not*, *never*, *only*, *at most*, *at least*, *keep*, *return*, *should*) that no
``says`` covers is a problem too: a statement cannot ask for something silently ungraded.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path

FILE = "requirements.toml"
SECTION = re.compile(r"^##\s+(?P<title>.*)$", re.MULTILINE)
#: Level-2 sections that explain or describe rather than ask: everything else is the task.
NOT_TASK = re.compile(r"^(the idea|what the grader checks|checks|running it|commands)\b", re.IGNORECASE)
FENCE = re.compile(r"^```.*?^```[^\n]*$", re.MULTILINE | re.DOTALL)
ASKS = re.compile(r"\b(must|exactly|each|every|do not|don't|never|only|at most|at least|keeps?|returns?|should)\b",
                  re.IGNORECASE)
NOT_GRADED = re.compile(r"not graded", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?:])\s+(?=[A-Z`*(_\"'])")
_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")


@dataclasses.dataclass(frozen=True)
class Requirement:
    id: str
    says: str
    checks: tuple[str, ...]
    public: tuple[str, ...]
    public_gap: str
    fixtures: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class NotGraded:
    says: str
    why: str


@dataclasses.dataclass(frozen=True)
class RequirementMap:
    requirements: tuple[Requirement, ...]
    not_graded: tuple[NotGraded, ...]


def squash(text: str) -> str:
    """Whitespace collapsed, so a quote may wrap differently from the statement."""
    return " ".join(text.split())


def load(path: Path) -> RequirementMap:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    reqs = tuple(Requirement(id=str(r.get("id", "")), says=str(r.get("says", "")),
                             checks=tuple(r.get("checks", ())), public=tuple(r.get("public", ())),
                             public_gap=str(r.get("public_gap", "")), fixtures=tuple(r.get("fixtures", ())))
                 for r in data.get("requirement", []))
    ungraded = tuple(NotGraded(says=str(n.get("says", "")), why=str(n.get("why", "")))
                     for n in data.get("not_graded", []))
    return RequirementMap(reqs, ungraded)


def task_sentences(statement: str) -> list[str]:
    """The sentences of the statement's task sections (every level-2 section but the idea, the
    checks and how to run it; code blocks left out), whitespace collapsed."""
    heads = list(SECTION.finditer(statement))
    parts = [statement[h.end(): heads[i + 1].start() if i + 1 < len(heads) else len(statement)]
             for i, h in enumerate(heads) if not NOT_TASK.match(h.group("title").strip())]
    task = FENCE.sub("\n\n", "\n\n".join(parts))
    sentences = []
    for block in re.split(r"\n\s*\n|\n(?=\s*(?:[-*+]|\d+\.)\s)|\n(?=#)", task):
        block = squash(block.lstrip("#-*+ "))
        sentences += [s for s in _SENTENCE_END.split(block) if s]
    return sentences


def asks(sentence: str) -> bool:
    return bool(ASKS.search(sentence))


def _covers(says: str, sentence: str) -> bool:
    a, b = squash(says).lower(), squash(sentence).lower()
    return bool(a) and (a in b or b in a)


def problems(number: int, statement: str, rmap: RequirementMap, checks: dict[str, str],
             fixtures: dict[str, tuple[str, ...]]) -> list[str]:
    """Everything wrong with exercise ``number``'s requirement map.

    ``checks``: check name -> visibility; ``fixtures``: known-wrong fixture name -> its must_fail.
    """
    out: list[str] = []
    where = f"exercise {number} requirements"
    text = squash(statement).lower()
    seen: set[str] = set()
    for r in rmap.requirements:
        label = f"{where} [{r.id or '?'}]"
        if not _ID.match(r.id):
            out.append(f"{label}: id must be lowercase words joined by '-'")
        elif r.id in seen:
            out.append(f"{label}: id used twice")
        seen.add(r.id)
        if not r.says.strip() or squash(r.says).lower() not in text:
            out.append(f"{label}: `says` is not words of the statement: {r.says!r}")
        if not r.checks:
            out.append(f"{label}: no hidden check tests it")
        for c in r.checks:
            if checks.get(c) != "hidden":
                out.append(f"{label}: {c!r} is not a hidden check of the exercise")
        for c in r.public:
            if checks.get(c) != "public":
                out.append(f"{label}: {c!r} is not a public check of the exercise")
        if not r.public and not r.public_gap.strip():
            out.append(f"{label}: no public check catches it, and public_gap does not say why")
        if not r.fixtures:
            out.append(f"{label}: no known-wrong fixture shows it")
        for f in r.fixtures:
            if f not in fixtures:
                out.append(f"{label}: fixture {f!r} is not a known-wrong fixture of the exercise")
            elif not set(fixtures[f]) & set(r.checks):
                out.append(f"{label}: fixture {f!r} must_fail names none of {list(r.checks)}")
    for n in rmap.not_graded:
        if not n.says.strip() or squash(n.says).lower() not in text:
            out.append(f"{where}: not_graded `says` is not words of the statement: {n.says!r}")
        elif not n.why.strip():
            out.append(f"{where}: not_graded {n.says!r} does not say why")
        elif not _said_not_graded(statement, n.says):
            out.append(f"{where}: the statement must say 'not graded' beside {n.says!r}")
    quotes = [r.says for r in rmap.requirements] + [n.says for n in rmap.not_graded]
    for sentence in task_sentences(statement):
        if asks(sentence) and not any(_covers(q, sentence) for q in quotes):
            out.append(f"{where}: this sentence asks for something, and no requirement covers it: {sentence!r}")
    return out


def _said_not_graded(statement: str, says: str) -> bool:
    """Whether the paragraph or list item holding ``says`` also says "not graded"."""
    for block in re.split(r"\n\s*\n|\n(?=\s*(?:[-*+]|\d+\.)\s)", statement):
        if squash(says).lower() in squash(block).lower():
            return bool(NOT_GRADED.search(block))
    return False


def check_exercise(ex, course: Path) -> list[str]:
    """``problems`` for a manifest exercise of the course at ``course``."""
    path = course / "solutions" / ex.dir / FILE
    if not path.is_file():
        return [f"exercise {ex.number}: no requirement map (solutions/{ex.dir}/{FILE})"]
    try:
        rmap = load(path)
    except (tomllib.TOMLDecodeError, TypeError, ValueError) as exc:
        return [f"exercise {ex.number}: {FILE} does not load: {exc}"]
    readme = course / "exercises" / ex.dir / "README.md"
    statement = readme.read_text(encoding="utf-8") if readme.is_file() else ""
    fixtures = {}
    for folder in sorted((course / "fixtures" / ex.dir).glob("*/")):
        meta_path = folder / "fixture.toml"
        if meta_path.is_file():
            meta = tomllib.loads(meta_path.read_text(encoding="utf-8"))
            if meta.get("kind") == "wrong":
                fixtures[folder.name] = tuple(meta.get("must_fail", ()))
    checks = {c.name: c.visibility for c in ex.checks}
    return problems(ex.number, statement, rmap, checks, fixtures)

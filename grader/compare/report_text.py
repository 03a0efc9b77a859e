"""`grade compare`'s terminal summary (rich): the class at a glance, or two solutions side by side.

A pure function of the report (``grader.compare.model``): ``render(report, console)``.

Much of a report comes from learners: labels (folder and fork names), failure messages
(a learner's exception text), measured facts.  None of it is ever parsed as rich markup:
every such string reaches rich as a plain ``Text`` (``_t``), with control characters shown
as ``\\xNN`` (``grader.reports.learner_text.printable``), so ``[/bold]`` is printed as
written and an escape sequence or a ``[link=...]`` never reaches the terminal.  Markup is
used only in this module's own fixed strings.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from grader.reports.learner_text import printable

_STATUS = {"passed": ("P", "green"), "failed": ("F", "red"), "error": ("E", "red"), "not_run": ("-", "dim"),
           "blocked": ("B", "yellow"), "integrity": ("I", "magenta")}


def _t(value: Any, style: str = "") -> Text:
    """Any text from a report as plain, printable rich Text (never markup)."""
    return Text(printable("" if value is None else str(value)), style=style)


def _vector(items: list[tuple[str, str]] | list[dict[str, str]]) -> Text:
    text = Text()
    for item in items:
        status = item["status"] if isinstance(item, dict) else item[1]
        mark, style = _STATUS.get(status, ("?", "yellow"))
        text.append(mark, style=style)
    return text


def _members(labels: list[str], limit: int = 6) -> Text:
    shown = ", ".join(labels[:limit])
    return _t(shown + (f" (+{len(labels) - limit} more)" if len(labels) > limit else ""))


def _bar(n: int, most: int, width: int = 30) -> str:
    return "█" * max(1 if n else 0, round(width * n / most)) if most else ""


def _table(*headers: Text | str, **kwargs: Any) -> Table:
    """A table whose headers may be learner text (labels): given as Text, never markup."""
    table = Table(**kwargs)
    for header in headers:
        table.add_column(header)
    return table


def _line(*parts: Text | str) -> Text:
    out = Text()
    for p in parts:
        out.append(p if isinstance(p, Text) else Text(p))
    return out


def _header(r: dict[str, Any], console: Console, subtitle: str) -> None:
    ex = r["exercise"]
    console.print(_line(_t(f"Exercise {ex['number']}: {ex['title']}", "bold"), " ", _t(f"({subtitle})", "dim")))
    for note in r["notes"]:
        console.print(_t(f"  · {note}", "dim"))


def _scores(r: dict[str, Any], console: Console) -> None:
    c = r["class"]
    dist = c["score_distribution"]
    most = max(dist.values(), default=0)
    console.print(_line("\n", _t("Scores", "bold"), f"  {c['graded']} graded of {c['submissions']}; mean "
                        f"{c['mean_score']} of {c['max_score']}; {c['full_marks']} with full marks"))
    for score, n in dist.items():
        console.print(f"  {score:>3}  {_bar(n, most)} {n}", markup=False)
    table = Table("check", "visibility", "passed", "rate", title="Pass rate per check", title_justify="left")
    for p in c["pass_rate"]:
        rate = "-" if p["rate"] is None else f"{p['rate'] * 100:.0f}%"
        table.add_row(_t(p["check"]), _t(p["visibility"]), f"{p['passed']}/{p['of']}", rate)
    console.print(table)


def _outcomes(r: dict[str, Any], console: Console) -> None:
    checks = " ".join(c["name"] for c in r["exercise"]["checks"])
    table = Table("#", "size", "score", "outcome", "most common failure", "members",
                  title=_t(f"Groups by outcome (P passed, F failed, B blocked, I integrity, E error, - not run: "
                           f"{checks})"), title_justify="left")
    for g in r["outcome_groups"]:
        top = Text()
        if g["failing"] and g["failing"][0]["messages"]:
            f = g["failing"][0]
            top = _t(f"{f['check']}: {f['messages'][0]['text']}")
            if f.get("private"):
                top.append("\n")
                top.append(_t(f"instructor: {f['private'][0]['text']}", "dim"))
        table.add_row(str(g["id"]), str(g["size"]), f"{g['score']}/{g['max_score']}", _vector(g["vector"]), top,
                      _members(g["members"]))
    console.print(table)


def _score_text(scores: dict[str, int]) -> Text:
    return _t(", ".join(f"{k}:{v}" for k, v in sorted(scores.items(), key=lambda kv: -int(kv[0]))))


def _vs_reference(s: dict[str, Any]) -> Text:
    if s["is_reference"]:
        return _t("the reference's strategy", "cyan")
    diff = s.get("vs_reference")
    if not diff:
        return _t("-", "dim")
    text = Text()
    if diff["adds"]:
        text.append(_t("+ " + "; ".join(diff["adds"][:3]), "green"))
    if diff["lacks"]:
        if text:
            text.append("\n")
        text.append(_t("- " + "; ".join(diff["lacks"][:3]), "red"))
    return text or _t("same features", "dim")


def _strategies(r: dict[str, Any], console: Console) -> None:
    table = Table("#", "size", "strategy", "scores", "vs the reference", "representative", "variants",
                  title="Strategies (what each approach is; variants: exact fingerprints inside it)"
                  + ("" if r["spec"]["present"] else " -- normalised source only: no spec"), title_justify="left")
    for s in r["strategies"]:
        name = _t(s["name"], "bold" if s["named"] else "")
        if not s["named"] and s["measured"]:
            name.append(_t(" (clustered)", "dim"))
        table.add_row(str(s["id"]), str(s["size"]), name, _score_text(s["scores"]), _vs_reference(s),
                      _t(s["representative"]), _t(", ".join(f"v{v}" for v in s["variants"])))
    console.print(table)


def _variants(r: dict[str, Any], console: Console) -> None:
    table = Table("#", "strategy", "size", "variant", "scores", "representative",
                  title="Variants by strategy", title_justify="left")
    for v in r["variants"]:
        label = _t(v["label"])
        if v["is_reference"]:
            label.append(_t(" (reference variant)", "cyan"))
        table.add_row(f"v{v['id']}", str(v["strategy"]), str(v["size"]), label, _score_text(v["scores"]),
                      _t(v["representative"]))
    console.print(table)


def _spread(r: dict[str, Any], console: Console) -> None:
    rows = r["class"]["measurements"]
    if not rows:
        return
    table = Table("measurement", "measured", "compiles (n: submissions)", "run time min/median/max",
                  title="Compile count and run-time spread", title_justify="left")
    for m in rows:
        s = m["seconds"]
        times = "-" if not s else " / ".join(f"{s[k] * 1e3:.3g}" for k in ("min", "median", "max")) + " ms"
        table.add_row(_t(m["name"]), f"{m['ok']}/{m['measured']}",
                      _t(", ".join(f"{k}: {v}" for k, v in m["compiles"].items()) or "-"), times)
    console.print(table)


def _near(r: dict[str, Any], console: Console) -> None:
    n = r["near_identical"]
    if not n["clusters"]:
        console.print(_line("\n", _t("Near-identical files", "bold"), "  none"))
        return
    console.print(_line("\n", _t("Near-identical files", "bold"), " ",
                        _t(f"({n['wording']}; {n['pairs_total']} pairs)", "dim")))
    for c in n["clusters"]:
        line = _line("  · ", _members(c["members"], 10))
        if c["matches_reference"]:
            line.append(_t(" (same as the reference solution)", "cyan"))
        console.print(line)


def render_class(r: dict[str, Any], console: Console) -> None:
    _header(r, console, f"{r['class']['submissions']} submissions")
    _strategies(r, console)
    _scores(r, console)
    _outcomes(r, console)
    _variants(r, console)
    _spread(r, console)
    _near(r, console)
    s = r["stats"]
    console.print(_t(f"\n{s.get('fingerprints_from_cache', 0)} fingerprints from the cache, "
                     f"{s.get('measured_now', 0)} measured and {s.get('graded_now', 0)} graded now; "
                     f"{s.get('seconds', 0)} s", "dim"))


def render_pair(r: dict[str, Any], console: Console) -> None:
    from rich.syntax import Syntax

    a, b = r["a"], r["b"]
    _header(r, console, f"{a['label']} and {b['label']}")
    score = lambda s: "-" if s["score"] is None else f"{s['score']}/{s['max_score']}"  # noqa: E731
    table = _table("", _t(a["label"]), _t(b["label"]))
    table.add_row("score", score(a), score(b))
    for c in r["checks"]:
        table.add_row(_t(c["check"]), _t(c["a"]), _t(c["b"]))
    table.add_row("strategy", _t(a.get("strategy")), _t(b.get("strategy")))
    table.add_row("variant", _t(a["approach"]), _t(b["approach"]))
    console.print(table)
    facts = _table("measurement", "outputs agree", "same jaxpr", _t(a["label"]), _t(b["label"]),
                   title="Measured on the same inputs", title_justify="left")
    for m in r["measurements"]:
        facts.add_row(_t(m["name"]), _yes(m["outputs_agree"]), _yes(m["same_jaxpr"]), _facts(m["a"]), _facts(m["b"]))
    if r["measurements"]:
        console.print(facts)
    line = _line("same strategy: ", _yes(r.get("same_strategy")), "; same variant: ", _yes(r["same_approach"]),
                 f"; source similarity {r['source_similarity']:.0%}")
    if r["near_identical"]:
        line.append(_t(f" ({r['wording']})"))
    console.print(line)
    if r["diff"]:
        console.print(Syntax(printable(r["diff"]), "diff", theme="ansi_light"))


def _yes(value: bool | None) -> Text:
    return _t("-") if value is None else (_t("yes", "green") if value else _t("no", "red"))


def _facts(f: dict[str, Any]) -> Text:
    if not f:
        return _t("-")
    bits = [str(f["state"])]
    for key, unit in (("compiles", " compiles"), ("eqns", " eqns")):
        if f.get(key) is not None:
            bits.append(f"{f[key]}{unit}")
    if isinstance(f.get("flops"), float) and f["flops"] >= 0:
        bits.append(f"{f['flops']:.4g} flops")
    if isinstance(f.get("seconds"), float):
        bits.append(f"{f['seconds'] * 1e3:.3g} ms")
    return _t(", ".join(bits))


def render(report: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    (render_pair if report["kind"] == "pair" else render_class)(report, console)

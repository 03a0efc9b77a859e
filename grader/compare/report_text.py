"""`grade compare`'s terminal summary (rich): the class at a glance, or two solutions side by side.

A pure function of the report (``grader.compare.model``): ``render(report, console)``.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

_STATUS = {"passed": ("P", "green"), "failed": ("F", "red"), "error": ("E", "red"), "not_run": ("-", "dim"),
           "blocked": ("B", "yellow"), "integrity": ("I", "magenta")}


def _vector(items: list[tuple[str, str]] | list[dict[str, str]]) -> Text:
    text = Text()
    for item in items:
        status = item["status"] if isinstance(item, dict) else item[1]
        mark, style = _STATUS.get(status, ("?", "yellow"))
        text.append(mark, style=style)
    return text


def _members(labels: list[str], limit: int = 6) -> str:
    shown = ", ".join(labels[:limit])
    return shown + (f" (+{len(labels) - limit} more)" if len(labels) > limit else "")


def _bar(n: int, most: int, width: int = 30) -> str:
    return "█" * max(1 if n else 0, round(width * n / most)) if most else ""


def _header(r: dict[str, Any], console: Console, subtitle: str) -> None:
    ex = r["exercise"]
    console.print(f"[bold]Exercise {ex['number']}: {ex['title']}[/bold] [dim]({subtitle})[/dim]")
    for note in r["notes"]:
        console.print(f"  [dim]· {note}[/dim]")


def _scores(r: dict[str, Any], console: Console) -> None:
    c = r["class"]
    dist = c["score_distribution"]
    most = max(dist.values(), default=0)
    console.print(f"\n[bold]Scores[/bold]  {c['graded']} graded of {c['submissions']}; mean {c['mean_score']} of "
                  f"{c['max_score']}; {c['full_marks']} with full marks")
    for score, n in dist.items():
        console.print(f"  {score:>3}  {_bar(n, most)} {n}")
    table = Table("check", "visibility", "passed", "rate", title="Pass rate per check", title_justify="left")
    for p in c["pass_rate"]:
        rate = "-" if p["rate"] is None else f"{p['rate'] * 100:.0f}%"
        table.add_row(p["check"], p["visibility"], f"{p['passed']}/{p['of']}", rate)
    console.print(table)


def _outcomes(r: dict[str, Any], console: Console) -> None:
    checks = " ".join(c["name"] for c in r["exercise"]["checks"])
    table = Table("#", "size", "score", "outcome", "most common failure", "members",
                  title=f"Groups by outcome (P passed, F failed, B blocked, I integrity, E error, - not run: {checks})", title_justify="left")
    for g in r["outcome_groups"]:
        top = ""
        if g["failing"] and g["failing"][0]["messages"]:
            f = g["failing"][0]
            top = f"{f['check']}: {f['messages'][0]['text']}"
            if f.get("private"):
                top += f"\n[dim]instructor: {f['private'][0]['text']}[/dim]"
        table.add_row(str(g["id"]), str(g["size"]), f"{g['score']}/{g['max_score']}", _vector(g["vector"]), top,
                      _members(g["members"]))
    console.print(table)


def _approaches(r: dict[str, Any], console: Console) -> None:
    table = Table("#", "size", "approach", "scores", "representative",
                  title="Groups by approach" + ("" if r["spec"]["present"] else " (normalised source only: no spec)"),
                  title_justify="left")
    for g in r["approach_groups"]:
        label = g["label"] + (" [cyan](reference approach)[/cyan]" if g["is_reference"] else "")
        scores = ", ".join(f"{k}:{v}" for k, v in sorted(g["scores"].items(), key=lambda kv: -int(kv[0])))
        table.add_row(str(g["id"]), str(g["size"]), label, scores, g["representative"])
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
        table.add_row(m["name"], f"{m['ok']}/{m['measured']}",
                      ", ".join(f"{k}: {v}" for k, v in m["compiles"].items()) or "-", times)
    console.print(table)


def _near(r: dict[str, Any], console: Console) -> None:
    n = r["near_identical"]
    if not n["clusters"]:
        console.print("\n[bold]Near-identical files[/bold]  none")
        return
    console.print(f"\n[bold]Near-identical files[/bold] [dim]({n['wording']}; {n['pairs_total']} pairs)[/dim]")
    for c in n["clusters"]:
        ref = " [cyan](same as the reference solution)[/cyan]" if c["matches_reference"] else ""
        console.print(f"  · {_members(c['members'], 10)}{ref}")


def render_class(r: dict[str, Any], console: Console) -> None:
    _header(r, console, f"{r['class']['submissions']} submissions")
    _scores(r, console)
    _outcomes(r, console)
    _approaches(r, console)
    _spread(r, console)
    _near(r, console)
    s = r["stats"]
    console.print(f"\n[dim]{s.get('fingerprints_from_cache', 0)} fingerprints from the cache, "
                  f"{s.get('measured_now', 0)} measured and {s.get('graded_now', 0)} graded now; "
                  f"{s.get('seconds', 0)} s[/dim]")


def render_pair(r: dict[str, Any], console: Console) -> None:
    from rich.syntax import Syntax

    a, b = r["a"], r["b"]
    _header(r, console, f"{a['label']} and {b['label']}")
    score = lambda s: "-" if s["score"] is None else f"{s['score']}/{s['max_score']}"  # noqa: E731
    table = Table("", a["label"], b["label"])
    table.add_row("score", score(a), score(b))
    for c in r["checks"]:
        table.add_row(c["check"], str(c["a"]), str(c["b"]))
    table.add_row("approach", a["approach"], b["approach"])
    console.print(table)
    facts = Table("measurement", "outputs agree", "same jaxpr", a["label"], b["label"],
                  title="Measured on the same inputs", title_justify="left")
    for m in r["measurements"]:
        facts.add_row(m["name"], _yes(m["outputs_agree"]), _yes(m["same_jaxpr"]), _facts(m["a"]), _facts(m["b"]))
    if r["measurements"]:
        console.print(facts)
    look = f" ({r['wording']})" if r["near_identical"] else ""
    console.print(f"same approach: {_yes(r['same_approach'])}; source similarity {r['source_similarity']:.0%}{look}")
    if r["diff"]:
        console.print(Syntax(r["diff"], "diff", theme="ansi_light"))


def _yes(value: bool | None) -> str:
    return "-" if value is None else ("[green]yes[/green]" if value else "[red]no[/red]")


def _facts(f: dict[str, Any]) -> str:
    if not f:
        return "-"
    bits = [f["state"]]
    for key, unit in (("compiles", " compiles"), ("eqns", " eqns")):
        if f.get(key) is not None:
            bits.append(f"{f[key]}{unit}")
    if isinstance(f.get("flops"), float) and f["flops"] >= 0:
        bits.append(f"{f['flops']:.4g} flops")
    if isinstance(f.get("seconds"), float):
        bits.append(f"{f['seconds'] * 1e3:.3g} ms")
    return ", ".join(bits)


def render(report: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    (render_pair if report["kind"] == "pair" else render_class)(report, console)

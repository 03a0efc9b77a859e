"""`grade compare --html OUT`: one self-contained HTML file, for a browser or an email.

Everything is inline: CSS, a little JavaScript (opening diffs, filtering the table),
plots as SVG (``grader.compare.plots``), code highlighted by pygments.  A
Content-Security-Policy forbids every network load, so the page works offline and
attached to an email.  ``render`` takes the report (``grader.compare.model``) and
returns the page; it shows what the report holds and nothing more (no private text
unless the report was made with ``--instructor``).
"""

from __future__ import annotations

from typing import Any

from grader.compare import plots
from grader.compare.html_page import CSP, CSS, escape as _e, page_head

_JS = """
(function () {
  var dialog = document.getElementById('diff-view');
  function openDiff(id, title) {
    var tpl = document.getElementById(id);
    if (!tpl || !dialog) { return; }
    var body = dialog.querySelector('.body');
    body.innerHTML = '';
    body.appendChild(tpl.content.cloneNode(true));
    dialog.querySelector('h2').textContent = title;
    dialog.showModal();
  }
  document.querySelectorAll('button[data-diff]').forEach(function (b) {
    b.addEventListener('click', function () { openDiff(b.getAttribute('data-diff'), b.getAttribute('data-title')); });
  });
  var close = document.getElementById('diff-close');
  if (close) { close.addEventListener('click', function () { dialog.close(); }); }
  var filter = document.getElementById('filter');
  if (filter) {
    filter.addEventListener('input', function () {
      var q = filter.value.toLowerCase();
      document.querySelectorAll('#submission-table tbody tr').forEach(function (tr) {
        tr.style.display = tr.textContent.toLowerCase().indexOf(q) >= 0 ? '' : 'none';
      });
    });
  }
})();
"""


class _Page:
    """Collects the diff templates a page needs while its sections are rendered."""

    def __init__(self) -> None:
        from pygments.formatters import HtmlFormatter

        self.formatter = HtmlFormatter(cssclass="hl")
        self.templates: list[str] = []

    def highlight(self, text: str, lexer_name: str) -> str:
        from pygments import highlight
        from pygments.lexers import DiffLexer, PythonLexer

        lexer = DiffLexer() if lexer_name == "diff" else PythonLexer()
        return highlight(text, lexer, self.formatter)

    def diff_button(self, diff: str | None, caption: str, title: str) -> str:
        if diff is None:
            return '<span class="muted">no file</span>'
        tid = f"diff-{len(self.templates)}"
        body = self.highlight(diff, "diff") if diff else '<p class="muted">identical files</p>'
        self.templates.append(f'<template id="{tid}">{body}</template>')
        return f'<button type="button" data-diff="{tid}" data-title="{_e(title)}">{_e(caption)}</button>'

    def code_button(self, code: str | None, caption: str, title: str) -> str:
        if code is None:
            return '<span class="muted">no file</span>'
        tid = f"diff-{len(self.templates)}"
        self.templates.append(f'<template id="{tid}">{self.highlight(code, "python")}</template>')
        return f'<button type="button" data-diff="{tid}" data-title="{_e(title)}">{_e(caption)}</button>'

    def css(self) -> str:
        return CSS + self.formatter.get_style_defs(".hl")


def _status(status: str) -> str:
    cls = status if status in ("passed", "failed", "error", "not_run", "blocked", "integrity") else "other"
    return f'<span class="st {cls}" title="{_e(status)}"></span>'


def _document(title: str, page: _Page, body: str) -> str:
    return (page_head(title, page.css()) + f"<body>{body}"
            '<dialog id="diff-view"><header><h2>diff</h2><button type="button" id="diff-close">close</button>'
            '</header><div class="body"></div></dialog>'
            + "".join(page.templates) + f"<script>{_JS}</script></body></html>\n")


def _header(r: dict[str, Any], subtitle: str) -> str:
    ex = r["exercise"]
    notes = "".join(f"<li>{_e(n)}</li>" for n in r["notes"])
    who = "instructor view: includes hidden checks' private text" if r["instructor"] else \
        "learner-facing messages only (run with --instructor for hidden checks' private text)"
    return (f"<header><h1>Exercise {ex['number']}: {_e(ex['title'])}</h1>"
            f'<p class="meta">{_e(subtitle)} &middot; grader {_e(r["grader_version"])}, JAX {_e(r["jax_version"])}'
            f" &middot; {_e(r['generated_at'])} &middot; {_e(who)}</p>"
            f'<ul class="notes">{notes}</ul></header>')


# --- the class ------------------------------------------------------------------------------

def _figure(svg: str | None, caption: str, fid: str) -> str:
    if not svg:
        return ""
    return f'<figure id="{fid}">{svg}<figcaption>{_e(caption)}</figcaption></figure>'


def _class_view(r: dict[str, Any]) -> str:
    c = r["class"]
    figs = [
        _figure(plots.score_distribution(c["score_distribution"], c["max_score"]), "score distribution", "fig-scores"),
        _figure(plots.pass_rates(c["pass_rate"]), "pass rate per check", "fig-pass"),
        _figure(plots.group_sizes([g["size"] for g in r["outcome_groups"]], [s["size"] for s in r["strategies"]],
                                  [v["size"] for v in r["variants"]]), "groups by size", "fig-groups"),
        _figure(plots.spread(c["measurements"]), "compile count and run-time spread", "fig-spread"),
    ]
    rows = "".join(
        f"<tr><td>{_e(p['check'])}</td><td>{_e(p['visibility'])}</td><td class=num>{p['points']}</td>"
        f"<td class=num>{p['passed']}/{p['of']}</td>"
        f"<td class=num>{_pct(p['rate'])}</td></tr>" for p in c["pass_rate"])
    mrows = "".join(
        f"<tr><td>{_e(m['name'])}</td><td class=num>{m['ok']}/{m['measured']}</td>"
        f"<td>{_e(', '.join(f'{k}: {v}' for k, v in m['compiles'].items()))}</td>"
        f"<td>{_e(_spread_text(m['seconds'], 1e3, 'ms'))}</td><td>{_e(_spread_text(m['eqns'], 1, ''))}</td>"
        f"<td>{_e(_spread_text(m['flops'], 1, ''))}</td></tr>" for m in c["measurements"])
    mtable = ("<h3>Measured on fixed inputs</h3><table><thead><tr><th>measurement</th><th class=num>measured</th>"
              "<th>compiles (count: submissions)</th><th>run time min / median / max</th><th>jaxpr equations</th>"
              f"<th>flops</th></tr></thead><tbody>{mrows}</tbody></table>") if mrows else ""
    summary = (f"<p>{c['submissions']} submissions, {c['graded']} graded"
               + (f", {c['not_graded']} not graded" if c["not_graded"] else "")
               + (f", {c['grader_errors']} grader errors" if c["grader_errors"] else "")
               + f"; mean score {_e(c['mean_score'])} of {c['max_score']}; {c['full_marks']} with full marks.</p>")
    return (f'<section id="class-view"><h2>Class view</h2>{summary}<div class="plots">{"".join(figs)}</div>'
            "<h3>Pass rate per check</h3><table><thead><tr><th>check</th><th>visibility</th><th class=num>points</th>"
            f"<th class=num>passed</th><th class=num>rate</th></tr></thead><tbody>{rows}</tbody></table>{mtable}</section>")


def _pct(rate: float | None) -> str:
    return "" if rate is None else f"{rate * 100:.0f}%"


def _spread_text(s: dict[str, float] | None, scale: float, unit: str) -> str:
    if not s:
        return "-"
    return " / ".join(f"{s[k] * scale:.3g}" for k in ("min", "median", "max")) + (f" {unit}" if unit else "")


def _members(labels: list[str], limit: int = 12) -> str:
    shown = ", ".join(_e(x) for x in labels[:limit])
    if len(labels) <= limit:
        return shown
    rest = ", ".join(_e(x) for x in labels[limit:])
    return f"{shown} <details><summary>and {len(labels) - limit} more</summary>{rest}</details>"


def _messages(f: dict[str, Any]) -> str:
    items = "".join(f"<li>{_e(m['text'])} <span class=muted>({m['count']}x)</span></li>" for m in f["messages"])
    private = "".join(f"<li>{_e(m['text'])} <span class=muted>({m['count']}x)</span></li>"
                      for m in f.get("private", []))
    out = f"<b>{_e(f['check'])}</b> <span class=muted>{_e(f['visibility'])}</span><ul>{items}</ul>"
    return out + (f"<div class=muted>instructor only:</div><ul>{private}</ul>" if private else "")


def _outcome_groups(r: dict[str, Any]) -> str:
    rows = []
    for g in r["outcome_groups"]:
        vector = "".join(_status(v["status"]) for v in g["vector"])
        names = " ".join(f'<span class=muted title="{_e(v["status"])}">{_e(v["check"])}</span>'
                         for v in g["vector"] if v["status"] != "passed")
        failing = "".join(_messages(f) for f in g["failing"]) or '<span class="ok">every check passed</span>'
        rows.append(f"<tr><td class=num>#{g['id']}</td><td class=num>{g['size']}</td>"
                    f"<td class=num>{g['score']}/{g['max_score']}</td><td>{vector}<div>{names}</div></td>"
                    f"<td>{failing}</td><td>{_members(g['members'])}</td></tr>")
    seen = {v["status"] for g in r["outcome_groups"] for v in g["vector"]}
    legend = " ".join(f"{_status(s)} {s}" for s in ("passed", "failed", "blocked", "integrity", "error", "not_run")
                      if s in seen or s in ("passed", "failed"))
    checks = ", ".join(_e(c["name"]) for c in r["exercise"]["checks"])
    return ('<section id="outcome-groups"><h2>Groups by outcome</h2>'
            f"<p class=muted>Which checks passed and failed together, in manifest order ({checks}). {legend}</p>"
            '<table class="group-table" id="outcome-table"><thead><tr><th class=num>group</th><th class=num>size</th>'
            "<th class=num>score</th><th>outcome</th><th>most common failure messages</th><th>members</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></section>")


def _facts_text(facts: dict[str, Any]) -> str:
    parts = []
    for name, f in facts.items():
        bits = [f"{name}: {f['state'].replace('_', ' ')}"]
        if f.get("compiles") is not None:
            bits.append(f"{f['compiles']} compiles")
        if f.get("eqns") is not None:
            bits.append(f"{f['eqns']} eqns")
        if isinstance(f.get("flops"), float) and f["flops"] >= 0:
            bits.append(f"{f['flops']:.4g} flops")
        if isinstance(f.get("seconds"), float):
            bits.append(f"{f['seconds'] * 1e3:.3g} ms")
        parts.append(", ".join(bits))
    return "<br>".join(_e(p) for p in parts) or '<span class="muted">source only</span>'


def _feature_list(words: list[str], cls: str = "") -> str:
    return " ".join(f'<span class="tag{" " + cls if cls else ""}">{_e(w)}</span>' for w in words)


def _vs_reference(s: dict[str, Any]) -> str:
    if s["is_reference"]:
        return '<span class="tag ref">the reference solution\'s strategy</span>'
    diff = s.get("vs_reference")
    if not diff:
        return '<span class="muted">-</span>'
    adds = _feature_list(diff["adds"], "add")
    lacks = _feature_list(diff["lacks"], "lack")
    return ((f"<div>adds: {adds}</div>" if adds else "") + (f"<div>lacks: {lacks}</div>" if lacks else "")) \
        or '<span class="muted">the same features</span>'


def _spread_cell(spread: dict[str, Any] | None, max_score: int) -> str:
    if not spread:
        return '<span class="muted">not graded</span>'
    return _e(f"{spread['min']:g} / {spread['median']:g} / {spread['max']:g} of {max_score}")


def _strategies(r: dict[str, Any], page: _Page) -> str:
    rows = []
    max_score = r["exercise"]["max_score"]
    for s in r["strategies"]:
        kind = ('<span class="tag">named by the spec</span>' if s["named"] else
                '<span class="tag">clustered by structure</span>' if s["measured"] else
                '<span class="tag">not measured</span>')
        buttons = [page.code_button(s["representative_code"], "code", f"strategy #{s['id']}: {s['representative']}"),
                   page.diff_button(s["diff_vs_reference"], "diff vs reference",
                                    f"strategy #{s['id']} ({s['representative']}) against the reference solution")]
        variants = " ".join(f'<a href="#variant-{v}">v{v}</a>' for v in s["variants"])
        rows.append(f'<tr id="strategy-{s["id"]}"><td class=num>#{s["id"]}</td><td class=num>{s["size"]}</td>'
                    f"<td><b>{_e(s['name'])}</b> {kind}<div class=muted>{_e(s['how'])}</div>"
                    f"<div>{_feature_list(s['features'])}</div></td>"
                    f"<td>{_spread_cell(s['score_spread'], max_score)}<div class=muted>"
                    f"{_e(_score_pairs(s['scores']))}</div></td><td>{_vs_reference(s)}</td>"
                    f"<td>{_e(s['representative'])}<div>{''.join(buttons)}</div></td><td>{variants}</td>"
                    f"<td>{_members(s['members'])}</td></tr>")
    ref = r["reference"]
    ref_line = (f"The reference solution's strategy: <b>{_e(ref['strategy'])}</b>." if ref.get("strategy")
                else "The reference solution's strategy could not be placed.")
    note = _e(r["spec"]["note"]) if r["spec"]["present"] else "no spec: grouped by normalised source only"
    return ('<section id="strategies"><h2>Strategies</h2>'
            "<p class=muted>What each approach is, read from measured structure (transformations in the jaxpr, "
            "loops and branches, how the program grows with the size, primitive families, compile behaviour; "
            f"the syntax tree's shape for pure-Python functions), never from names. {ref_line} Measured: {note}.</p>"
            '<table class="group-table" id="strategy-table"><thead><tr><th class=num>strategy</th>'
            "<th class=num>size</th><th>what it is</th><th>score min / median / max</th><th>against the reference"
            "</th><th>representative</th><th>variants</th><th>members</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></section>")


def _score_pairs(scores: dict[str, int]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(scores.items(), key=lambda kv: -int(kv[0])))


def _variants(r: dict[str, Any], page: _Page) -> str:
    rows = []
    names = {s["id"]: s["name"] for s in r["strategies"]}
    for g in r["variants"]:
        ref = ' <span class="tag ref">reference variant</span>' if g["is_reference"] else ""
        buttons = [
            page.code_button(g["representative_code"], "code", f"variant v{g['id']}: {g['representative']}"),
            page.diff_button(g["diff_vs_reference"], "diff vs reference",
                             f"variant v{g['id']} ({g['representative']}) against the reference solution"),
        ]
        if g["diff_vs_largest"] is not None:
            buttons.append(page.diff_button(g["diff_vs_largest"], "diff vs its strategy's largest",
                                            f"variant v{g['id']} ({g['representative']}) against the largest "
                                            f"variant of its strategy"))
        rows.append(f'<tr id="variant-{g["id"]}"><td class=num>v{g["id"]}</td>'
                    f'<td><a href="#strategy-{g["strategy"]}">#{g["strategy"]}</a> '
                    f"{_e(names.get(g['strategy'], ''))}</td><td class=num>{g['size']}</td>"
                    f"<td>{_e(g['label'])}{ref}</td><td>{_facts_text(g['facts'])}</td><td>{_e(_score_pairs(g['scores']))}"
                    f"</td><td>{_e(g['representative'])}<div>{''.join(buttons)}</div></td>"
                    f"<td>{_members(g['members'])}</td></tr>")
    return ('<section id="variants"><h2>Variants</h2>'
            "<p class=muted>Inside each strategy, solutions with the exact same fingerprint (canonical jaxpr with "
            "names removed and literals bucketed, compile count, layouts).</p>"
            '<table class="group-table" id="variant-table"><thead><tr><th class=num>variant</th><th>strategy</th>'
            "<th class=num>size</th><th>fingerprint</th><th>measured (representative)</th><th>scores (score: n)</th>"
            f"<th>representative</th><th>members</th></tr></thead><tbody>{''.join(rows)}</tbody></table></section>")


def _near_identical(r: dict[str, Any], page: _Page) -> str:
    n = r["near_identical"]
    if not n["pairs"]:
        return ('<section id="near-identical"><h2>Near-identical files</h2><p class=muted>No two files are '
                f"near-identical after normalisation (overlap of at least {n['threshold']:.0%}).</p></section>")
    clusters = "".join(
        f"<li><span class=\"tag look\">{_e(n['wording'])}</span> {_members(c['members'])}"
        + (' <span class="tag ref">same as the reference solution</span>' if c["matches_reference"] else "")
        + "</li>" for c in n["clusters"])
    rows = "".join(
        f"<tr><td>{_e(p['a'])}</td><td>{_e(p['b'])}</td><td class=num>{p['similarity']:.0%}</td>"
        f"<td>{page.diff_button(p['diff'], 'diff', p['a'] + ' and ' + p['b'])}</td></tr>" for p in n["pairs"])
    more = f"<p class=muted>{n['pairs_total'] - len(n['pairs'])} more pairs in --json.</p>" \
        if n["pairs_total"] > len(n["pairs"]) else ""
    table = ("<table id=\"pair-table\"><thead><tr><th>submission</th><th>submission</th><th class=num>similarity</th>"
             f"<th></th></tr></thead><tbody>{rows}</tbody></table>{more}")
    if len(n["pairs"]) > 12:
        table = f"<details><summary>all {n['pairs_total']} pairs, each with its diff</summary>{table}</details>"
    return ('<section id="near-identical"><h2>Near-identical files</h2>'
            "<p class=muted>Files whose learner-written code is the same or almost the same once names, comments, "
            "docstrings and formatting are removed. Similar files have many innocent causes (the same hint, "
            f"a study group, a small exercise): these are pointers for a human, not findings.</p><ul>{clusters}</ul>"
            f"{table}</section>")


def _submissions(r: dict[str, Any]) -> str:
    names = {s["id"]: s["name"] for s in r["strategies"]}
    rows = []
    for s in r["submissions"]:
        score = "-" if s["score"] is None else f"{s['score']}/{s['max_score']}"
        checks = "".join(_status(v) for v in s["checks"].values())
        tags = (' <span class="tag ref">matches the reference</span>' if s["matches_reference"] else "") + \
            (f' <span class="tag">{_e(s["note"])}</span>' if s["note"] else "")
        rows.append(f"<tr><td>{_e(s['label'])}{tags}</td><td class=num>{score}</td><td>{checks}</td>"
                    f"<td class=num>#{s['outcome_group']}</td><td>#{s['strategy']} {_e(names.get(s['strategy'], ''))}"
                    f"</td><td class=num>v{s['variant']}</td>"
                    f"<td>{_facts_text(s['measurements'])}</td><td>{_e(s['outcome_origin'])}</td></tr>")
    return ('<section id="submissions"><h2>Submissions</h2>'
            '<p><input type="search" id="filter" placeholder="filter by label, group, fact..."></p>'
            '<table id="submission-table"><thead><tr><th>label</th><th class=num>score</th><th>checks</th>'
            "<th class=num>outcome</th><th>strategy</th><th class=num>variant</th><th>measured</th>"
            "<th>outcome from</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></section>")


def render_class(r: dict[str, Any]) -> str:
    page = _Page()
    c = r["class"]
    nav = ('<nav><a href="#strategies">strategies</a><a href="#class-view">class view</a>'
           '<a href="#outcome-groups">outcome groups</a><a href="#variants">variants</a>'
           '<a href="#near-identical">near-identical</a><a href="#submissions">submissions</a></nav>')
    body = (_header(r, f"{c['submissions']} submissions compared") + nav + _strategies(r, page) + _class_view(r)
            + _outcome_groups(r) + _variants(r, page) + _near_identical(r, page) + _submissions(r)
            + f"<footer>grade compare, report format {r['format_version']}; {_e(_stats_text(r['stats']))}</footer>")
    return _document(f"grade compare: exercise {r['exercise']['number']}", page, body)


def _stats_text(stats: dict[str, Any]) -> str:
    return (f"{stats.get('fingerprints_from_cache', 0)} fingerprints from the cache, "
            f"{stats.get('measured_now', 0)} measured and {stats.get('graded_now', 0)} graded now, "
            f"{stats.get('seconds', 0)} s")


# --- two solutions side by side -------------------------------------------------------------

def _agree(value: bool | None) -> str:
    if value is None:
        return '<span class="muted">-</span>'
    return '<span class="ok">yes</span>' if value else '<span class="bad">no</span>'


def render_pair(r: dict[str, Any]) -> str:
    page = _Page()
    a, b = r["a"], r["b"]
    checks = "".join(f"<tr><td>{_e(c['check'])}</td><td>{_status(c['a'] or 'not graded')} {_e(c['a'])}</td>"
                     f"<td>{_status(c['b'] or 'not graded')} {_e(c['b'])}</td></tr>" for c in r["checks"])
    facts = []
    for m in r["measurements"]:
        cells = []
        for side in (m["a"], m["b"]):
            cells.append(_facts_text({m["name"]: side}) if side else '<span class="muted">not measured</span>')
        prims = ", ".join(f"{p}: {x} vs {y}" for p, (x, y) in m["primitive_differences"].items())
        facts.append(f"<tr><td>{_e(m['name'])}</td><td>{_agree(m['outputs_agree'])}</td>"
                     f"<td>{_agree(m['same_jaxpr'])}</td><td>{cells[0]}</td><td>{cells[1]}</td><td>{_e(prims)}</td></tr>")
    look = f' <span class="tag look">{_e(r["wording"])}</span>' if r["near_identical"] else ""
    score = lambda s: "-" if s["score"] is None else f"{s['score']}/{s['max_score']}"  # noqa: E731
    body = (_header(r, f"{a['label']} and {b['label']} side by side")
            + f'<section id="pair-summary"><h2>Summary</h2><table><tbody>'
            f"<tr><th></th><th>{_e(a['label'])}</th><th>{_e(b['label'])}</th></tr>"
            f"<tr><td>score</td><td>{score(a)}</td><td>{score(b)}</td></tr>"
            f"<tr><td>strategy</td><td>{_e(a.get('strategy'))}</td><td>{_e(b.get('strategy'))}</td></tr>"
            f"<tr><td>variant</td><td>{_e(a['approach'])}</td><td>{_e(b['approach'])}</td></tr></tbody></table>"
            f"<p>Same strategy: {_agree(r.get('same_strategy'))}; same variant: {_agree(r['same_approach'])}; "
            f"source similarity after normalisation "
            f"{r['source_similarity']:.0%}{look}.</p></section>"
            f'<section id="pair-checks"><h2>Outcomes</h2><table class="group-table"><thead><tr><th>check</th>'
            f"<th>{_e(a['label'])}</th><th>{_e(b['label'])}</th></tr></thead><tbody>{checks}</tbody></table></section>"
            '<section id="pair-facts"><h2>Measured on the same inputs</h2><table class="group-table"><thead><tr>'
            f"<th>measurement</th><th>outputs agree</th><th>same jaxpr</th><th>{_e(a['label'])}</th>"
            f"<th>{_e(b['label'])}</th><th>primitive counts that differ</th></tr></thead>"
            f"<tbody>{''.join(facts)}</tbody></table></section>"
            f'<section id="pair-diff"><h2>Code</h2><p>'
            f"{page.diff_button(r['diff'], 'diff', a['label'] + ' against ' + b['label'])}</p><div class=\"side\">"
            f"<div><h3>{_e(a['label'])}</h3>{page.highlight(a['code'] or '', 'python')}</div>"
            f"<div><h3>{_e(b['label'])}</h3>{page.highlight(b['code'] or '', 'python')}</div></div></section>"
            f"<footer>grade compare, report format {r['format_version']}</footer>")
    return _document(f"grade compare: exercise {r['exercise']['number']}, {a['label']} and {b['label']}", page, body)


def render(report: dict[str, Any]) -> str:
    """The HTML page of a class or pair report."""
    return render_pair(report) if report["kind"] == "pair" else render_class(report)

"""`grade class GRADEBOOK --html OUT`: the class overview as one self-contained page.

The same style and Content-Security-Policy as `grade compare --html` (``html_page``):
nothing loads from the network, every learner-made string is escaped.  ``render`` takes
the overview (``class_view.overview``) and returns the page.
"""

from __future__ import annotations

from typing import Any

from grader.compare.html_page import CSS, escape as _e, page_head

_CLASS_CSS = """
td.cell { text-align:center; font-variant-numeric:tabular-nums; white-space:nowrap; }
.full-marks { background:#e8f5e9; } .partial { background:#fff8e1; } .zero { background:#ffebee; }
.not-started { background:#f4f6fa; color:var(--muted); } .grader-error { background:#fbe9e7; }
.not-graded { color:var(--muted); }
.flag { display:inline-block; padding:0 4px; margin-left:3px; border-radius:6px; font-size:11px; background:#6a1b9a;
        color:#fff; } .flag.stuck { background:#b26a00; }
.bar { display:inline-block; height:10px; background:var(--fail); border-radius:2px; vertical-align:middle; }
.legend span.key { display:inline-block; padding:0 6px; margin-right:6px; border:1px solid var(--line); }
"""

_JS = """
(function () {
  var filter = document.getElementById('filter');
  if (!filter) { return; }
  filter.addEventListener('input', function () {
    var q = filter.value.toLowerCase();
    document.querySelectorAll('#matrix tbody tr').forEach(function (tr) {
      tr.style.display = tr.textContent.toLowerCase().indexOf(q) >= 0 ? '' : 'none';
    });
  });
})();
"""


def _slug(status: str) -> str:
    return status.replace(" ", "-")


def _cell(c: dict[str, Any]) -> str:
    if c["status"] == "grader error":
        text = "error"
    elif c["score"] is None:
        text = "&middot;" if c["status"] == "not started" else _e(c["status"])
    else:
        text = f"{c['score']}/{c['max_score']}"
    flags = ""
    if c["integrity"]:
        flags += f'<span class="flag" title="{_e("; ".join(c["integrity"]))}">I</span>'
    if c["stuck_on"]:
        flags += (f'<span class="flag stuck" title="{_e(c["stuck_on"])} failed in the last {c["stuck_for"]} '
                  f'submissions">stuck</span>')
    title = f"{c['status']}; {c['submissions']} submission(s)" + (f"; last graded {c['graded_at']}"
                                                                 if c["graded_at"] else "")
    return f'<td class="cell {_slug(c["status"])}" title="{_e(title)}">{text}{flags}</td>'


def _matrix(view: dict[str, Any]) -> str:
    numbers = [e["number"] for e in view["exercises"]]
    cells = {(c["learner"], c["exercise"]): c for c in view["cells"]}
    head = "".join(f'<th class=num title="{_e(e["title"])}">{e["number"]}</th>' for e in view["exercises"])
    totals = view["totals"]["by_learner"]
    rows = []
    for learner in view["learners"]:
        tds = "".join(_cell(cells[(learner, n)]) if (learner, n) in cells else "<td></td>" for n in numbers)
        rows.append(f"<tr><td>{_e(learner)}</td>{tds}<td class=num>{totals.get(learner, 0)}/"
                    f"{view['totals']['max_score']}</td></tr>")
    legend = ('<p class="legend muted"><span class="key full-marks">full marks</span><span class="key partial">'
              'partial</span><span class="key zero">zero</span><span class="key not-started">&middot; not started'
              '</span><span class="flag">I</span> the sandbox refused something (integrity) '
              f'<span class="flag stuck">stuck</span> the same check failed in the last {view["stuck_after"]} or '
              "more submissions. Hover a cell for its details.</p>")
    return ('<section id="learners"><h2>Learners &times; exercises</h2>' + legend
            + '<p><input type="search" id="filter" placeholder="filter by learner..."></p>'
            f'<table id="matrix"><thead><tr><th>learner</th>{head}<th class=num>total</th></tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></section>")


def _by_exercise(view: dict[str, Any]) -> str:
    statuses = ("full marks", "partial", "zero", "not started", "grader error")
    head = "".join(f'<th class="num {_slug(s)}">{_e(s)}</th>' for s in statuses)
    rows = []
    for e in view["exercises"]:
        counts = view["totals"]["by_exercise"].get(str(e["number"]), {})
        rows.append(f"<tr><td>{e['number']}. {_e(e['title'])}</td>"
                    + "".join(f"<td class=num>{counts.get(s, 0)}</td>" for s in statuses) + "</tr>")
    return ('<section id="exercises"><h2>Exercises</h2><table id="exercise-table"><thead><tr><th>exercise</th>'
            f"{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></section>")


def _failing(view: dict[str, Any]) -> str:
    if not view["failing_checks"]:
        return ('<section id="failing"><h2>Checks the class fails most</h2><p class=muted>No check fails for anyone '
                "who has started.</p></section>")
    rows = "".join(
        f"<tr><td>{f['exercise']}. {_e(f['title'])}</td><td>{_e(f['check'])}</td><td class=num>{f['failed']}/"
        f"{f['of']}</td><td><span class=bar style=\"width:{round(80 * f['rate'])}px\"></span> "
        f"{f['rate'] * 100:.0f}%</td><td>{_e(f['message'])}</td></tr>" for f in view["failing_checks"])
    return ('<section id="failing"><h2>Checks the class fails most</h2><p class=muted>Across every exercise: '
            "how many learners' latest gradings do not pass each check (learners who have not started an exercise "
            "are left out of its checks), with the most common learner-facing message.</p>"
            '<table id="failing-table"><thead><tr><th>exercise</th><th>check</th><th class=num>failed</th>'
            f"<th>rate</th><th>most common message</th></tr></thead><tbody>{rows}</tbody></table></section>")


def _help(view: dict[str, Any]) -> str:
    stuck = "".join(f"<tr><td>{_e(s['learner'])}</td><td class=num>{s['exercise']}</td><td>{_e(s['check'])}</td>"
                    f"<td class=num>{s['submissions']}</td></tr>" for s in view["stuck"])
    stuck_table = (f'<table id="stuck-table"><thead><tr><th>learner</th><th class=num>exercise</th><th>failing check'
                   f"</th><th class=num>submissions in a row</th></tr></thead><tbody>{stuck}</tbody></table>"
                   if stuck else "<p class=muted>Nobody is stuck.</p>")
    waiting: dict[int, list[str]] = {}
    for item in view["not_started"]:
        waiting.setdefault(item["exercise"], []).append(item["learner"])
    titles = {e["number"]: e["title"] for e in view["exercises"]}
    rows = "".join(f"<li><b>{n}. {_e(titles.get(n, ''))}</b> ({len(who)}): {', '.join(_e(w) for w in who)}</li>"
                   for n, who in sorted(waiting.items()))
    not_started = f'<ul id="not-started">{rows}</ul>' if rows else "<p class=muted>Everyone has started everything.</p>"
    return ('<section id="help"><h2>Who needs a hand</h2>'
            f"<h3>Stuck: the same check failed in the last {view['stuck_after']} or more submissions</h3>"
            f"{stuck_table}<h3>Not started</h3>{not_started}</section>")


def render(view: dict[str, Any]) -> str:
    """The class overview page."""
    n_learners, n_ex = len(view["learners"]), len(view["exercises"])
    nav = ('<nav><a href="#learners">learners &times; exercises</a><a href="#exercises">exercises</a>'
           '<a href="#failing">checks failed most</a><a href="#help">who needs a hand</a></nav>')
    body = (f"<header><h1>Class overview</h1><p class=meta>{n_learners} learners, {n_ex} exercises &middot; "
            f"{_e(view['generated_at'])} &middot; learners appear under their gradebook labels</p></header>"
            + nav + _matrix(view) + _by_exercise(view) + _failing(view) + _help(view)
            + f"<footer>grade class, overview format {view['format_version']}</footer>")
    return page_head("grade class: overview", CSS + _CLASS_CSS) + f"<body>{body}<script>{_JS}</script></body></html>\n"

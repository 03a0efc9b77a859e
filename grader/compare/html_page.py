"""What every instructor page of `grade compare` shares: one self-contained HTML style.

A page is one file: CSS inline, no fonts, images or scripts from anywhere, and a
Content-Security-Policy that forbids every network load (``CSP``), so it works offline and
attached to an email.  Everything a page shows from a learner goes through ``escape``.
Used by the comparison report (``report_html``) and the class overview (``report_class``).
"""

from __future__ import annotations

import html
from typing import Any

CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"

CSS = """
:root { --fg:#1d2330; --muted:#5b6475; --line:#d8dde6; --bg:#fff; --soft:#f4f6fa; --pass:#2e7d32; --fail:#c62828;
        --warn:#b26a00; --accent:#1565c0; }
* { box-sizing:border-box; }
body { font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif; color:var(--fg); background:var(--bg);
       margin:0 auto; max-width:1180px; padding:24px; }
h1 { font-size:22px; margin:0 0 4px; } h2 { font-size:18px; margin:28px 0 8px; border-bottom:1px solid var(--line);
     padding-bottom:4px; } h3 { font-size:15px; margin:16px 0 6px; }
.meta, .muted { color:var(--muted); } .notes li { margin:2px 0; }
nav a { margin-right:14px; color:var(--accent); text-decoration:none; }
table { border-collapse:collapse; width:100%; margin:8px 0 16px; }
th, td { border-bottom:1px solid var(--line); padding:5px 8px; text-align:left; vertical-align:top; }
th { background:var(--soft); font-weight:600; }
td.num, th.num { text-align:right; font-variant-numeric:tabular-nums; }
.st { display:inline-block; min-width:14px; height:14px; border-radius:3px; margin-right:2px; vertical-align:middle; }
.st.passed { background:var(--pass); } .st.failed, .st.error { background:var(--fail); }
.st.not_run { background:#9e9e9e; } .st.blocked { background:#f9a825; } .st.integrity { background:#6a1b9a; }
.st.other { background:var(--warn); }
.tag { display:inline-block; padding:0 6px; border-radius:8px; font-size:12px; background:var(--soft);
       border:1px solid var(--line); margin:1px 2px; }
.tag.ref { background:#e3f2fd; border-color:#90caf9; } .tag.look { background:#fff8e1; border-color:#ffe082; }
.tag.add { background:#e8f5e9; border-color:#a5d6a7; } .tag.lack { background:#ffebee; border-color:#ef9a9a; }
.plots { display:grid; grid-template-columns:repeat(auto-fit, minmax(440px, 1fr)); gap:16px; align-items:start; }
figure { margin:0; padding:8px; border:1px solid var(--line); border-radius:6px; background:#fff; }
figure svg { display:block; max-width:100%; height:auto; } figcaption { font-size:12px; color:var(--muted); }
button { font:inherit; font-size:12px; padding:2px 8px; border:1px solid var(--accent); color:var(--accent);
         background:#fff; border-radius:4px; cursor:pointer; margin:1px; }
button:hover { background:#e3f2fd; }
details summary { cursor:pointer; color:var(--accent); }
dialog { width:min(1100px,95vw); max-height:90vh; border:1px solid var(--line); border-radius:8px; padding:0; }
dialog::backdrop { background:rgba(20,24,33,.45); }
dialog header { display:flex; justify-content:space-between; align-items:center; padding:8px 14px;
                background:var(--soft); border-bottom:1px solid var(--line); position:sticky; top:0; }
dialog .body { padding:8px 14px; overflow:auto; max-height:calc(90vh - 52px); }
.hl pre { margin:0; font-size:12.5px; line-height:1.4; white-space:pre; }
.side { display:grid; grid-template-columns:1fr 1fr; gap:12px; } .side > div { min-width:0; overflow:auto; }
.ok { color:var(--pass); font-weight:600; } .bad { color:var(--fail); font-weight:600; }
input[type=search] { font:inherit; padding:4px 8px; width:280px; border:1px solid var(--line); border-radius:4px; }
footer { margin-top:32px; font-size:12px; color:var(--muted); }
"""


def escape(value: Any) -> str:
    """Any value as HTML text (``None`` as nothing): learner text never becomes markup."""
    return html.escape("" if value is None else str(value))


def page_head(title: str, css: str = CSS) -> str:
    """The document's start up to ``<body>``: charset, the CSP, the title, the style."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{escape(title)}</title><style>{css}</style></head>")

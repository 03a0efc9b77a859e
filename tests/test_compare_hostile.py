"""`grade compare` on hostile input: one submission never stops a class report.

Each hostile file gets its own row (its own strategy "could not be ..." or its measured
one) and everything else is reported: a valid file whose expression is nested thousands
deep, exception messages and folder names made of rich markup, HTML and terminal escapes,
a submission that kills its sandbox, and outputs far over every cap.  Learner text reaches
the terminal only as plain text with control characters escaped, and the HTML page only
escaped, under its Content-Security-Policy.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from grader.compare import features, model, report_html, report_text, run, source_norm, specs
from grader.compare.cli import compare_cmd

REPO = Path(__file__).resolve().parents[1]
EX3_DIR, EX3_FILE = "03_per_example_grad_norms", "grad_norms.py"
REFERENCE = (REPO / "solutions" / EX3_DIR / EX3_FILE).read_text()
DEEP = REFERENCE + "\n\n_ZERO = 0" + " + 0" * 1500 + "\n"  # valid Python: parses, compiles, imports
MARKUP = ("[/bold] unbalanced [link=https://attacker.example/phish]click here[/link] [bold green]PASS 6/6[/] "
          "<script>alert(1)</script> \x1b]8;;https://attacker.example\x1b\\osc link\x1b]8;;\x1b\\ \x1b[2J")
MARKUP_FILE = f"def per_example_grad_norms(params, xs, ys):\n    raise ValueError({MARKUP!r})\n"
KILLS_SANDBOX = "import os\n\n\ndef per_example_grad_norms(params, xs, ys):\n    os._exit(7)\n"
HUGE = '''import jax.numpy as jnp


def per_example_grad_norms(params, xs, ys):
    print("x" * 50_000_000)
    raise ValueError("y" * 5_000_000)
'''
HOSTILE_FOLDER = "[bold red]fork[blink][link=http:x.example]"
pytestmark = pytest.mark.slow


def test_deep_expression_is_read_with_bounded_recursion():
    fp = source_norm.fingerprint(DEEP)
    assert fp.ok and fp.tokens > 0 and source_norm.CUT in fp.text
    assert source_norm.closure_hash(DEEP, "per_example_grad_norms") == \
        source_norm.closure_hash(REFERENCE, "per_example_grad_norms")
    deeper = "X = " + "(" * 180 + "1" + ")" * 180 + "\n" + "Y = 0" + " + 0" * 20_000 + "\n"
    fp = source_norm.fingerprint(deeper)  # Python's own parser may give up: a row of its own, not a crash
    assert fp.ok or fp.problem
    spec = specs.spec_for("reading-a-jaxpr")
    assert features.features_of(spec, None, DEEP).python[0][1].state == "missing"


def test_facts_of_the_wrong_shape_are_one_row():
    spec = specs.spec_for("per-example-grad-norms")
    broken = {"measurements": [{"name": "per_example_grad_norms", "structural": True,
                                "facts": {"structure": {"paths": ["not", "a", "dict"], "sequence": 7},
                                          "compiles": "many", "primitives": [1]}}]}
    read = run.read_safely(spec, broken, REFERENCE, None)
    assert read.key == "analysis-failed" or read.features is not None  # never an exception
    summary = model._measurement_summary(broken)
    assert summary["per_example_grad_norms"]["compiles"] is None


def _flat(text: str) -> str:
    """Terminal output without its layout (whitespace, table borders) and colours."""
    return re.sub(r"[\s\u2500-\u257f]+", "", re.sub(r"\x1b\[[0-9;]*m", "", text))


def _fork(root: Path, name: str, text: str) -> Path:
    target = root / name / "exercises" / EX3_DIR / EX3_FILE
    target.parent.mkdir(parents=True)
    target.write_text(text)
    return root / name


@pytest.fixture(scope="module")
def hostile_class(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile-class")
    # two copies of the markup file: its message is the most common failure, the one the terminal shows
    forks = {"good": REFERENCE, "deep": DEEP, "markup": MARKUP_FILE, "markup-again": MARKUP_FILE + "# again\n",
             "kills-sandbox": KILLS_SANDBOX, "huge": HUGE, HOSTILE_FOLDER: REFERENCE}
    paths = [str(_fork(root / "forks", name, text)) for name, text in forks.items()]
    return root, paths


def test_hostile_submissions_do_not_stop_the_report(hostile_class):
    root, paths = hostile_class
    book = root / "grades.sqlite"
    out = CliRunner().invoke(compare_cmd, ["3", *paths, "--gradebook", str(book), "--json", "-j", "2"])
    assert out.exit_code == 0, out.output
    report = json.loads(out.output)
    rows = {r["label"]: r for r in report["submissions"]}
    assert len(rows) == len(paths)
    assert rows["good"]["strategy"] == rows["deep"]["strategy"]  # the deep file is measured like any other
    strategies = {s["id"]: s for s in report["strategies"]}
    assert strategies[rows["good"]["strategy"]]["name"] == "vmap of grad"
    for bad in ("markup", "kills-sandbox", "huge"):
        assert not strategies[rows[bad]["strategy"]]["measured"], bad  # nothing measured: a row of its own
        assert rows[bad]["score"] == 0
    assert len(out.output) < 5_000_000  # capped, not 55 MB of learner output

    # the terminal: learner text printed as written, never as markup or escapes
    buf = io.StringIO()
    report_text.render(report, Console(file=buf, force_terminal=True, color_system="truecolor", width=200))
    shown = buf.getvalue()
    flat = _flat(shown)  # table cells wrap: compare without layout
    assert "[/bold]unbalanced" in flat and "clickhere[/link]" in flat
    assert "\x1b]8;" not in shown and "attacker.example\x1b" not in shown and "\x1b[2J" not in shown
    assert "\\x1b]8;;https://attacker.example" in flat  # the escape shown, inert

    # the page: escaped, and nothing loads from the network
    page = report_html.render(report)
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "default-src 'none'" in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page)


def test_terminal_summary_with_hostile_labels(hostile_class):
    root, paths = hostile_class
    out = CliRunner().invoke(compare_cmd, ["3", *paths, "--gradebook", str(root / "grades.sqlite"), "-j", "2"])
    assert out.exit_code == 0, out.output
    assert "Traceback" not in out.output and "MarkupError" not in out.output
    assert "\x1b" not in out.output
    assert HOSTILE_FOLDER.replace(" ", "") in _flat(out.output)

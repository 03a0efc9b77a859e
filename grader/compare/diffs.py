"""Unified diffs between two solutions' files, for the reports."""

from __future__ import annotations

import difflib

MAX_DIFF_LINES = 400


def unified(a: str | None, b: str | None, name_a: str, name_b: str, context: int = 3) -> str | None:
    """``a`` -> ``b`` as a unified diff ("" when identical; None when either file is missing)."""
    if a is None or b is None:
        return None
    lines = list(difflib.unified_diff(a.splitlines(), b.splitlines(), fromfile=name_a, tofile=name_b,
                                      n=context, lineterm=""))
    if len(lines) > MAX_DIFF_LINES:
        lines = lines[:MAX_DIFF_LINES] + [f"... ({len(lines) - MAX_DIFF_LINES} more diff lines)"]
    return "\n".join(lines)

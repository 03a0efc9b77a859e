"""The learner's local state: hints shown and progress, in ``.grade-state.json``.

The file lives at the root of the learner's checkout (git ignores it), so both survive
between sessions:

* ``hints``: for each exercise (and part), how many hints ``grade hint`` has shown;
* ``progress``: for each exercise, its last grading -- score, checks passed of those
  that ran, whether hidden checks ran, and the digest of the files graded (so ``grade
  list`` can tell "passing" from "changed since it was last graded").

Writes are atomic (a temporary file renamed into place); a read-only checkout still
works, it only forgets.  Nothing here affects a verdict.
"""

from __future__ import annotations

import datetime
import json
import os
import tempfile
from pathlib import Path

STATE_FILE = ".grade-state.json"


class State:
    def __init__(self, root: Path):
        self.path = Path(root) / STATE_FILE

    def load(self) -> dict:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def save(self, data: dict) -> None:
        try:
            fd, tmp = tempfile.mkstemp(prefix=".grade-state.", dir=self.path.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh, indent=2, sort_keys=True)
                fh.write("\n")
            os.replace(tmp, self.path)
        except OSError:
            pass  # a read-only checkout still grades and gives hints, it only forgets

    # -- hints ------------------------------------------------------------------------------
    def next_hint(self, key: str, available: int) -> int:
        """How many hints of ``key`` (an exercise, or ``"3/B"`` for a part) to show now: one
        more than last time, capped; remembered."""
        data = self.load()
        hints = data.setdefault("hints", {})
        shown = min(int(hints.get(key, 0)) + 1, available)
        hints[key] = shown
        self.save(data)
        return shown

    def reset_hints(self, number: int) -> None:
        data = self.load()
        hints = data.setdefault("hints", {})
        for key in [k for k in hints if k == str(number) or k.startswith(f"{number}/")]:
            del hints[key]
        self.save(data)

    # -- progress ---------------------------------------------------------------------------
    def record(self, results, digests: dict[int, str]) -> None:
        """Remember each graded exercise's outcome (``ExerciseResult``s, with the digest of
        the files that were graded)."""
        data = self.load()
        progress = data.setdefault("progress", {})
        now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        for ex in results:
            if ex.error:
                continue
            ran = [c for c in ex.checks if c.status != "not_run"]
            progress[str(ex.number)] = {
                "score": ex.score, "max_score": ex.max_score, "passed": sum(c.passed for c in ran),
                "ran": len(ran), "hidden_run": ex.hidden_run, "all_passed": bool(ran) and all(c.passed for c in ran),
                "digest": digests.get(ex.number, ""), "graded_at": now,
            }
        self.save(data)

    def progress(self) -> dict[str, dict]:
        return self.load().get("progress", {})

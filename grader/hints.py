"""Progressive hints: each `grade hint N` reveals one more, remembered in a small state file.

The state lives in ``.grade-state.json`` at the root of the learner's checkout (ignored by
git), so hints survive between sessions and ``--reset`` starts over.
"""

from __future__ import annotations

import json
from pathlib import Path

STATE_FILE = ".grade-state.json"


class HintState:
    def __init__(self, path: Path):
        self.path = Path(path)

    def _load(self) -> dict:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def _save(self, data: dict) -> None:
        try:
            self.path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        except OSError:
            pass  # a read-only checkout still gets hints, just not remembered

    def next(self, number: int, available: int) -> int:
        """How many hints to show now (one more than last time, capped), and remember it."""
        data = self._load()
        hints = data.setdefault("hints", {})
        shown = min(int(hints.get(str(number), 0)) + 1, available)
        hints[str(number)] = shown
        self._save(data)
        return shown

    def reset(self, number: int) -> None:
        data = self._load()
        data.setdefault("hints", {}).pop(str(number), None)
        self._save(data)

"""What one grading session shares between the runner and the pytest plugin.

``grader.runner`` starts the sandboxes of each exercise and fills ``ExerciseRun``s;
``grader.pytest_plugin`` hands them to check tests as fixtures.  Both import this module,
never each other.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from grader.manifest import Exercise
from grader.sandbox.client import Sandbox
from grader.submission import Snapshot

#: Check files are copied to a private folder under these names (see grader.pytest_plugin).
CHECK_MODULE_RE = re.compile(r"^test_e(?P<num>\d+)_(?P<vis>public|hidden)\.py$")


@dataclasses.dataclass
class ExerciseRun:
    """One exercise being graded: what the check fixtures need."""

    exercise: Exercise
    snapshot: Snapshot
    seed: int
    public: Sandbox | None = None
    hidden: Sandbox | None = None  # a sandbox of its own for the hidden checks
    clean: Sandbox | None = None  # learner-free worker for trusted measurements (manifest clean_worker)
    only: frozenset[str] | None = None  # the checks to run (with what they require); None: all

    def runs(self, check_name: str) -> bool:
        return self.only is None or check_name in self.only

    @property
    def module_path(self) -> Path:
        return Path(self.snapshot.display_path)

    def sandbox_for(self, visibility: str) -> Sandbox:
        box = self.hidden if visibility == "hidden" else self.public
        if box is None:
            raise RuntimeError(f"exercise {self.exercise.number} has no sandbox for its {visibility} checks")
        return box

    def learner_sandboxes(self) -> list[Sandbox]:
        return [w for w in (self.public, self.hidden) if w is not None]

    def workers(self) -> list[Sandbox]:
        return [w for w in (self.public, self.hidden, self.clean) if w is not None]

    @property
    def integrity(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r for box in self.learner_sandboxes() for r in box.integrity))



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
from grader.sandbox import memo
from grader.sandbox.client import Sandbox
from grader.submission import Snapshot

#: Check files are copied to a private folder under these names (see grader.pytest_plugin).
CHECK_MODULE_RE = re.compile(r"^test_e(?P<num>\d+)_(?P<vis>public|hidden)\.py$")


@dataclasses.dataclass
class ExerciseRun:
    """One exercise being graded: what the check fixtures need.

    Besides the learner's sandboxes and the clean worker, two kinds of worker start only
    when a selected check asks for them (``want``, at collection):

    * ``reference_for(visibility)``: the **reference solution** (``reference_snapshot``, from
      the hidden root) in a sandbox of exactly the learner's kind -- same zygote, limits,
      probes and devices -- one per learner sandbox, so each sees the same kind of history.
      A check sends it the request it sends the learner's (``grader.testing``): its totals
      are what an honest solution costs.  ``None`` where the hidden root has no reference.
    * ``without_jax(visibility)``: the learner's files in a worker where JAX does not exist
      (``grader.sandbox.nojax``), for functions that must be formulas.
    """

    exercise: Exercise
    snapshot: Snapshot
    seed: int
    public: Sandbox | None = None
    hidden: Sandbox | None = None  # a sandbox of its own for the hidden checks
    clean: Sandbox | None = None  # learner-free worker for trusted measurements (manifest clean_worker)
    only: frozenset[str] | None = None  # the checks to run (with what they require); None: all
    limits: dict = dataclasses.field(default_factory=dict)  # how this exercise's sandboxes start (Sandbox kwargs)
    reference_snapshot: Snapshot | None = None  # the reference solution's files (None: not available here)
    references: dict[str, Sandbox] = dataclasses.field(default_factory=dict)  # visibility -> its sandbox
    nojax: dict[str, Sandbox] = dataclasses.field(default_factory=dict)  # visibility -> its sandbox
    #: the checks that ran and draw from the seed (a test of theirs uses the ``seed`` fixture,
    #: ``rng`` included): the rest would grade the same at any seed (``grade verify``)
    seeded: set[str] = dataclasses.field(default_factory=set)

    def runs(self, check_name: str) -> bool:
        return self.only is None or check_name in self.only

    def want(self, fixture: str, visibility: str) -> None:
        """Make the worker a selected check's ``fixture`` needs (started with the others)."""
        if fixture == "reference":
            self.reference_for(visibility)
        elif fixture == "without_jax":
            self.without_jax(visibility)

    def reference_for(self, visibility: str) -> Sandbox | None:
        if self.reference_snapshot is None or self.reference_snapshot.problem is not None:
            return None
        if visibility not in self.references:
            self.references[visibility] = memo.learner_free(self.reference_snapshot, **self.limits)
        return self.references[visibility]

    def without_jax(self, visibility: str) -> Sandbox:
        """One per visibility, like the learner's own sandboxes: nothing a hidden check's
        inputs taught the learner's code can reach a public check's message."""
        if visibility not in self.nojax:
            limits = {k: v for k, v in self.limits.items() if k not in ("zygote", "compile_cache")}
            self.nojax[visibility] = Sandbox(self.snapshot, jax=False, **limits)
        return self.nojax[visibility]

    @property
    def module_path(self) -> Path:
        return Path(self.snapshot.display_path)

    def sandbox_for(self, visibility: str) -> Sandbox:
        box = self.hidden if visibility == "hidden" else self.public
        if box is None:
            raise RuntimeError(f"exercise {self.exercise.number} has no sandbox for its {visibility} checks")
        return box

    def learner_sandboxes(self) -> list[Sandbox]:
        return [w for w in (self.public, self.hidden, *self.nojax.values()) if w is not None]

    def workers(self) -> list[Sandbox]:
        return [w for w in (self.public, self.hidden, self.clean, *self.nojax.values(), *self.references.values())
                if w is not None]

    def timings(self) -> dict[str, dict[str, float]]:
        """Each worker's CPU and wall seconds, by what it was for (known once they are closed):
        where a grading's time went, for ``grade exercise -v`` and ``make bench``; a
        learner-free worker that answered from memory (``grader.sandbox.memo``) also says
        how many answers it gave so (``remembered``), and has no seconds if it never started;
        a worker that started says how much of its CPU went to its start-up (``start_cpu_s``)
        and to importing the learner's module (``import_cpu_s``), by its own account."""
        roles = {"public": self.public, "hidden": self.hidden, "clean": self.clean,
                 **{f"reference ({v})": box for v, box in self.references.items()},
                 **{f"without JAX ({v})": box for v, box in self.nojax.items()}}
        out = {}
        for role, box in roles.items():
            remembered = getattr(box, "recalled", 0)  # answers a learner-free worker gave from memory
            if box is not None and (box.wall_s or remembered):
                out[role] = {"cpu_s": round(box.cpu_s, 3), "wall_s": round(box.wall_s, 3)}
                if getattr(box, "start_cpu_s", 0.0):  # of which: its start-up, and the learner's import
                    out[role].update(start_cpu_s=round(box.start_cpu_s, 3), import_cpu_s=round(box.import_cpu_s, 3))
                if remembered:
                    out[role]["remembered"] = remembered
        return out

    @property
    def integrity(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r for box in self.learner_sandboxes() for r in box.integrity))



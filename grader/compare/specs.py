"""What `grade compare` measures for each exercise, and on which fixed inputs: the machinery
and the registry.  Each exercise's own ``ExerciseSpec`` is ``SPEC`` in
``grader/exercises/<pkg>/compare.py``; ``all_specs`` collects them, so a new exercise's spec
needs no edit here.

One ``ExerciseSpec`` per exercise slug.  Each ``Measurement`` is sent to the sandbox probe
``fingerprint:measure`` (``grader/probes/fingerprint.py`` documents the kinds) with inputs
drawn from a fixed seed (``seeded_rng``), so every submission is measured on exactly the
same data and the facts of two submissions can be compared.  ``structural`` measurements
make up the *variant* key (canonical jaxpr, compile count, layouts and collectives) and the
features a *strategy* is read from (``grader.compare.features``); the others only feed the
side-by-side view ("do the outputs agree?").  ``strategies`` names the exercise's strategies
(``grader.compare.strategy``).  ``source_functions`` are
pure-Python functions whose approach is read from their normalised source (the function
and every module-level function it calls), since they have no jaxpr.

An exercise without a spec (no ``compare.py``) is grouped by normalised source only, and
the report says so.  Changing a spec changes ``spec_digest``, which invalidates the
cached fingerprints of that exercise.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import importlib.util
import json
import pkgutil
from typing import Any, Callable

import numpy as np

SEED = 20_240_607
#: Bump when the probe's measurements change meaning: cached fingerprints are then stale.
PROBE_VERSION = 4


_DIGESTS: dict[str, str] = {}


@dataclasses.dataclass(frozen=True)
class Measurement:
    name: str  # what the report calls it, e.g. "per_example_grad_norms"
    payload: Callable[[], dict]  # the plain-data request for the probe (fixed inputs)
    structural: bool = True  # part of the approach key


@dataclasses.dataclass(frozen=True)
class ExerciseSpec:
    slug: str
    measurements: tuple[Measurement, ...]
    source_functions: tuple[str, ...] = ()
    note: str = ""  # one line for the report: what the approach is read from
    #: Named strategies (``grader.compare.strategy.Strategy``): predicates over measured
    #: features, the first that holds names a solution's strategy; the rest are clustered.
    strategies: tuple[Any, ...] = ()

    def payloads(self) -> list[dict]:
        return [m.payload() for m in self.measurements]

    def digest(self) -> str:
        """Changes whenever a measurement, its inputs or the probe change."""
        if self.slug not in _DIGESTS:
            _DIGESTS[self.slug] = self._digest()
        return _DIGESTS[self.slug]

    def _digest(self) -> str:
        from grader import plaindata

        text = plaindata.dumps(plaindata.to_plain({
            "probe": PROBE_VERSION, "names": [m.name for m in self.measurements],
            "structural": [m.structural for m in self.measurements], "payloads": self.payloads(),
            "source_functions": list(self.source_functions)}))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def seeded_rng(salt: int) -> np.random.Generator:
    """The generator of one measurement's fixed inputs: the same data for every submission."""
    return np.random.default_rng([SEED, salt])


def f32(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.normal(size=shape).astype(np.float32)


def call(*args: Any, **kwargs: Any) -> dict:
    """One call of the learner's function, as a probe payload writes it."""
    return {"args": list(args), "kwargs": kwargs}


@functools.cache
def all_specs() -> dict[str, ExerciseSpec]:
    """Slug -> spec, from every ``grader/exercises/<pkg>/compare.py`` (its ``SPEC``): a new
    exercise's spec is found without an edit here.  Built on first use, not at import, since
    those modules import this one."""
    import grader.exercises

    specs: dict[str, ExerciseSpec] = {}
    for info in pkgutil.iter_modules(grader.exercises.__path__):
        name = f"grader.exercises.{info.name}.compare"
        if not info.ispkg or importlib.util.find_spec(name) is None:
            continue
        spec = importlib.import_module(name).SPEC
        if spec.slug in specs:
            raise ValueError(f"{name}: a second spec for exercise {spec.slug!r}")
        specs[spec.slug] = spec
    return specs


def spec_for(slug: str) -> ExerciseSpec | None:
    """The exercise's spec, or None: then approaches are grouped by normalised source only."""
    return all_specs().get(slug)


def payload_json(payload: dict) -> str:
    """A payload as it travels, for digests and tests."""
    from grader import plaindata

    return json.dumps(plaindata.to_plain(payload), sort_keys=True)

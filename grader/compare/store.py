"""`grade compare`'s cache, kept in the gradebook file beside the gradings.

Two tables of compare's own (created with ``CREATE TABLE IF NOT EXISTS`` through this
module's own connection; the gradebook's schema is untouched):

``compare_fingerprints``  one fingerprint (what the sandbox measured, as plain-data JSON)
                          per (content hash, exercise, spec digest, grader version, JAX
                          version): a file measured once is never measured again until
                          the spec, the grader or JAX changes.
``compare_outcomes``      outcomes ``grade compare`` graded itself (folders given as SOURCE
                          that the gradebook had not graded), keyed the same way with the
                          digest of the exercise's checks instead of the spec's.

So re-running compare after more forks arrive measures (and grades) only the new ones.
The file must be a gradebook already (``grader.course.gradebook.Gradebook`` creates one).
"""

from __future__ import annotations

import datetime
import json
import sqlite3
from pathlib import Path
from typing import Any

from grader import plaindata

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS compare_fingerprints (
        content_hash   TEXT NOT NULL,
        exercise       INTEGER NOT NULL,
        spec_digest    TEXT NOT NULL,
        grader_version TEXT NOT NULL,
        jax_version    TEXT NOT NULL,
        measured_at    TEXT NOT NULL,
        fingerprint    TEXT NOT NULL,
        PRIMARY KEY (content_hash, exercise, spec_digest, grader_version, jax_version))""",
    """CREATE TABLE IF NOT EXISTS compare_outcomes (
        content_hash   TEXT NOT NULL,
        exercise       INTEGER NOT NULL,
        checks_digest  TEXT NOT NULL,
        grader_version TEXT NOT NULL,
        jax_version    TEXT NOT NULL,
        graded_at      TEXT NOT NULL,
        result_json    TEXT NOT NULL,
        PRIMARY KEY (content_hash, exercise, checks_digest, grader_version, jax_version))""",
)


class StoreError(Exception):
    """The cache cannot be used (the file is unreadable or locked); the message says why."""


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


class Store:
    """The cache tables of one gradebook file (``None`` path: an in-memory, throw-away cache)."""

    def __init__(self, path: Path | None, *, grader_version: str, jax_version: str):
        self.path = path
        self.versions = (grader_version, jax_version)
        try:
            self.db = sqlite3.connect(str(path) if path else ":memory:", isolation_level=None, timeout=30)
            for statement in _SCHEMA:
                self.db.execute(statement)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot keep compare's cache in {path}: {exc}") from None

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- fingerprints ------------------------------------------------------------------
    def fingerprints(self, exercise: int, spec_digest: str, hashes: set[str]) -> dict[str, dict[str, Any]]:
        """The cached fingerprints among ``hashes``, by content hash."""
        rows = self.db.execute(
            "SELECT content_hash, fingerprint FROM compare_fingerprints WHERE exercise = ? AND spec_digest = ?"
            " AND grader_version = ? AND jax_version = ?", (exercise, spec_digest, *self.versions))
        return {h: plaindata.from_plain(json.loads(text)) for h, text in rows if h in hashes}

    def put_fingerprint(self, content_hash: str, exercise: int, spec_digest: str, fingerprint: dict) -> None:
        text = plaindata.dumps(plaindata.to_plain(fingerprint))
        self.db.execute("INSERT OR REPLACE INTO compare_fingerprints VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (content_hash, exercise, spec_digest, *self.versions, _now(), text))

    # -- outcomes ----------------------------------------------------------------------
    def outcomes(self, exercise: int, checks_digest: str, hashes: set[str]) -> dict[str, dict[str, Any]]:
        """Outcomes compare graded earlier among ``hashes`` (``ExerciseResult.to_dict(private=True)``)."""
        rows = self.db.execute(
            "SELECT content_hash, result_json FROM compare_outcomes WHERE exercise = ? AND checks_digest = ?"
            " AND grader_version = ? AND jax_version = ?", (exercise, checks_digest, *self.versions))
        return {h: json.loads(text) for h, text in rows if h in hashes}

    def put_outcome(self, content_hash: str, exercise: int, checks_digest: str, result: dict) -> None:
        self.db.execute("INSERT OR REPLACE INTO compare_outcomes VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (content_hash, exercise, checks_digest, *self.versions, _now(),
                         json.dumps(result, sort_keys=True)))

    def count(self) -> int:
        return self.db.execute("SELECT count(*) FROM compare_fingerprints").fetchone()[0]

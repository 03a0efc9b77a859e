"""The gradebook: every grading of every submission, kept in one SQLite file.

``grade batch`` writes here as gradings finish; ``grade gradebook import`` merges result
files graded elsewhere (a CI matrix); ``grade gradebook export`` reads it back as CSV or
JSON.  SQLite needs nothing installed, and a single file is easy to copy, back up and
query with any SQLite client.

Nothing is ever overwritten: grading a submission again adds rows, and exports show the
latest grading of each (submission, exercise) unless asked for the whole history.

Schema (version ``SCHEMA_VERSION``, kept in ``PRAGMA user_version``; the file is marked
as a gradebook by ``PRAGMA application_id``)::

    gradings   one row per grading of one exercise of one submission:
               submission (a label), submission_key (its identity), source (folder,
               path or URL given), git_commit, content_hash (of the exercise's files in
               the submission), exercise, slug, title, seed, score, max_score,
               hidden_run, error, grader_version, jax_version, hidden_digest (the set of
               hidden checks), checks_digest (this exercise's checks), unit_key (what
               ``grade batch`` resumes by), graded_at (UTC, ISO 8601), duration_s,
               origin ("batch" or "import:<file>"), record_id (unique: makes imports
               idempotent), result_json (``ExerciseResult.to_dict(private=True)``)
    checks     one row per check of a grading: status, score, max_score, the
               learner-facing message and the instructor-only private text
    latest_gradings     view: the latest grading per (submission_key, exercise)
    check_rows          view: one row per submission, exercise and check (all history)
    latest_check_rows   view: the same, latest gradings only

The file runs in WAL mode, and every grading is written in one transaction together with
its checks, so a process killed at any moment leaves whole gradings only.  The
``private`` fields (what hidden checks measured, grader tracebacks) are for instructors:
exports leave them out unless asked (``private=True``).
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import hashlib
import json
import os
import sqlite3
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from grader.results import ExerciseResult, RunResult

SCHEMA_VERSION = 2
APPLICATION_ID = 0x47524442  # "GRDB": this SQLite file is a gradebook
EXPORT_FORMAT_VERSION = 1

_SCHEMA_V1 = """
CREATE TABLE gradings (
    id             INTEGER PRIMARY KEY,
    record_id      TEXT    NOT NULL UNIQUE,
    unit_key       TEXT    NOT NULL DEFAULT '',
    submission     TEXT    NOT NULL,
    submission_key TEXT    NOT NULL,
    source         TEXT    NOT NULL DEFAULT '',
    git_commit     TEXT    NOT NULL DEFAULT '',
    content_hash   TEXT    NOT NULL DEFAULT '',
    exercise       INTEGER NOT NULL,
    slug           TEXT    NOT NULL,
    title          TEXT    NOT NULL,
    seed           INTEGER NOT NULL,
    score          INTEGER NOT NULL,
    max_score      INTEGER NOT NULL,
    hidden_run     INTEGER NOT NULL,
    error          TEXT    NOT NULL DEFAULT '',
    grader_version TEXT    NOT NULL,
    jax_version    TEXT    NOT NULL,
    hidden_digest  TEXT    NOT NULL DEFAULT '',
    checks_digest  TEXT    NOT NULL DEFAULT '',
    graded_at      TEXT    NOT NULL,
    duration_s     REAL    NOT NULL DEFAULT 0,
    origin         TEXT    NOT NULL,
    result_json    TEXT    NOT NULL
);
CREATE INDEX gradings_by_unit ON gradings (unit_key);
CREATE INDEX gradings_by_submission ON gradings (submission_key, exercise, graded_at, id);

CREATE TABLE checks (
    grading_id INTEGER NOT NULL REFERENCES gradings (id) ON DELETE CASCADE,
    position   INTEGER NOT NULL,
    name       TEXT    NOT NULL,
    visibility TEXT    NOT NULL,
    status     TEXT    NOT NULL,
    score      INTEGER NOT NULL,
    max_score  INTEGER NOT NULL,
    message    TEXT    NOT NULL,
    private    TEXT    NOT NULL,
    PRIMARY KEY (grading_id, position)
);

CREATE VIEW latest_gradings AS
SELECT * FROM gradings AS g
WHERE g.id = (SELECT h.id FROM gradings AS h
              WHERE h.submission_key = g.submission_key AND h.exercise = g.exercise
              ORDER BY h.graded_at DESC, h.id DESC LIMIT 1);

CREATE VIEW check_rows AS
SELECT g.id AS grading_id, g.submission, g.submission_key, g.git_commit, g.exercise, g.slug,
       c.position, c.name AS check_name, c.visibility, c.status, c.score, c.max_score, c.message, c.private,
       g.score AS exercise_score, g.max_score AS exercise_max_score, g.error, g.seed, g.hidden_run,
       g.grader_version, g.jax_version, g.hidden_digest, g.graded_at
FROM gradings AS g LEFT JOIN checks AS c ON c.grading_id = g.id;

CREATE VIEW latest_check_rows AS
SELECT * FROM check_rows WHERE grading_id IN (SELECT id FROM latest_gradings);
"""

#: Upgrades from each older schema version to the next.
_MIGRATIONS: dict[int, str] = {
    # 2: what a submission is beyond its label (a hash of its repository URL and folder)
    1: "ALTER TABLE gradings ADD COLUMN submission_id TEXT NOT NULL DEFAULT ''",
}

#: CSV columns, in order: one row per submission, exercise and check.
CSV_COLUMNS = (
    "submission", "submission_key", "commit", "exercise", "slug", "check", "visibility", "status", "score",
    "max_score", "message", "exercise_score", "exercise_max_score", "error", "seed", "hidden_run",
    "grader_version", "jax_version", "hidden_digest", "graded_at",
)


class GradebookError(Exception):
    """The gradebook cannot be used as asked; the message says why and what to do."""


@dataclasses.dataclass(frozen=True)
class Grading:
    """One exercise of one submission, graded once: what a gradebook row holds."""

    result: ExerciseResult
    submission: str  # a label for people
    submission_key: str  # the submission's identity (a folder, URL or given name)
    grader_version: str
    jax_version: str
    graded_at: str  # UTC, ISO 8601
    origin: str  # "batch" or "import:<file name>"
    source: str = ""
    commit: str = ""
    content_hash: str = ""
    unit_key: str = ""
    hidden_digest: str = ""
    checks_digest: str = ""
    record_id: str = ""  # empty: a fresh unique id
    submission_id: str = ""  # RunResult.submission_id


def utc_iso(timestamp: str = "") -> str:
    """``timestamp`` (ISO 8601; naive means UTC) in UTC to the second; now when empty."""
    if not timestamp:
        moment = datetime.datetime.now(datetime.timezone.utc)
    else:
        try:
            moment = datetime.datetime.fromisoformat(timestamp)
        except ValueError:
            raise GradebookError(f"{timestamp!r} is not an ISO 8601 time") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=datetime.timezone.utc)
    return moment.astimezone(datetime.timezone.utc).isoformat(timespec="seconds")


def split_submission(text: str) -> tuple[str, str]:
    """``RunResult.submission`` as (what, commit): ``"url@<hex commit>"`` names a commit."""
    what, sep, commit = text.rpartition("@")
    if sep and 7 <= len(commit) <= 64 and all(ch in "0123456789abcdef" for ch in commit):
        return what, commit
    return text, ""


class Gradebook:
    """An open gradebook file.  ``Gradebook(path)`` creates it when missing (``create=False``
    refuses), checks that an existing file is a gradebook of a schema this grader reads,
    and upgrades an older schema in place."""

    def __init__(self, path: str | Path, *, create: bool = True):
        self.path = Path(path)
        if not self.path.exists():
            if not create:
                raise GradebookError(f"there is no gradebook at {self.path}; `grade batch` creates one")
            if not self.path.parent.is_dir():
                raise GradebookError(f"cannot create the gradebook {self.path}: the folder {self.path.parent} "
                                     f"does not exist")
            try:  # private from the start: it holds every learner's results (SQLite's -wal/-shm follow its mode)
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
            except OSError as exc:
                raise GradebookError(f"cannot create the gradebook {self.path}: {exc.strerror}") from None
        elif not self.path.is_file() or self.path.is_symlink():
            raise GradebookError(f"{self.path} is not a file; give the gradebook's file name")
        else:
            try:
                if self.path.stat().st_uid == os.geteuid():
                    os.chmod(self.path, 0o600)
            except OSError:
                pass
        self.db = None
        try:
            self.db = sqlite3.connect(self.path, isolation_level=None, timeout=30)
            self.db.row_factory = sqlite3.Row
            self._prepare()
        except (sqlite3.Error, GradebookError) as exc:
            if self.db is not None:
                self.db.close()
            if isinstance(exc, GradebookError):
                raise
            raise GradebookError(f"cannot use {self.path} as a gradebook: {exc}") from None

    def _prepare(self) -> None:
        app_id = self.db.execute("PRAGMA application_id").fetchone()[0]
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        tables = self.db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if tables and app_id != APPLICATION_ID:
            raise GradebookError(f"{self.path} is an SQLite database but not a gradebook; "
                                 f"give another file name (a new one is created)")
        if version > SCHEMA_VERSION:
            raise GradebookError(f"{self.path} was written by a newer grader (gradebook schema {version}; this "
                                 f"grader reads up to {SCHEMA_VERSION}); upgrade the grader")
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = FULL")
        self.db.execute("PRAGMA foreign_keys = ON")
        if version == SCHEMA_VERSION:
            return
        self.db.execute("BEGIN IMMEDIATE")
        try:
            version = self.db.execute("PRAGMA user_version").fetchone()[0]  # another process may have won
            if version == 0:
                for statement in _statements(_SCHEMA_V1):
                    self.db.execute(statement)
                self.db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                version = 1
            while version < SCHEMA_VERSION:
                for statement in _statements(_MIGRATIONS[version]):
                    self.db.execute(statement)
                version += 1
            self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self.db.close()

    def check_writable(self) -> None:
        """Raise ``GradebookError`` now when nothing could be recorded (a read-only file or
        folder, a full disk, a damaged file), before any grading work is done."""
        try:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute("CREATE TEMP TABLE IF NOT EXISTS _probe (x)")
            self.db.execute("ROLLBACK")
        except sqlite3.Error as exc:
            try:
                self.db.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            raise GradebookError(f"cannot write to the gradebook {self.path} ({exc}); fix its permissions, free some "
                                 f"disk space, or give another file with --gradebook") from None

    def __enter__(self) -> "Gradebook":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- writing -------------------------------------------------------------------------
    def add(self, grading: Grading) -> bool:
        """Record one grading with its checks, in one transaction.  False when a grading
        with the same ``record_id`` is already here (nothing is written)."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            added = self._insert(grading)
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return added

    def _insert(self, grading: Grading) -> bool:
        """``add`` inside a transaction the caller holds."""
        r = grading.result
        record_id = grading.record_id or f"batch:{uuid.uuid4().hex}"
        cur = self.db.execute(
            "INSERT OR IGNORE INTO gradings (record_id, unit_key, submission, submission_key, source, git_commit,"
            " content_hash, exercise, slug, title, seed, score, max_score, hidden_run, error, grader_version,"
            " jax_version, hidden_digest, checks_digest, graded_at, duration_s, origin, result_json, submission_id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (record_id, grading.unit_key, grading.submission, grading.submission_key, grading.source,
             grading.commit, grading.content_hash, r.number, r.slug, r.title, r.seed, r.score, r.max_score,
             int(r.hidden_run), r.error, grading.grader_version, grading.jax_version, grading.hidden_digest,
             grading.checks_digest, utc_iso(grading.graded_at), round(r.duration_s, 3), grading.origin,
             json.dumps(r.to_dict(private=True), sort_keys=True), grading.submission_id),
        )
        added = cur.rowcount == 1
        if added:
            self.db.executemany(
                "INSERT INTO checks (grading_id, position, name, visibility, status, score, max_score, message,"
                " private) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(cur.lastrowid, i, c.name, c.visibility, c.status, c.score, c.max_score, c.message, c.private)
                 for i, c in enumerate(r.checks)],
            )
        return added

    def _refuse_merge(self, key: str, submission_id: str, merge: bool) -> None:
        """Two different submissions (repository and folder) under one given name: refused
        unless asked for (``--merge``), so no learner's history silently hides another's."""
        if merge or not submission_id:
            return
        known = {row[0] for row in self.db.execute(
            "SELECT DISTINCT submission_id FROM gradings WHERE submission_key = ? AND submission_id != ''", (key,))}
        if known and submission_id not in known:
            raise GradebookError(f"the gradebook already holds another submission under {key[5:]!r} (a different "
                                 f"repository or folder); pass --merge to record this one under the same name anyway")

    def import_runs(self, runs: Iterable[tuple[RunResult, str]], *, submission: str = "",
                    merge: bool = False) -> tuple[int, int]:
        """Record every exercise of each (run, origin) -- results graded elsewhere, read and
        checked by ``grader.course.result_file`` -- all or nothing, in one transaction.
        Returns (added, already present): the same result imported twice is recorded once.

        Refused: an incomplete run (grading was interrupted; it is not a grade), and results
        that would merge two different submissions under one name without ``merge``."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            added = present = 0
            for run, origin in runs:
                a, p = self._import_run(run, origin=origin, submission=submission, merge=merge)
                added, present = added + a, present + p
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return added, present

    def import_run(self, run: RunResult, *, origin: str, submission: str = "", merge: bool = False) -> tuple[int, int]:
        """``import_runs`` of one run."""
        return self.import_runs([(run, origin)], submission=submission, merge=merge)

    def _import_run(self, run: RunResult, *, origin: str, submission: str, merge: bool) -> tuple[int, int]:
        if run.incomplete:
            raise GradebookError("this result is incomplete (grading was interrupted): it is not a grade; "
                                 "grade the submission again")
        what, commit = split_submission(run.submission)
        label = submission or what or "(unnamed)"
        if submission:
            key = f"name:{submission}"
            self._refuse_merge(key, run.submission_id, merge)
        else:
            key = (what or "(unnamed)") + (f"#{run.submission_id}" if run.submission_id else "")
        added = 0
        for ex in run.exercises:
            identity = json.dumps({"submission": run.submission, "started_at": run.started_at,
                                   "grader_version": run.grader_version, "jax_version": run.jax_version,
                                   "exercise": ex.to_dict(private=True)}, sort_keys=True)
            record_id = "import:" + hashlib.sha256(identity.encode()).hexdigest()
            added += self._insert(Grading(
                result=ex, submission=label, submission_key=key, source=run.submission, commit=commit,
                grader_version=run.grader_version, jax_version=run.jax_version, graded_at=run.started_at,
                origin=origin, record_id=record_id, submission_id=run.submission_id,
            ))
        return added, len(run.exercises) - added

    # -- reading -------------------------------------------------------------------------
    def unit_keys(self) -> set[str]:
        """Every unit key graded so far (what ``grade batch`` skips)."""
        return {row[0] for row in self.db.execute("SELECT DISTINCT unit_key FROM gradings WHERE unit_key != ''")}

    def failed_unit_keys(self) -> set[str]:
        """Unit keys whose latest grading is a grader error (what ``--retry-errors`` regrades)."""
        rows = self.db.execute(
            "SELECT g.unit_key, g.error FROM gradings AS g WHERE g.unit_key != '' AND g.id = "
            "(SELECT h.id FROM gradings AS h WHERE h.unit_key = g.unit_key ORDER BY h.graded_at DESC, h.id DESC"
            " LIMIT 1)")
        return {key for key, error in rows if error}

    def latest_by_unit(self) -> dict[str, dict[str, Any]]:
        """For each unit key, its latest grading's exercise, score, max_score, error and time."""
        rows = self.db.execute("SELECT unit_key, exercise, score, max_score, error, graded_at FROM gradings"
                               " WHERE unit_key != '' ORDER BY graded_at, id")
        return {row["unit_key"]: dict(row) for row in rows}

    def count(self) -> int:
        return self.db.execute("SELECT count(*) FROM gradings").fetchone()[0]

    def gradings(self, *, history: bool = False, private: bool = False,
                 submission_keys: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Gradings in a stable order (submission, exercise, time), each with its result."""
        table = "gradings" if history else "latest_gradings"
        rows = self.db.execute(f"SELECT * FROM {table} ORDER BY submission, submission_key, exercise, graded_at, id")
        wanted = set(submission_keys) if submission_keys is not None else None
        out = []
        for row in rows:
            if wanted is not None and row["submission_key"] not in wanted:
                continue
            result = ExerciseResult.from_dict(json.loads(row["result_json"]))
            out.append({
                "submission": row["submission"], "submission_key": row["submission_key"], "source": row["source"],
                "commit": row["git_commit"], "content_hash": row["content_hash"], "exercise": row["exercise"],
                "slug": row["slug"], "title": row["title"], "score": row["score"], "max_score": row["max_score"],
                "error": row["error"], "seed": row["seed"], "hidden_run": bool(row["hidden_run"]),
                "grader_version": row["grader_version"], "jax_version": row["jax_version"],
                "hidden_digest": row["hidden_digest"], "checks_digest": row["checks_digest"],
                "graded_at": row["graded_at"], "duration_s": row["duration_s"], "origin": row["origin"],
                "result": result.to_dict(private=private),
            })
        return out

    def check_rows(self, *, history: bool = False, private: bool = False) -> list[dict[str, Any]]:
        """One row per submission, exercise and check (``CSV_COLUMNS``, plus ``private``)."""
        view = "check_rows" if history else "latest_check_rows"
        rows = self.db.execute(f"SELECT * FROM {view} ORDER BY submission, submission_key, exercise, graded_at,"
                               f" grading_id, position")
        out = []
        for row in rows:
            d = {col: row[col] for col in row.keys()}
            d["commit"] = d.pop("git_commit")
            d["check"] = d.pop("check_name")
            d["hidden_run"] = bool(d["hidden_run"])
            record = {col: d[col] for col in CSV_COLUMNS}
            if private:
                record["private"] = d["private"]
            out.append(record)
        return out


def _statements(script: str) -> list[str]:
    """Split a schema script into statements (it holds no string literals with ';')."""
    return [s.strip() for s in script.split(";") if s.strip()]


def write_csv(rows: list[dict[str, Any]], out: IO[str]) -> None:
    columns = list(CSV_COLUMNS) + (["private"] if rows and "private" in rows[0] else [])
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _csv_cell(v) for k, v in row.items()})


def _csv_cell(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else value


def export_json(book: Gradebook, *, history: bool = False, private: bool = False) -> str:
    doc = {"format_version": EXPORT_FORMAT_VERSION, "schema_version": SCHEMA_VERSION, "history": history,
           "private": private, "gradings": book.gradings(history=history, private=private)}
    return json.dumps(doc, indent=2)

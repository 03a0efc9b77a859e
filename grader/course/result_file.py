"""Result files that ``grade gradebook import`` takes: read within bounds, every result checked
against the course's manifest, and -- where the course keeps a key -- proved to come from
the grader.

A result file is JSON anyone can write: a learner's fork writes the same format
(``grade all --json``), and a file mailed in, uploaded to the wrong place or picked up by an
artifact pattern is imported like any other.  Shape alone proved nothing: a file claiming
5500/6 for exercise 3 (every check ``passed`` with 1000 points, plus a check that does not
exist) was recorded and exported as is, and one nested 100 000 levels deep crashed the
import with a traceback.  So a file is taken only when

* **it is cheap to read**: at most ``MAX_FILE_BYTES`` bytes, ``FILE_LIMITS`` elements and
  nesting (checked before anything is decoded: ``grader.boundedjson``), each text field at
  most ``MAX_TEXT`` characters, each integer within SQLite's 64 bits;
* **every field is one the grader writes**, of the type it writes (``format_version`` one
  this grader reads; no unknown field);
* **every result is one the grader could have written for this course**: each exercise is
  in the manifest (same slug), listed once, with exactly the manifest's checks, each with
  its visibility and its points as ``max_score`` (0 only when it did not run); a check
  scores all or nothing and ``passed`` means full points; ``blocked`` only when a check it
  requires did not pass, and a passed check only when all of them did; ``integrity`` only
  on a measured check of an exercise whose integrity list says why, and such an exercise has
  no measured check that passed, failed or was blocked; without hidden checks, none of them
  ran; a grader error scores nothing; stated totals equal the checks' sums;
* **it is signed, when the course keeps a key**: with ``GRADER_RESULT_KEY`` set (a secret of
  the instructor workflow), ``grade ci`` adds ``"signature": {"alg": "hmac-sha256", "key_id",
  "mac"}`` to each result it writes (``sign``), an HMAC of the result's canonical JSON; and
  ``grade gradebook import`` with the key set refuses a result without a valid one.  Nothing
  but a key proves a result is the grader's: a forger who knows the manifest can write a
  consistent full score.  Without a key nothing is signed or required, as before.

The first problem found refuses the whole file, named with where it is (item, exercise,
check) and what was expected; nothing of a refused file is imported.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import math
import os
from pathlib import Path
from typing import Any

from grader import boundedjson
from grader.course.gradebook import GradebookError, utc_iso
from grader.manifest import Check, Manifest
from grader.results import (BLOCKED, ERROR, FAILED, INTEGRITY, NOT_RUN, PASSED, READABLE_FORMAT_VERSIONS, STATUSES,
                            RunResult)

MAX_FILE_BYTES = 128 << 20
#: A result of all twelve exercises holds about 3 000 elements and is 5 levels deep (6 in a
#: list of results, as ``grade batch`` keeps what its gradebook refused).
FILE_LIMITS = boundedjson.Limits(max_bytes=MAX_FILE_BYTES, max_elements=4_000_000, max_depth=8)
MAX_TEXT = 1 << 20  # characters in one text field (the longest the grader writes: output and tracebacks, capped)
MAX_INT = 2**63  # SQLite's INTEGER
KEY_ENV = "GRADER_RESULT_KEY"
SIGNATURE = "signature"
SIGNATURE_ALG = "hmac-sha256"

_ANY_INT, _INT_OR_NULL, _TEXT, _FLAG, _NUMBER, _LIST, _OBJECT = (
    "an integer within 64 bits", "an integer or null", f"a text of at most {MAX_TEXT} characters", "true or false",
    "a number of seconds, not negative", "a list", "an object")
#: Every field the grader writes, by level, with its type; ``*`` marks the required ones
#: (``RunResult.from_dict``'s needs).  Format 2 wrote a subset of format 3's fields; format 4 added timings.
_RUN_FIELDS = {"format_version*": _ANY_INT, "grader_version*": _TEXT, "jax_version*": _TEXT, "submission": _TEXT,
               "submission_id": _TEXT, "started_at": _TEXT, "seed": _INT_OR_NULL, "incomplete": _FLAG,
               "score": _INT_OR_NULL, "max_score": _ANY_INT, "duration_s": _NUMBER, "error": _TEXT,
               "exercises*": _LIST, SIGNATURE: _OBJECT}
_EXERCISE_FIELDS = {"number*": _ANY_INT, "slug*": _TEXT, "title*": _TEXT, "files*": _LIST, "seed*": _ANY_INT,
                    "score": _ANY_INT, "max_score": _ANY_INT, "hidden_run*": _FLAG, "all_passed": _FLAG,
                    "duration_s": _NUMBER, "error": _TEXT, "integrity": _LIST, "content_digest": _TEXT,
                    "checks*": _LIST, "output": _TEXT, "private": _TEXT, "timings": _OBJECT}
_CHECK_FIELDS = {"name*": _TEXT, "visibility*": _TEXT, "summary*": _TEXT, "status*": _TEXT, "passed": _FLAG,
                 "score*": _ANY_INT, "max_score*": _ANY_INT, "message": _TEXT, "measured": _TEXT, "expected": _TEXT,
                 "hint": _TEXT, "detail": _TEXT, "duration_s": _NUMBER, "file": _TEXT, "line": _ANY_INT,
                 "private": _TEXT}
#: Per format version: the statuses it may hold (format 3 added blocked and integrity).
_STATUSES = {2: (PASSED, FAILED, ERROR, NOT_RUN), 3: STATUSES, 4: STATUSES}
#: ``timings`` (format 4): at most this many workers, each {"cpu_s", "wall_s"} (numbers of seconds) and,
#: for a learner-free worker that answered from memory, "remembered" (how many answers); for a worker
#: that started, "start_cpu_s" and "import_cpu_s" (its start-up's and the learner's import's CPU seconds)
MAX_TIMED_WORKERS = 16


class BadResultFile(GradebookError):
    """A result file the gradebook does not take; the message names the first problem."""


@dataclasses.dataclass(frozen=True)
class ResultFile:
    path: Path
    runs: tuple[RunResult, ...]
    signed: int  # how many of them carry a signature (checked only where the key is set)


class _Problem(Exception):
    """One problem, where it is and what was expected (turned into ``BadResultFile``)."""


def course_key() -> bytes | None:
    """The course's result key (``GRADER_RESULT_KEY``), or None when it keeps none."""
    text = os.environ.get(KEY_ENV, "")
    return text.encode("utf-8") if text else None


def key_id(key: bytes) -> str:
    """A name for a key that gives nothing away (which key signed a result)."""
    return hashlib.sha256(b"grader-result-key|" + key).hexdigest()[:12]


def _canonical(doc: dict) -> bytes:
    return json.dumps({k: v for k, v in doc.items() if k != SIGNATURE}, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=True, allow_nan=False).encode("ascii")


def sign(doc: dict, key: bytes | None = None) -> dict:
    """``doc`` (a ``RunResult.to_dict``) with the course key's signature added, or as it is
    when the course keeps no key."""
    key = key if key is not None else course_key()
    if key is None:
        return doc
    mac = hmac.new(key, _canonical(doc), hashlib.sha256).hexdigest()
    return {**doc, SIGNATURE: {"alg": SIGNATURE_ALG, "key_id": key_id(key), "mac": mac}}


def read(path: Path, manifest: Manifest, key: bytes | None = None) -> ResultFile:
    """The results in ``path`` (one result object, or a list of them), each checked as the
    module's docstring says; ``BadResultFile`` names the first problem."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read(FILE_LIMITS.max_bytes + 1)  # no more than that is ever read
    except OSError as exc:
        raise BadResultFile(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        doc = boundedjson.loads(data, FILE_LIMITS)
    except boundedjson.TooCostly as exc:
        what = f"over {exc.limit} bytes long" if exc.what == "bytes" else str(exc)
        raise BadResultFile(f"{path} is not a result file the grader wrote: it is {what} (a result of every "
                            f"exercise holds a few thousand values, 5 levels deep); nothing was imported") from None
    except ValueError as exc:
        raise BadResultFile(f"{path} is not JSON ({exc}); nothing was imported") from None
    items = doc if isinstance(doc, list) else [doc]
    runs, signed = [], 0
    for i, item in enumerate(items):
        where = f"{path}" + (f" (item {i + 1})" if isinstance(doc, list) else "")
        try:
            run = _run(item, manifest, key)
        except _Problem as exc:
            raise BadResultFile(f"{where}: {exc}; nothing from this file was imported -- import only what "
                                f"`grade ci ... --json FILE` wrote for this course") from None
        signed += SIGNATURE in item
        runs.append(run)
    return ResultFile(path, tuple(runs), signed)


# --- checks --------------------------------------------------------------------------------

def _fields(d: Any, spec: dict[str, str], where: str) -> None:
    if not isinstance(d, dict):
        raise _Problem(f"{where} is {_described(d)}, not an object")
    known = {name.rstrip("*"): kind for name, kind in spec.items()}
    for name in d:
        if name not in known:
            raise _Problem(f"{where} has a field the grader never writes: {_shown(name)}")
    for name, kind in spec.items():
        if name.endswith("*") and name[:-1] not in d:
            raise _Problem(f"{where} lacks the field {name[:-1]!r}")
    for name, value in d.items():
        kind = known[name]
        is_int = type(value) is int and -MAX_INT <= value < MAX_INT
        ok = {_ANY_INT: is_int,
              _INT_OR_NULL: is_int or value is None,
              _TEXT: type(value) is str and len(value) <= MAX_TEXT,
              _FLAG: type(value) is bool,
              _NUMBER: type(value) in (int, float) and math.isfinite(value) and 0 <= value < 1e9,
              _LIST: type(value) is list,
              _OBJECT: type(value) is dict}[kind]
        if not ok:
            raise _Problem(f"{where}: {name!r} should be {kind}, not {_described(value)}")


def _run(d: Any, manifest: Manifest, key: bytes | None) -> RunResult:
    if isinstance(d, dict) and d.get("format_version") not in READABLE_FORMAT_VERSIONS:
        found = d.get("format_version")
        raise _Problem(f"not a grader result of format_version {READABLE_FORMAT_VERSIONS[-1]} (found {found!r})")
    _fields(d, _RUN_FIELDS, "the result")
    _signature(d, key)
    if d.get("incomplete"):
        raise _Problem("grading was interrupted there (the result is marked incomplete); it is not a grade -- "
                       "grade the submission again")
    if d.get("started_at"):
        try:
            utc_iso(d["started_at"])
        except GradebookError:
            raise _Problem(f"started_at {_shown(d['started_at'])} is not an ISO 8601 time") from None
    seen: set[int] = set()
    for ex in d["exercises"]:
        number = ex.get("number") if isinstance(ex, dict) else None
        where = f"exercise {number}" if type(number) is int else "an exercise"
        _exercise(ex, manifest, d["format_version"], where)
        if number in seen:
            raise _Problem(f"{where} is listed twice")
        seen.add(number)
    run = RunResult.from_dict(d)
    _totals(d, run.score, run.max_score, "the result")
    return run


def _signature(d: dict, key: bytes | None) -> None:
    sig = d.get(SIGNATURE)
    if key is None:
        if sig is not None and not isinstance(sig, dict):
            raise _Problem("its signature is not an object")
        return
    if sig is None:
        raise _Problem(f"it is not signed, and this course signs its results ({KEY_ENV} is set here): it was not "
                       f"written by `grade ci` with the course's key")
    if set(sig) != {"alg", "key_id", "mac"} or sig.get("alg") != SIGNATURE_ALG:
        raise _Problem(f"its signature is not one the grader writes ({SIGNATURE_ALG}: alg, key_id, mac)")
    if sig.get("key_id") != key_id(key):
        raise _Problem(f"it is signed with another key (key id {_shown(sig.get('key_id'))}; this course's is "
                       f"{key_id(key)}): was {KEY_ENV} changed, or is it another course's result?")
    expected = hmac.new(key, _canonical(d), hashlib.sha256).hexdigest()
    if not isinstance(sig.get("mac"), str) or not hmac.compare_digest(sig["mac"], expected):
        raise _Problem("its signature does not match its contents: it was changed after `grade ci` wrote it")


def _timings(d: dict, where: str) -> None:
    if len(d) > MAX_TIMED_WORKERS:
        raise _Problem(f"{where}: 'timings' names {len(d)} workers; a grading has at most {MAX_TIMED_WORKERS}")
    for role, t in d.items():
        _fields(t, {"cpu_s*": _NUMBER, "wall_s*": _NUMBER, "remembered": _NUMBER, "start_cpu_s": _NUMBER,
                    "import_cpu_s": _NUMBER}, f"{where}, timings of {_shown(role)}")
        if len(role) > 64:
            raise _Problem(f"{where}: 'timings' has a worker name over 64 characters")


def _exercise(d: Any, manifest: Manifest, version: int, where: str) -> None:
    _fields(d, _EXERCISE_FIELDS, where)
    try:
        spec = manifest.get(d["number"])
    except KeyError:
        raise _Problem(f"{where} is not in this course's manifest "
                       f"(its exercises: {', '.join(str(e.number) for e in manifest.exercises)})") from None
    if d["slug"] != spec.slug:
        raise _Problem(f"{where} is {_shown(d['slug'])} here but {spec.slug!r} in this course's manifest")
    for name in ("files", "integrity"):
        if not all(type(x) is str and len(x) <= MAX_TEXT for x in d.get(name, ())):
            raise _Problem(f"{where}: {name!r} should be a list of texts")
    _timings(d.get("timings", {}), where)
    checks = d["checks"]
    by_name: dict[str, dict] = {}
    for c in checks:
        cname = c.get("name") if isinstance(c, dict) else None
        cwhere = f"{where}, check {_shown(cname)}" if type(cname) is str else f"{where}, a check"
        _fields(c, _CHECK_FIELDS, cwhere)
        if c["name"] in by_name:
            raise _Problem(f"{cwhere} is listed twice")
        by_name[c["name"]] = c
    names = [c.name for c in spec.checks]
    extra = [n for n in by_name if n not in names]
    if extra:
        raise _Problem(f"{where}, check {_shown(extra[0])} is not a check of exercise {spec.number} in this "
                       f"course's manifest (its checks: {', '.join(names)})")
    missing = [n for n in names if n not in by_name]
    if missing:
        raise _Problem(f"{where} lacks the check {missing[0]!r} (every result lists every check of its exercise)")
    for check in spec.checks:
        _check(by_name[check.name], check, by_name, d, version, f"{where}, check {check.name!r}")
    _totals(d, sum(c["score"] for c in checks), sum(c["max_score"] for c in checks), where)
    if "all_passed" in d and d["all_passed"] != (bool(checks) and all(c["status"] == PASSED for c in checks)):
        raise _Problem(f"{where}: all_passed is {d['all_passed']}, which its checks' statuses contradict")


def _check(c: dict, spec: Check, by_name: dict[str, dict], exd: dict, version: int, where: str) -> None:
    status = c["status"]
    if status not in _STATUSES.get(version, STATUSES):
        raise _Problem(f"{where}: status {_shown(status)} is not one a format {version} result holds "
                       f"({', '.join(_STATUSES.get(version, STATUSES))})")
    if c["visibility"] != spec.visibility:
        raise _Problem(f"{where} is {_shown(c['visibility'])} here but {spec.visibility} in this course's manifest")
    full = 0 if status == NOT_RUN else spec.points
    if c["max_score"] != full:
        why = "a check that did not run is worth 0" if status == NOT_RUN else f"it is worth {spec.points}"
        raise _Problem(f"{where}: max_score is {c['max_score']}, but {why} in this course's manifest")
    if c["score"] != (full if status == PASSED else 0):
        raise _Problem(f"{where}: score {c['score']} with status {status}; a check scores all or nothing "
                       f"({full} when passed, else 0)")
    if "passed" in c and c["passed"] != (status == PASSED):
        raise _Problem(f"{where}: passed is {c['passed']} but its status is {status}")
    # A check is blocked (or not) before an integrity violation turns measured checks into
    # `integrity`: a check required by a passed one may be `integrity` now, never failed.
    if status == BLOCKED and all(by_name[r]["status"] == PASSED for r in spec.requires):
        raise _Problem(f"{where} is blocked, but every check it requires passed"
                       + ("" if spec.requires else " (it requires none)"))
    unmet = [r for r in spec.requires if by_name[r]["status"] not in (PASSED, INTEGRITY)]
    if status == PASSED and unmet:
        raise _Problem(f"{where} passed, but it scores only once {unmet[0]!r} passes, which did not")
    integrity = exd.get("integrity", [])
    if status == INTEGRITY and not (integrity and spec.measured):
        raise _Problem(f"{where} has status integrity, but " + (
            "the exercise records no integrity violation" if not integrity else "it is not a measured check"))
    if integrity and spec.measured and status in (PASSED, FAILED, BLOCKED):
        raise _Problem(f"{where} is {status}, but the exercise records an integrity violation, which leaves "
                       f"a measured check integrity, error or not run")
    if spec.visibility == "hidden" and not exd["hidden_run"] and status != NOT_RUN:
        raise _Problem(f"{where} is {status}, but hidden checks did not run in this grading (hidden_run is false)")
    if exd.get("error") and status not in (ERROR, NOT_RUN):
        raise _Problem(f"{where} is {status}, but the grader failed on this exercise (its error is set)")


def _totals(d: dict, score: int, max_score: int, where: str) -> None:
    if d.get("score") is not None and d["score"] != score:
        raise _Problem(f"{where}: score is {d['score']}, but its checks add up to {score}")
    if "max_score" in d and d["max_score"] != max_score:
        raise _Problem(f"{where}: max_score is {d['max_score']}, but its checks add up to {max_score}")


def _described(value: Any) -> str:
    """A bad value, for a message: short ones as they are, others by kind."""
    names = {type(None): "null", bool: "true or false", str: "a text", list: "a list", dict: "an object"}
    if type(value) in (int, float, bool) or (type(value) is str and len(value) <= 40):
        return _shown(value)
    if type(value) is str:
        return f"a text of {len(value)} characters"
    return names.get(type(value), type(value).__name__)


def _shown(value: Any) -> str:
    """A value from the file as a message may quote it: escaped, and short."""
    from grader.safepath import shown

    text = repr(shown(value[:80])) if isinstance(value, str) else repr(value)[:80]
    return text if len(text) <= 80 else text[:77] + "..."

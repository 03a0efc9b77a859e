"""Answers of the learner-free workers, remembered: truth measured once is not measured again.

Two kinds of worker run no learner code: the clean worker (``Sandbox.clean``, the grader's
own measurements of the live JAX) and the reference solution's sandbox (what an honest
solution costs for the learner's requests).  Each is a deterministic function of what it
was asked: the same kind of worker, sent the same requests in the same order, gives the
same answers -- the same values, the same compile counts (its JAX caches hold what the
same history put there).  So this process remembers them, keyed by that history:

    key_0 = H(identity of the worker)                   -> the answer to its import
    key_i = H(key_(i-1) + the bytes of request i)       -> the answer to request i

The identity is everything a worker's answers can depend on besides its requests: the
reference solution's files (none for the clean worker), its limits, devices and probes,
whether it is forked from a zygote, whether learner-kind isolation is on, the grader's own
code, and the Python, JAX and jaxlib versions.

A ``Remembered`` worker whose identity this process has seen starts nothing: it answers
from memory while the history is one it has seen.  At the first request it has not, it
starts the real worker, replays every earlier request into it (so its state is the one
that history makes, compile caches included), and from then on runs for real, remembering
what it learns.  An identity never seen starts at once, as any worker does, so the first
grading costs what it did.

What it never touches: the learner's sandboxes (their answers are the learner's code's,
and running that code is the point), answers that end in a crash or a timeout (nothing is
stored for them), answers over ``MAX_ANSWER_BYTES``.  The memory lives in the trusted
process only -- a long-lived one (``grade verify``'s pool, ``grade batch``, ``grade watch``,
the test suite) gains most -- and holds at most ``MAX_TOTAL_BYTES``, least recently used
first out.  ``GRADER_NO_MEMO=1`` turns it off; ``GRADER_MEMO_AUDIT=1`` runs every worker
for real and compares each answer it remembers with the live one (``audit_mismatches``),
which is how the determinism this rests on is checked (``tests/test_memo.py``).
"""

from __future__ import annotations

import collections
import functools
import hashlib
import json
import os
import re
import sys
import threading
from pathlib import Path
from typing import Any

from grader.sandbox.client import Sandbox

MAX_ANSWER_BYTES = 4 << 20
MAX_TOTAL_BYTES = 256 << 20  # in this process's memory
MAX_DISK_BYTES = 64 << 20  # in the grader's cache folder
DISK_FOLDER = "answers"
FORMAT = b"grader-answer-memo-v1\0"
_ADDRESS = re.compile(r"\b(id=|0x)(?:(?<=id=)[0-9]{6,}|(?<=0x)[0-9a-f]{6,})\b")


def enabled() -> bool:
    return os.environ.get("GRADER_NO_MEMO") != "1"


def auditing() -> bool:
    return os.environ.get("GRADER_MEMO_AUDIT") == "1"


class Memo:
    """Answers by history key, least recently used first out (thread-safe); with
    ``persist``, also in a folder of the grader's cache that outlives the process."""

    def __init__(self, max_bytes: int = MAX_TOTAL_BYTES, folder: Path | None = None):
        self.max_bytes = max_bytes
        self._items: collections.OrderedDict[bytes, bytes] = collections.OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._folder = folder  # None: the grader's cache (grader.cache), found on first use
        self._writes = 0
        self.hits = 0
        self.misses = 0

    def folder(self) -> Path | None:
        """Where answers persist (``<grader cache>/answers``), or None when it cannot be made safely."""
        if self._folder is None:
            from grader.cache import compile_cache_folder

            self._folder = compile_cache_folder(DISK_FOLDER) or Path()
        return self._folder if self._folder != Path() else None

    def _from_disk(self, key: bytes) -> bytes | None:
        folder = self.folder()
        if folder is None:
            return None
        try:
            with open(folder / key.hex(), "rb") as fh:
                value = fh.read(MAX_ANSWER_BYTES + 1)
        except OSError:
            return None
        return value if len(value) <= MAX_ANSWER_BYTES else None

    def _to_disk(self, key: bytes, value: bytes) -> None:
        folder = self.folder()
        if folder is None:
            return
        tmp = folder / f".{key.hex()}.{os.getpid()}.{threading.get_ident()}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(value)
            os.replace(tmp, folder / key.hex())
        except OSError:
            tmp.unlink(missing_ok=True)
            return
        self._writes += 1
        if self._writes % 64 == 1:
            _prune_folder(folder, MAX_DISK_BYTES)

    def get(self, key: bytes, persist: bool = False) -> bytes | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
                self.hits += 1
                return value
        value = self._from_disk(key) if persist else None
        if value is None:
            self.misses += 1
            return None
        self.hits += 1
        self._remember(key, value)
        return value

    def knows(self, key: bytes, persist: bool = False) -> bool:
        with self._lock:
            if key in self._items:
                return True
        folder = self.folder() if persist else None
        return folder is not None and (folder / key.hex()).is_file()

    def put(self, key: bytes, value: bytes, persist: bool = False) -> None:
        if len(value) > MAX_ANSWER_BYTES:
            return
        self._remember(key, value)
        if persist:
            self._to_disk(key, value)

    def _remember(self, key: bytes, value: bytes) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= len(old)
            self._items[key] = value
            self._bytes += len(value)
            while self._bytes > self.max_bytes and self._items:
                _, dropped = self._items.popitem(last=False)
                self._bytes -= len(dropped)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0


def _prune_folder(folder: Path, limit: int) -> None:
    """The least recently written answers go first until the folder fits ``limit``."""
    try:
        entries = [(e.stat(follow_symlinks=False), e.path) for e in os.scandir(folder) if e.is_file(follow_symlinks=False)]
    except OSError:
        return
    total = sum(st.st_size for st, _ in entries)
    for st, path in sorted(entries, key=lambda t: t[0].st_mtime):
        if total <= limit:
            break
        try:
            os.unlink(path)
            total -= st.st_size
        except OSError:
            pass


_SHARED = Memo()
audit_mismatches: list[str] = []  # GRADER_MEMO_AUDIT=1: what a live worker answered differently


def shared() -> Memo:
    """This process's memory of learner-free answers."""
    return _SHARED


_CODE_DIGEST: bytes | None = None


def _code_digest() -> bytes:
    """The grader's own code (what workers import: ``grader.sandbox.install``)."""
    global _CODE_DIGEST
    if _CODE_DIGEST is None:
        from grader.sandbox.install import PACKAGE

        h = hashlib.sha256()
        for src in sorted(PACKAGE.rglob("*.py")):
            if "__pycache__" not in src.parts:
                h.update(str(src.relative_to(PACKAGE)).encode() + b"\0" + src.read_bytes() + b"\0")
        _CODE_DIGEST = h.digest()
    return _CODE_DIGEST


@functools.cache
def _versions() -> str:
    from importlib import metadata

    found = []
    for name in ("jax", "jaxlib", "numpy", "optax", "equinox"):
        try:
            found.append(f"{name}={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name}=none")
    return f"python={sys.version};" + ";".join(found)


def identity(box: Sandbox) -> bytes:
    """Everything ``box``'s answers depend on besides its requests."""
    from grader.sandbox import client, user

    parts = {
        "files": box.snapshot.digest() if box.snapshot is not None else None,
        "memory_mb": box.memory_mb,
        "cpu_devices": box.cpu_devices,
        "extra_env": sorted(box.extra_env.items()),
        "probes": box.probes,
        "jax": box.jax,
        # forked from a zygote (and which probe modules it imported: their import-time work
        # is in its JAX caches already) or started fresh
        "zygote": box.zygote.probes if box.zygote is not None and box.zygote.alive and box.jax else None,
        "isolating": user.isolating(),
        "env": sorted(client.base_env().items()),
        "versions": _versions(),
    }
    return hashlib.sha256(FORMAT + _code_digest() + json.dumps(parts, sort_keys=True).encode()).digest()


class Remembered(Sandbox):
    """A learner-free worker (the clean worker, the reference solution) that answers from
    this process's memory while its history is one seen before (module docstring)."""

    def __init__(self, source, *, memo: Memo | None = None, persist: bool = False, **kwargs):
        super().__init__(source, **kwargs)
        self.memo = memo if memo is not None else shared()
        self.persist = persist  # also on disk (``may_persist``)
        self._audit = auditing()
        self._chain = b""  # the history key so far ("" until the identity is known)
        self._history: list[tuple[int, bytes]] = []  # (rid, request body) while not live: what a live worker replays
        self._keys: dict[int, bytes] = {}  # rid -> its history key (live answers are remembered under it)
        self._recalled: dict[int, bytes] = {}  # rid -> the remembered answer
        self._live = False
        self.recalled = 0  # answers given from memory (timings and tests)

    def _root(self) -> bytes:
        if not self._chain:
            self._chain = identity(self)
        return self._chain

    def start(self) -> "Remembered":
        if self._live or self._audit or not self.memo.knows(self._root(), self.persist):
            self._live = True
            super().start()
        return self

    def begin_import(self) -> None:
        if self._live:
            super().begin_import()

    def _wait_ready(self) -> None:
        __tracebackhide__ = True
        if self._ready:
            return
        if not self._live:
            self.start()
        if not self._live and self.memo.get(self._root(), self.persist) is not None:
            self._ready = True  # it imported before, in a worker of this identity
            return
        self._go_live()

    def _go_live(self) -> None:
        """Start the real worker and bring it to where the history so far has taken it."""
        __tracebackhide__ = True
        self._live, self._ready = True, False
        super().start()
        super()._wait_ready()  # raises the worker's own failure (not remembered)
        self.memo.put(self._root(), b"imported", self.persist)
        for rid, body in self._history[:-1]:  # each answered from memory: the live worker must still live it
            super()._send_request(rid, body)
            self._read_answer(rid)
        self._history = []  # live from here: nothing more to replay

    def _send_request(self, rid: int, body: bytes) -> None:
        __tracebackhide__ = True
        key = hashlib.sha256(self._chain + body).digest()
        self._chain = key
        self._keys[rid] = key
        if not self._live:
            self._history.append((rid, body))
            remembered = self.memo.get(key, self.persist)
            if remembered is not None:
                self._recalled[rid] = remembered
                self.recalled += 1
                return
            self._go_live()
        super()._send_request(rid, body)

    def result(self, rid: int) -> Any:
        __tracebackhide__ = True
        remembered = self._recalled.pop(rid, None)  # (the live worker, if it started since, gave the same)
        if remembered is not None:
            msg = json.loads(remembered)
            self.unmeasured = msg["unmeasured"]
            self._last_meter = msg["meter"]
            return self._answer_of(msg["answer"])
        return super().result(rid)

    def _placeless(self, text: str) -> bytes:
        """``text`` without what differs from one live run to the next and means nothing:
        the worker's own folder (a fresh name each time) is written as the place it stands
        for (the reference solution's folder, or ``<clean worker>``), and object addresses
        in JAX's messages (``id=140457252594016``, ``at 0x7f...``) as 0."""
        if self._box is not None:
            there = str(self.module_path.parent) if self.module_path is not None else "<clean worker>"
            text = text.replace(json.dumps(str(self._box))[1:-1], json.dumps(there)[1:-1])
        from grader.sandbox.install import grader_base

        text = text.replace(json.dumps(str(grader_base()))[1:-1], "<grader>")
        return _ADDRESS.sub(lambda m: m.group(1) + "0", text).encode()

    def _read_answer(self, rid: int) -> dict:
        __tracebackhide__ = True
        msg = super()._read_answer(rid)
        key = self._keys.get(rid)
        if key is not None and isinstance(msg, dict):
            value = self._placeless(json.dumps({"answer": msg, "meter": self._last_meter, "unmeasured": self.unmeasured},
                                               sort_keys=True, separators=(",", ":")))
            msg = json.loads(value)["answer"]  # what a recalled answer will be, to the byte
            if self._audit:
                before = self.memo.get(key, self.persist)
                if before is not None and before != value:
                    at = next((i for i, (a, b) in enumerate(zip(before, value)) if a != b), min(len(before), len(value)))
                    start = max(0, at - 80)  # around where they first differ
                    audit_mismatches.append(f"{self.snapshot.display_path if self.snapshot else 'clean worker'} "
                                            f"request {rid}, from byte {start}: remembered {before[start:at + 220]!r}, "
                                            f"live {value[start:at + 220]!r}")
            self.memo.put(key, value, self.persist)
        return msg


def learner_free(source, *, persist: bool = False, **kwargs) -> Sandbox:
    """A worker that runs no learner code (``source``: the reference solution's files, or
    ``None`` for a clean worker): remembered unless ``GRADER_NO_MEMO=1``."""
    return Remembered(source, persist=persist, **kwargs) if enabled() else Sandbox(source, **kwargs)


def may_persist(public_only: bool) -> bool:
    """Answers outlive the process only where the persistent compile cache may be used
    (``grader.runner.compile_cache_for``): a public-only grading, not as root -- nothing
    that counts is at stake, and no other user's grading reads what this one wrote."""
    from grader import cache

    return public_only and cache.usable()

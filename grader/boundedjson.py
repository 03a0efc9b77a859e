"""JSON someone else shaped, read within limits before a single object is built.

``json.loads`` builds every object of a document before anyone can look at it, and
recurses once per level of nesting.  So its cost is set by whoever wrote the document: a
40 MB sandbox answer of 3.5 million dict keys cost the trusted process seconds and most of
a GB on every call, and a result file nested 100 000 levels deep crashed ``grade gradebook
import`` with a RecursionError.  The size in bytes says little about either.

``check`` reads a document's shape -- bytes, elements, nesting depth -- in linear,
vectorised passes over the raw bytes (no object built, no recursion, memory bounded by a
chunk), and ``loads`` decodes only a document within the ``Limits`` given, else raises
``TooCostly`` naming the first limit it crosses.

An **element** is what costs to build: every value (a container too), every dict key, and
every empty container once more.  From the text that is, outside string literals, one per ``,``, ``:``, ``[`` and ``{``, plus one -- exact for any JSON document, whatever
its spacing.  ``grader.plaindata.to_plain`` counts what it encodes in the same unit
(``to_plain(value, max_elements=N)``), so an honest sandbox refuses an oversized answer itself,
with a message for the learner, before the trusted side ever sees it.

Strings are told apart without a regex (millions of small strings made one too slow):
escaped backslashes (``\\\\``) and then escaped quotes (``\\"``) are removed, after which a
byte is inside a string exactly when an odd number of quotes precede it, which numpy reads
off in chunks.  Within the part of a document that is valid JSON this finds exactly the
strings ``json.loads`` finds, so the depth seen here bounds the depth ``json.loads`` can
reach before it stops.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

_CHUNK = 4 << 20  # bytes looked at at once: bounds the scan's own memory
_QUOTE, _COMMA, _COLON = ord('"'), ord(","), ord(":")
_OPEN = (ord("["), ord("{"))
_CLOSE = (ord("]"), ord("}"))


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one document may cost: bytes, elements (see the module's docstring), depth."""

    max_bytes: int
    max_elements: int
    max_depth: int


@dataclasses.dataclass(frozen=True)
class Shape:
    bytes: int
    elements: int
    depth: int


class TooCostly(ValueError):
    """A document over one of its limits; ``what`` is ``"bytes"``, ``"elements"`` or
    ``"depth"``, ``measured`` how much (for elements and depth: at least that), ``limit``
    the limit."""

    def __init__(self, what: str, measured: int, limit: int):
        self.what, self.measured, self.limit = what, measured, limit
        words = {"bytes": f"{measured} bytes long (the limit is {limit})",
                 "elements": f"more than {limit} values and keys",
                 "depth": f"nested more than {limit} levels deep"}[what]
        super().__init__(words)


def check(data: bytes | str, limits: Limits) -> Shape:
    """The shape of ``data``, or ``TooCostly`` for the first limit it crosses (bytes, then
    elements and depth as the scan meets them); ``ValueError`` for brackets that close
    what was never opened (not JSON)."""
    import numpy as np

    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    if len(data) > limits.max_bytes:
        raise TooCostly("bytes", len(data), limits.max_bytes)
    size = len(data)
    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    raw = np.frombuffer(data, np.uint8)
    elements, depth, deepest, quoted_before = 1, 0, 0, False
    for start in range(0, len(raw), _CHUNK):
        part = raw[start:start + _CHUNK]
        quoted = np.logical_xor.accumulate(part == _QUOTE)  # an odd number of quotes so far: in a string
        if quoted_before:
            quoted = ~quoted
        quoted_before = bool(quoted[-1])
        bare = part[~quoted]
        opens = (bare == _OPEN[0]) | (bare == _OPEN[1])
        elements += int(np.count_nonzero(opens | (bare == _COMMA) | (bare == _COLON)))
        if elements > limits.max_elements:
            raise TooCostly("elements", elements, limits.max_elements)
        steps = opens.astype(np.int32) - ((bare == _CLOSE[0]) | (bare == _CLOSE[1]))
        steps = steps[steps != 0]
        if len(steps):
            levels = np.cumsum(steps, dtype=np.int64) + depth
            if int(levels.min()) < 0:
                raise ValueError("not JSON: a bracket closes what was never opened")
            deepest = max(deepest, int(levels.max()))
            if deepest > limits.max_depth:
                raise TooCostly("depth", deepest, limits.max_depth)
            depth = int(levels[-1])
    return Shape(size, elements, deepest)


def loads(data: bytes | str, limits: Limits) -> Any:
    """``json.loads(data)`` for a document within ``limits``; ``TooCostly`` otherwise,
    ``ValueError`` (``json.JSONDecodeError``) for one that is not JSON."""
    check(data, limits)
    return json.loads(data)

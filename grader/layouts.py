"""Where an array lives on a ("data", "model") mesh, as plain data, and how to say it in words.

Two halves, for the two sides of the sandbox:

* ``sharding_record(sharding, shape)`` and ``mesh_record(grid)`` run in the sandbox (probes of
  the sharding exercises call them on what JAX compiled) and turn a sharding into the block of
  the array each device holds: ``{"kind", "text", "spec", "mesh_axes", "global_shape",
  "shard_shape", "blocks": [[device id, [[start, stop] per dimension]], ...]}``.
* ``layout_blocks``, ``has_layout``, ``describe_axes`` and ``recognise`` run on the trusted side:
  a layout is a tuple naming, per dimension of a 2-D array, the mesh axis that splits it (or
  ``None``, or a tuple of axes that split it together, the first one major, as
  ``P(("data", "model"), None)`` does); a record *has* a layout when every device holds exactly the block the layout
  gives it on that mesh.  Judging blocks, not spec text, is what makes ``P("data")`` and
  ``P("data", None)`` the same layout, and a split over an axis of one device the same as no
  split.  The words name no size, so a hidden check may show them.
"""

from __future__ import annotations

AXES = ("data", "model")

#: What can split one dimension: nothing, one mesh axis, or both together (the first one major).
SPLITS = (None, *AXES, AXES, AXES[::-1])


def _names(axis) -> tuple:
    """The mesh axis names one PartitionSpec entry uses: (), ("data",), ("data", "model")..."""
    return () if axis is None else axis if isinstance(axis, tuple) else (axis,)


#: the layouts a 2-D input or output can be recognised as (per dimension: what splits it; no
#: mesh axis used twice, as a PartitionSpec allows)
CANDIDATE_AXES = tuple((a, b) for a in SPLITS for b in SPLITS if not set(_names(a)) & set(_names(b)))
#: what ``recognise`` says of a layout no candidate gives (it follows "x has")
OTHER_LAYOUT = "a layout no PartitionSpec over 'data' and 'model' gives"


# --- in the sandbox -------------------------------------------------------------------------

def mesh_record(grid) -> dict:
    """``{"shape": [d, m], "device_ids": [[...], ...]}`` of a 2-D grid of devices."""
    return {"shape": [int(n) for n in grid.shape], "device_ids": [[int(dev.id) for dev in row] for row in grid]}


def sharding_record(sharding, shape) -> dict:
    """What a sharding means for an array of ``shape``: which block each device holds."""
    shape = tuple(int(n) for n in shape)
    blocks = []
    for device, index in sharding.devices_indices_map(shape).items():
        spans = []
        for sl, n in zip(index, shape):
            start, stop, _ = sl.indices(n)
            spans.append([int(start), int(stop)])
        blocks.append([int(device.id), spans])
    blocks.sort(key=lambda b: b[0])
    mesh = getattr(sharding, "mesh", None)
    spec = getattr(sharding, "spec", None)
    return {
        "kind": type(sharding).__name__,
        "text": repr(sharding),
        "spec": None if spec is None else str(spec),
        "mesh_axes": None if mesh is None else {str(k): int(v) for k, v in dict(mesh.shape).items()},
        "global_shape": list(shape),
        "shard_shape": [int(n) for n in sharding.shard_shape(shape)],
        "blocks": blocks,
    }


# --- on the trusted side ----------------------------------------------------------------------

def layout_blocks(shape, axes, result):
    """Device id -> [[start, stop] per dimension] that ``axes`` implies on ``result["mesh"]``."""
    d, m = result["mesh"]["shape"]
    blocks = {}
    for i, row in enumerate(result["mesh"]["device_ids"]):
        for j, dev in enumerate(row):
            position = {"data": (i, d), "model": (j, m)}
            spans = []
            for n, axis in zip(shape, axes):
                k, parts = 0, 1
                for name in _names(axis):
                    index, size = position[name]
                    k, parts = k * size + index, parts * size
                spans.append([k * n // parts, (k + 1) * n // parts])
            blocks[dev] = spans
    return blocks


def measured_blocks(record):
    return {dev: spans for dev, spans in record["blocks"]}


def has_layout(record, axes, result) -> bool:
    return measured_blocks(record) == layout_blocks(record["global_shape"], axes, result)


def _split_words(axis) -> str:
    if isinstance(axis, tuple):
        return "split over " + " and ".join(f"'{a}'" for a in axis) + " together"
    return f"split over '{axis}'"


def describe_axes(axes) -> str:
    """``rows split over 'data', columns whole``; ``no split: every device holds all of it``."""
    if all(axis is None for axis in axes):
        return "no split: every device holds all of it"
    return ", ".join(f"{label} whole" if axis is None else f"{label} {_split_words(axis)}"
                     for label, axis in zip(("rows", "columns"), axes))


def recognise(record, result, prefer) -> str:
    """What layout ``record`` has, in words that name no size: ``prefer`` when it matches (on a
    mesh axis of one device several layouts look alike), else the first candidate that does."""
    if has_layout(record, prefer, result):
        return describe_axes(prefer)
    for axes in CANDIDATE_AXES:
        if has_layout(record, axes, result):
            return describe_axes(axes)
    return OTHER_LAYOUT


def draw_mlp(rng):
    """Exercise 4's MLP problem, shared by the sharding exercises (4, 17, 18): a batch that
    splits over 2, 4 and 8 devices, a hidden layer wider than the output, as in a real MLP,
    and weights scaled by fan-in so values stay O(1)."""
    import numpy as np

    b = int(rng.choice([24, 32, 40, 48]))
    d = int(rng.choice([8, 16, 24]))
    h = int(rng.choice([32, 40, 48, 64]))
    o = int(rng.choice([8, 16, 24]))
    x = rng.normal(size=(b, d)).astype(np.float32)
    w1 = (rng.normal(size=(d, h)) / np.sqrt(d)).astype(np.float32)
    w2 = (rng.normal(size=(h, o)) / np.sqrt(h)).astype(np.float32)
    return x, w1, w2

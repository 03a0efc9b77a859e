"""Exercise 4's checks name a layout in words, without sizes: ``recognise`` on the blocks
each device holds, for layouts built by hand on the grader's meshes."""

import pytest

from grader.exercises.ex04_megatron.judges import (CANDIDATE_AXES, OTHER_LAYOUT, describe_axes, has_layout, layout_blocks,
                                                   recognise)


def mesh(d, m):
    return {"mesh": {"shape": [d, m], "device_ids": [[i * m + j for j in range(m)] for i in range(d)]}}


def record(shape, axes, result):
    return {"global_shape": list(shape), "blocks": sorted([dev, spans] for dev, spans in
                                                          layout_blocks(shape, axes, result).items())}


@pytest.mark.parametrize("axes", CANDIDATE_AXES)
def test_every_layout_is_recognised_on_the_2x4_mesh(axes):
    result = mesh(2, 4)
    rec = record((8, 16), axes, result)
    assert recognise(rec, result, prefer=("data", None)) == describe_axes(axes)
    assert has_layout(rec, axes, result)


def test_on_a_mesh_axis_of_one_device_the_expected_layout_is_preferred():
    result = mesh(8, 1)  # splitting over 'model' changes nothing here
    rec = record((8, 16), (None, "model"), result)
    assert recognise(rec, result, prefer=(None, "model")) == "rows whole, columns split over 'model'"
    assert recognise(rec, result, prefer=("data", None)) == "no split: every device holds all of it"


def test_the_words_name_no_size():
    for axes in CANDIDATE_AXES:
        assert not any(ch.isdigit() for ch in describe_axes(axes))


def test_a_layout_that_is_no_candidate_is_said_so():
    result = mesh(2, 4)
    rec = record((8, 16), ("data", None), result)
    rec["blocks"][0][1][0] = [0, 3]  # one device holds a block no spec gives
    assert recognise(rec, result, prefer=("data", None)) == OTHER_LAYOUT


def test_a_batch_split_over_both_axes_is_named():
    result = mesh(2, 4)
    rec = record((16, 8), (("data", "model"), None), result)
    assert recognise(rec, result, prefer=("data", None)) == "rows split over 'data' and 'model' together, columns whole"


def test_layout_blocks_agree_with_jax_on_every_mesh():
    """The blocks the judges expect are the ones NamedSharding gives, tuple axes included
    (checked in a fresh process: the device count is fixed when JAX starts)."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import jax
        jax.config.update("jax_num_cpu_devices", 8)
        import numpy as np
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        from grader.exercises.ex04_megatron.judges import CANDIDATE_AXES, has_layout
        from grader.exercises.ex04_megatron.probes import _sharding_record
        for d, m in [(2, 4), (4, 2), (1, 8), (8, 1)]:
            grid = np.array(jax.devices()).reshape(d, m)
            result = {"mesh": {"shape": [d, m], "device_ids": [[int(x.id) for x in row] for row in grid]}}
            for axes in CANDIDATE_AXES:
                rec = _sharding_record(NamedSharding(Mesh(grid, ("data", "model")), P(*axes)), (16, 24))
                assert has_layout(rec, axes, result), (d, m, axes)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]

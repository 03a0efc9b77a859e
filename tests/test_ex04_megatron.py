"""Exercise 4's checks name a layout in words, without sizes: ``recognise`` on the blocks
each device holds, for layouts built by hand on the grader's meshes."""

import pytest

from grader.exercises.ex04_megatron.judges import CANDIDATE_AXES, describe_axes, has_layout, layout_blocks, recognise


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
    assert recognise(rec, result, prefer=("data", None)) == "laid out in some other way"

"""Public checks for exercise 4 (run by `grade exercise 4`; they carry no points).

They use one fixed set of shapes on the 2x4 mesh and on the 4x2 mesh.  The hidden checks
test the same properties on shapes and values drawn at grading time, on the 2x4 mesh and on
every other mesh shape (4x2, 1x8 and 8x1).
"""

import zlib

import numpy as np
import pytest

from grader.exercises.ex04_megatron.judges import (check_collectives, check_numerics, check_output, check_specs,
                                                   check_weights, expect_layout, expect_placed, mlp_reference, where)
from grader.feedback import CheckFailed, expect_array, expect_close
from grader.ir import collective_counts

MESH = (2, 4)
OTHER_MESH = (4, 2)
B, D, H, O = 16, 8, 32, 8  # batch, input features, hidden units, outputs


def _arrays(seed, tag):
    rng = np.random.default_rng([seed, zlib.crc32(tag)])
    x = rng.normal(size=(B, D)).astype(np.float32)
    w1 = (rng.normal(size=(D, H)) / np.sqrt(D)).astype(np.float32)
    w2 = (rng.normal(size=(H, O)) / np.sqrt(H)).astype(np.float32)
    return x, w1, w2


@pytest.fixture(scope="module")
def run(submission, seed):
    """One lower + compile + run of your layout on the 2x4 mesh, shared by the checks."""
    arrays = _arrays(seed, b"ex04-public")
    return arrays, submission.probe("ex04_megatron:run_on_mesh", list(MESH), *arrays)


def test_numerics_on_2x4(run):
    (x, w1, w2), result = run
    expect_placed(result)
    out = expect_array(result["output"], shape=(B, O), dtype="float32", what="mlp(x, w1, w2) on the 2x4 mesh")
    reference = mlp_reference(x, w1, w2)
    expect_close(out, reference, rtol=1e-4, atol=1e-4, reveal=True, what="mlp(x, w1, w2) on the 2x4 mesh",
                 hint="the layout must not change the numbers: keep mlp as given and place the arrays unchanged")


def test_collectives_on_2x4(run):
    _, result = run
    expect_placed(result)
    counts = collective_counts(result["hlo"])
    found = {op: n for op, n in counts.items() if n}
    if found != {"all-reduce": 1}:
        raise CheckFailed(
            "the compiled forward pass does not communicate like Megatron's MLP",
            measured="collectives in the optimized HLO: " + (", ".join(f"{op} x{n}" for op, n in found.items()) or "none")
                     + f"\ninput shardings: {result['input_shardings_text']}",
            expected="exactly one all-reduce (over 'model', after the second matmul) and nothing else",
            hint="w1 split along its columns and w2 along its rows, both over 'model', let each device compute a "
                 "partial x @ w1 @ w2 that one all-reduce sums; an all-gather or all-to-all means an input is split "
                 "along the wrong axis. Run `python megatron.py` to print the HLO.",
        )


def test_layout_on_2x4(submission, run):
    """The layout itself: what partition_specs() says, where shard_inputs puts each input, and
    where the output comes out.  One all-reduce alone does not show it (a replicated w2 or x
    gives one too)."""
    arrays, result = run
    expect_placed(result, MESH)
    specs = submission.probe("ex04_megatron:read_specs", list(MESH), [list(a.shape) for a in arrays])
    check_specs(MESH, specs, result, where(MESH))
    for name, record in zip(("x", "w1", "w2"), result["inputs"]):
        expect_layout(name, record, MESH, result, where(MESH))
    check_output(MESH, arrays, result, where(MESH))
    check_weights(MESH, arrays, result, where(MESH))


def test_same_code_on_4x2(submission, seed):
    """Everything above again on a mesh of another shape: the code must use the mesh it is given."""
    arrays = _arrays(seed, b"ex04-public-4x2")
    result = submission.probe("ex04_megatron:run_on_mesh", list(OTHER_MESH), *arrays)
    label = where(OTHER_MESH)
    for check in (check_numerics, check_output, check_weights, check_collectives):
        check(OTHER_MESH, arrays, result, label)
    specs = submission.probe("ex04_megatron:read_specs", list(OTHER_MESH), [list(a.shape) for a in arrays])
    check_specs(OTHER_MESH, specs, result, label)

"""Public checks for exercise 4 (run by `grade exercise 4`; they carry no points).

Both checks use the 2x4 mesh and one fixed set of shapes.  The hidden checks test the
same properties, and more (the output's layout, the weights' shards, a second mesh
shape), on shapes and values drawn at grading time.
"""

import zlib

import numpy as np
import pytest

from grader.exercises.ex04_megatron.judges import expect_placed, mlp_reference
from grader.feedback import CheckFailed, expect_array, expect_close
from grader.ir import collective_counts

MESH = (2, 4)
B, D, H, O = 16, 8, 32, 8  # batch, input features, hidden units, outputs


@pytest.fixture(scope="module")
def run(submission, seed):
    """One lower + compile + run of your layout on the 2x4 mesh, shared by both checks."""
    rng = np.random.default_rng([seed, zlib.crc32(b"ex04-public")])
    x = rng.normal(size=(B, D)).astype(np.float32)
    w1 = (rng.normal(size=(D, H)) / np.sqrt(D)).astype(np.float32)
    w2 = (rng.normal(size=(H, O)) / np.sqrt(H)).astype(np.float32)
    return (x, w1, w2), submission.probe("ex04_megatron:run_on_mesh", list(MESH), x, w1, w2)


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

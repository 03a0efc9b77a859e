import numpy as np

from grader.feedback import expect_array, expect_close
from grader.testing import count_compiles, expect_compiles


def test_doubles(submission, rng):
    x = rng.normal(size=int(rng.integers(2, 9))).astype(np.float32)
    expect_close(expect_array(submission.call("double", x), shape=x.shape), 2 * x)


def test_compiles_once(submission, reference, rng):
    # size 16: `test_doubles` never draws it, so its calls cannot have compiled this shape already
    calls = [{"args": [rng.normal(size=16).astype(np.float32)]} for _ in range(3)]
    _, compiles = count_compiles(submission, reference, "double", calls)
    expect_compiles(compiles, at_most=1)
    assert compiles.names() == ["double"], "raw assertion text that must stay hidden"
